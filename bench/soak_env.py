"""What ``bench/soak.py`` runs against: the turns, a bench-owned redis-server, worker processes.

Every process started here is in a process group of its own (``start_new_session``), so a
kill reaches the whole group (``mnemo worker`` and the process it spawns) and nothing
outlives the bench: ``stop()`` / ``kill()`` are bounded in time and safe to call twice.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import redis
from embedders import DEFAULT_MODEL_NAME
from locomo_data import Conversation, load

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCOMO = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
MNEMO = str(Path(sys.executable).with_name("mnemo"))


def tenant_names(n: int) -> list[str]:
    return [f"soak{i}" for i in range(n)]


def _stream(convs: list[Conversation], start: int, tenant: str, want: int) -> list[dict]:
    """``want`` turns of one tenant: the conversations in turn from ``start``, again and again
    (each pass a "cycle" a year later, with its own sessions and turn uids)."""
    out: list[dict] = []
    cycle = 0
    while len(out) < want:
        conv = convs[(start + cycle) % len(convs)]
        shift = timedelta(days=400 * cycle)
        for session in conv.sessions:
            sid = f"{conv.tenant}-c{cycle}-s{session.number}"
            for i, turn in enumerate(session.turns):
                if len(out) >= want:
                    return out
                out.append({"tenant": tenant, "session_id": sid,
                            "turn_uid": f"{tenant}:c{cycle}:{conv.tenant}:{turn.dia_id}",
                            "speaker": turn.speaker, "text": turn.text or "(photo)",
                            "occurred_at": (session.at + shift + timedelta(seconds=30 * i))
                            .isoformat(), "index": i})
        cycle += 1
    return out


def soak_turns(total: int, tenants: list[str], path: Path = LOCOMO) -> list[dict]:
    """``total`` LoCoMo turns spread over ``tenants``, in sending order: tenants interleaved,
    each tenant's turns in its own chronological order (as chat hosts would send them)."""
    convs = load(path)
    per = [total // len(tenants) + (1 if i < total % len(tenants) else 0)
           for i in range(len(tenants))]
    streams = [_stream(convs, i, t, n) for i, (t, n) in enumerate(zip(tenants, per, strict=True))]
    out: list[dict] = []
    for i in range(max(per)):
        out.extend(s[i] for s in streams if i < len(s))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _stop(proc: subprocess.Popen[bytes] | None, sig: int, timeout: float) -> None:
    """Signal the group, wait ``timeout`` s, then SIGKILL the group and reap."""
    if proc is None:
        return
    if proc.poll() is None:
        _kill_group(proc, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    _kill_group(proc, signal.SIGKILL)  # also any child left behind by a killed parent
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


class RedisServer:
    """A redis-server of the bench: its own port and ``--dir``, ``appendonly yes`` (as
    docs/queue.md requires), loopback only."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--appendonly", "yes", "--save", "", "--dir", str(self.dir),
             "--logfile", str(self.dir.parent / f"redis-{self.port}.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def crash(self, lose_data: bool) -> None:
        """SIGKILL the server; with ``lose_data`` its directory (the AOF) goes too."""
        _stop(self.proc, signal.SIGKILL, 5)
        self.proc = None
        if lose_data:
            shutil.rmtree(self.dir, ignore_errors=True)

    def stop(self) -> None:
        _stop(self.proc, signal.SIGTERM, 15)
        self.proc = None

    def held(self) -> int:
        """Messages the server holds (waiting, delayed or delivered but not acked): every
        Dramatiq message body lives in a ``<queue>.msgs`` hash until it is acked."""
        client = redis.Redis(port=self.port, socket_timeout=2)
        try:
            return sum(int(client.hlen(k)) for k in client.scan_iter(match="*.msgs", count=1000))
        except redis.RedisError:
            return -1
        finally:
            client.close()


class WorkerProcess:
    """``mnemo worker --processes 1 --threads T``: one worker process as production runs it
    (with its supervising parent), logging to ``log``."""

    def __init__(self, env: dict[str, str], threads: int, log: Path) -> None:
        self.env = env
        self.threads = threads
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [MNEMO, "worker", "--processes", "1", "--threads", str(self.threads),
                 "--grace", "5"], cwd=REPO_ROOT, env=self.env, stdout=out, stderr=out,
                start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the whole group: the worker dies mid-job, nothing is returned."""
        _stop(self.proc, signal.SIGKILL, 5)
        self.proc = None
        self.kills += 1

    def stop(self) -> None:
        _stop(self.proc, signal.SIGTERM, 20)
        self.proc = None

    def pause(self, paused: bool) -> None:
        """SIGSTOP / SIGCONT the group (a worker that stalls, then goes on)."""
        if self.proc is not None and self.proc.poll() is None:
            _kill_group(self.proc, signal.SIGSTOP if paused else signal.SIGCONT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def worker_env(data_dir: Path, broker_url: str | None, lease_s: int,
               resend_s: int, embedder_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker: this one without any MNEMO_* variable, plus the bench's
    (``embedder_env``: the MNEMO_EMBED* variables; default: the hash embedder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(embedder_env or {})
    env.update({"MNEMO_DATA_DIR": str(data_dir), "MNEMO_LOG_LEVEL": "warning",
                "MNEMO_LOG_FORMAT": "json", "MNEMO_QUEUE_LEASE_SECONDS": str(lease_s),
                "MNEMO_TURN_JOURNAL_RESEND_S": str(resend_s),
                "PYTHONPATH": str(REPO_ROOT)})
    if broker_url:
        env["MNEMO_BROKER_URL"] = broker_url
    return env


def embedder_env(embedder: str, model_path: str) -> dict[str, str]:
    """The MNEMO_EMBED* variables of ``--embedder`` (hash: none, the default)."""
    if embedder == "hash":
        return {}
    return {"MNEMO_EMBEDDER": "fastembed",
            "MNEMO_EMBED_MODEL": DEFAULT_MODEL_NAME,
            "MNEMO_EMBED_MODEL_PATH": str(Path(model_path).resolve()),
            "MNEMO_EMBED_THREADS": "1"}
