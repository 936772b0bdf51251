"""Tools for the queue tests: test-owned redis-servers, in-process and subprocess workers.

The fixtures built on them are in ``tests.helpers.queue_fixtures`` (a pytest plugin).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
import redis
from dramatiq import Worker

from tests.conftest import REPO, service_unavailable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(condition: Callable[[], Any], timeout: float, interval: float = 0.02) -> Any:
    """Poll ``condition`` until truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(interval)


class RedisServer:
    """A redis-server owned by one test: its own port and directory; appendonly on unless
    ``persistent=False`` (then a restart starts empty); ``extra_args`` go to the server."""

    def __init__(self, directory: Path, *, persistent: bool = True,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.dir = directory
        self.port = free_port()
        self.persistent = persistent
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--appendonly", "yes" if self.persistent else "no", "--save", "",
             "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log"),
             *self.extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                if client.ping():
                    break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()

    def kill(self) -> None:
        """SIGKILL: whatever Redis did not persist is gone."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        """Graceful stop (SIGTERM): Redis flushes its append-only file first."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=15)
        self.proc = None


def started_redis(tmp_path: Path, **options: Any) -> Iterator[RedisServer]:
    """A started test-owned redis-server (``RedisServer`` options); stopped at teardown
    whatever happened. No redis-server binary: skips on a laptop, fails under CI."""
    if shutil.which("redis-server") is None:
        service_unavailable("redis-server (the binary, to start a test-owned server)")
    server = RedisServer(tmp_path / f"redis-{uuid.uuid4().hex[:6]}", **options)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def drop_namespace(url: str, namespace: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{namespace}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def cli_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The CLI's environment for a fixture with ``params=["embedded", "redis"]``: a fresh data
    dir and, for redis, a test-owned server (the ``own_redis`` fixture)."""
    env = {"MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "warning"}
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("own_redis")
        env["MNEMO_BROKER_URL"] = server.url
    return env


class _Target(Protocol):
    namespace: str

    def close(self) -> None: ...


T = TypeVar("T", bound=_Target)


def broker_target(request: pytest.FixtureRequest, make: Callable[[str, str | None], T]
                  ) -> Iterator[T]:
    """The body of a target fixture with ``params=["embedded", "redis"]``: ``make(kind,
    url)`` (url only for redis), closed at the end, its Redis namespace dropped."""
    url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    t = make(request.param, url)
    yield t
    t.close()
    if url:
        drop_namespace(url, t.namespace)


@contextlib.contextmanager
def running(broker: Any, threads: int = 2) -> Iterator[Worker]:
    """A Dramatiq Worker on ``broker`` in this process, stopped on exit."""
    broker.emit_after("process_boot")
    worker = Worker(broker, worker_threads=threads, worker_timeout=100)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(timeout=10_000)


def start_worker_process(env: dict[str, str], marker: Path, *extra: str) -> subprocess.Popen[bytes]:
    """``tests.helpers.queue_worker`` in a subprocess (its log goes to ``marker``.log)."""
    log = open(f"{marker}.log", "ab")  # noqa: SIM115 - closed with the process by the OS
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.queue_worker",
                             "--marker", str(marker), *extra],
                            cwd=REPO, env=env, stdout=log, stderr=log)


def marker_lines(marker: Path) -> list[list[str]]:
    if not marker.exists():
        return []
    return [line.split() for line in marker.read_text().splitlines() if line.strip()]


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM,
                 timeout: float = 20) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=5)
