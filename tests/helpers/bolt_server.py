"""A real Bolt server for the Neo4j sink's tests: ArcadeDB's Bolt plugin (``arcadedb-embedded``,
which bundles its own Java), reporting Neo4j 5.26 compatibility.

The server runs in a child process (``python -m tests.helpers.bolt_server``), not inside
pytest: the JVM is loaded through JPype and crashes the interpreter that hosts it on the way
out, which must not be pytest's. The child prints ``READY <port>`` once the database exists
and exits at once on SIGTERM. It is a stand-in for tests only: the sink's Cypher is plain
Neo4j 5 (deploy targets real Neo4j).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

USER = "root"  # ArcadeDB's administrator
PASSWORD = "mnemo-test-bolt"  # 8+ characters; a throwaway server on 127.0.0.1
DATABASE = "mnemo"  # shared by the tests (they keep apart by tenant)
OWN_DATABASE = "mnemo_own"  # for tests that look at every tenant (they empty it first)
START_TIMEOUT_S = 180.0  # a loaded 2-core machine: the JVM start is ~5 s when idle


def available() -> bool:
    return importlib.util.find_spec("arcadedb_embedded") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class BoltServer:
    """A running server: where to reach it, and how to stop it."""

    host: str
    port: int
    user: str
    password: str
    database: str
    process: subprocess.Popen[str]

    @property
    def url(self) -> str:
        return f"bolt://{self.host}:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)


def _read_ready(out: IO[str], process: subprocess.Popen[str], deadline: float) -> int:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Bolt test server exited with {process.returncode} before "
                               "it was ready (see its log in the root folder)")
        ready, _, _ = select.select([out], [], [], 0.5)
        if ready:
            line = out.readline()
            if line.startswith("READY "):
                return int(line.split()[1])
    raise RuntimeError(f"the Bolt test server was not ready within {START_TIMEOUT_S:.0f} s")


def start(root: Path) -> BoltServer:
    """Start a server with its files under ``root``; raises RuntimeError when it fails."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    repo = Path(__file__).resolve().parents[2]
    log = (root / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.bolt_server", "--root", str(root),
         "--port", str(port)],
        cwd=root, stdout=subprocess.PIPE, stderr=log, text=True,
        env={**os.environ, "PYTHONPATH": str(repo)})
    log.close()
    assert process.stdout is not None
    try:
        port = _read_ready(process.stdout, process, time.monotonic() + START_TIMEOUT_S)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return BoltServer("127.0.0.1", port, USER, PASSWORD, DATABASE, process)


def _serve(root: Path, port: int) -> None:
    import arcadedb_embedded as arcade

    server = arcade.create_server(root_path=str(root / "arcadedb"), root_password=PASSWORD,
                                  # A free HTTP port too: the default 2480 is taken
                                  # by any other test run's server on this machine.
                                  config={"host": "127.0.0.1", "bolt_port": port,
                                          "http_port": free_port(),
                                          "server_plugins":
                                              "Bolt:com.arcadedb.bolt.BoltProtocolPlugin"})
    server.start()
    server.create_database(DATABASE)
    server.create_database(OWN_DATABASE)
    # SIGTERM ends the process at once: a clean JVM shutdown through JPype crashes.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(f"READY {port}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    _serve(args.root, args.port)
