"""A real worker process (``tests.helpers.pipeline_worker``: the real post-turn actors on the
embedded broker) whose database becomes read-only, or damaged, while it runs: it stops
taking messages, says why (one ``storage_paused`` line: database, state, fix; no memory
text), `mnemo health` is unhealthy naming the reason, and once the file is writable again
(or restored) the worker takes messages again: every turn sent is recorded, nothing already
stored is lost.

How the fault is made real (the tests run as root, which ignores permission bits):

- read-only: ``chattr +i`` on the database and its ``-wal`` file. The kernel then refuses
  every write to them, root's too: a new connection gets SQLITE_READONLY, the worker's open
  connections get EPERM on their writes (SQLITE_IOERR_WRITE). The ``-shm`` file is left
  writable: SQLite maps it into memory, and a store to an immutable mapping kills the
  process with SIGBUS, which is a crash, not a read-only database. (A read-only remount is
  refused while a process holds files open for writing; tests/test_storage_faults.py remounts
  with no process running.)
- damaged: every page after the header page garbled in place, so ``PRAGMA quick_check``
  fails; restored with `mnemo restore latest --to DATA --yes` from a `mnemo backup now`
  taken before, with the worker stopped, as the restore's own help asks.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_core import Memory
from memory_core.clock import utcnow
from memory_core.db import open_ops, open_state
from memory_core.heartbeats import WORKER, read_all
from memory_core.settings import Settings
from scripts.cli import main
from tests.conftest import REPO, service_unavailable
from tests.helpers.post_turn import TABLES, seed_tenants, turn
from tests.helpers.queue_env import stop_process, wait_for
from tests.test_storage_probe import garble


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_HASH_DIM": "32",
           "MNEMO_LOG_LEVEL": "info", "MNEMO_LOG_FORMAT": "json",
           "MNEMO_STORAGE_RETRY_S": "0.2", "MNEMO_STORAGE_CHECK_S": "1",
           "MNEMO_HEARTBEAT_INTERVAL_S": "1", "MNEMO_QUEUE_LEASE_SECONDS": "5",
           "MNEMO_BACKUP_DIR": str(tmp_path / "backups")}
    for name in ("MNEMO_BROKER_URL", "CI_UNUSED"):
        env.pop(name, None)
    seed_tenants(Settings.from_env(env))
    return env


class WorkerProcess:
    """``tests.helpers.pipeline_worker`` on queue ``turns``, its log in a file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        out = open(log, "ab")  # noqa: SIM115 - closed with the process by the OS
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.pipeline_worker", "--queues", "turns"],
            cwd=REPO, env=env, stdout=out, stderr=out)

    def lines(self) -> list[dict[str, Any]]:
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                found.append(event)
        return found

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.lines() if e.get("event") == name]

    def stop(self) -> int:
        return stop_process(self.proc, signal.SIGTERM)


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """``chattr +i`` on files (made mutable again at the end, whatever happened)."""
    if shutil.which("chattr") is None:
        service_unavailable("chattr (e2fsprogs), to make a database file immutable")
    made: list[Path] = []
    yield made
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def make_immutable(made: list[Path], db: Path) -> None:
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
            if done.returncode != 0:
                service_unavailable(f"chattr +i on {path.parent}: {done.stderr.decode().strip()}")
            made.append(path)


def make_mutable(made: list[Path]) -> None:
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def _health(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(main, ["health", "--json"], env=env)
    report = json.loads(result.stdout)
    assert (result.exit_code == 2) == (report["status"] == "unhealthy"), result.output
    return {"status": report["status"], **{c["name"]: c for c in report["checks"]}}


def _rows(settings: Settings, table: str = "turns") -> list[tuple[Any, ...]]:
    state = open_state(settings, migrate=False, readonly=True)
    try:
        return sorted(tuple(r) for r in state.conn.execute(TABLES[table]))
    finally:
        state.close()


def _send(settings: Settings, turns: list[dict[str, Any]]) -> None:
    with Memory.open(settings) as mem:
        for t in turns:
            mem.after_turn(t)


def _settled(count: Callable[[], int], *, quiet_s: float, timeout_s: float) -> int:
    """``count()`` once it has not changed for ``quiet_s`` seconds; fails the test after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    seen, since = count(), time.monotonic()
    while time.monotonic() - since < quiet_s:
        if time.monotonic() > deadline:
            pytest.fail(f"still changing after {timeout_s:.0f} s (at {seen})")
        time.sleep(0.2)
        current = count()
        if current != seen:
            seen, since = current, time.monotonic()
    return seen


def _beat_after(settings: Settings, pid: int, after: datetime) -> datetime | None:
    """When worker ``pid`` last beat, if that beat was written after ``after`` and says the
    worker is not paused; else None."""
    ops = open_ops(settings, migrate=False)
    try:
        beats = [b for b in read_all(ops.conn, WORKER) if b.pid == pid]
    finally:
        ops.close()
    if beats and beats[0].last_seen_at > after and beats[0].paused_reason() is None:
        return beats[0].last_seen_at
    return None


def _no_memory_text(log: Path, turns: list[dict[str, Any]]) -> None:
    text = log.read_text(errors="replace")
    for t in turns:
        assert t["text"] not in text, "a log line quotes a turn's text"


TURNS = [turn(i, session=f"s{i // 10}") for i in range(30)]
# TEXTS repeat every 8 turns; the log check needs one text per turn it looks for.
for _i, _t in enumerate(TURNS):
    _t["text"] = f"{_t['text']} (turn {_i} remark {_i * 7919 % 1000})"


@pytest.mark.parametrize("kind", ["state", "ops"])
def test_a_database_made_read_only_under_a_running_worker_pauses_it_until_writable(
        tmp_path: Path, immutable: list[Path], kind: str) -> None:
    env = _env(tmp_path)
    settings = Settings.from_env(env)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        _send(settings, TURNS[:10])
        wait_for(lambda: len(_rows(settings)) == 10, 60, interval=0.2)
        stored = _rows(settings)
        if kind == "ops":
            # The embedded queue lives in the ops db: what is sent must be queued first.
            _send(settings, TURNS[10:20])
        make_immutable(immutable, getattr(settings, f"{kind}_db_path"))
        if kind == "state":
            _send(settings, TURNS[10:20])  # queued; recording them meets the read-only file

        paused = wait_for(lambda: worker.events("storage_paused"), 30, interval=0.2)
        line = paused[0]
        assert line["databases"] == {kind: "readonly"}, line
        assert line["path"] == str(getattr(settings, f"{kind}_db_path"))
        assert "not writable" in line["detail"]
        assert "make the file, its -wal and -shm files, its folder and the mount writable" \
            in line["fix"]
        health = _health(env)
        assert health["status"] == "unhealthy"
        db_check = health[f"{kind}_db"]
        assert db_check["status"] == "unhealthy" and "cannot be written" in db_check["reason"]
        if kind == "state":  # the ops db takes the heartbeat that says so
            workers = wait_for(lambda: (c := _health(env)["workers"])["status"] != "ok" and c,
                               10, interval=0.2)
            assert "paused: state db readonly" in workers["reason"]
        before = len(_rows(settings))
        assert _rows(settings)[:10] == stored  # what was stored is all there
        # Paused: it takes no message (none is processed, none fails). The guard logs the
        # pause before the worker threads stop, so one message they had may still end: the
        # count is read once it has settled, and must then stay put.
        taken = _settled(lambda: len(worker.events("message_done")), quiet_s=1.0,
                         timeout_s=30)
        time.sleep(1.5)
        assert len(worker.events("message_done")) == taken

        make_mutable(immutable)
        wait_for(lambda: worker.events("storage_resumed"), 30, interval=0.2)
        resumed = utcnow()
        wait_for(lambda: len(_rows(settings)) == 20, 60, interval=0.2)
        # Connections opened while the file was read-only (SQLite opens such a file
        # read-only, silently) are replaced on resume: the heartbeat is written again, beat
        # after beat. One beat may have been in flight at the resume, and failed.
        pid = worker.proc.pid
        first = wait_for(lambda: _beat_after(settings, pid, resumed), 30, interval=0.2)
        wait_for(lambda: _beat_after(settings, pid, first), 30, interval=0.2)
        after = [e["event"] for e in worker.lines()]
        after = after[after.index("storage_resumed"):]
        assert after.count("heartbeat_write_failed") <= 1, after
        assert before <= 20
        _send(settings, TURNS[20:30])  # and it keeps taking new work
        wait_for(lambda: len(_rows(settings)) == 30, 60, interval=0.2)
        rows = _rows(settings)
        assert [r[1] for r in rows] == [t["turn_uid"] for t in TURNS]  # none lost, none twice
        assert set(stored) <= set(rows)
        assert _health(env)[f"{kind}_db"]["status"] == "ok"
    finally:
        assert worker.stop() == 0
    _no_memory_text(worker.log, TURNS)
    assert len(worker.events("storage_paused")) == 1


def test_a_damaged_state_db_pauses_the_worker_until_restored(tmp_path: Path) -> None:
    env = _env(tmp_path)
    settings = Settings.from_env(env)
    data = settings.data_dir
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        _send(settings, TURNS[:10])
        wait_for(lambda: len(_rows(settings)) == 10, 60, interval=0.2)
        stored = _rows(settings)
        backup = CliRunner().invoke(main, ["backup", "now"], env=env)
        assert backup.exit_code == 0, backup.output

        garble(settings.state_db_path)
        paused = wait_for(lambda: worker.events("storage_paused"), 30, interval=0.2)
        assert paused[0]["databases"] == {"state": "damaged"}
        assert "mnemo restore latest --to DIR" in paused[0]["fix"]
        health = _health(env)
        assert health["status"] == "unhealthy"
        assert health["state_db"]["status"] == "unhealthy"
        assert "is damaged" in health["state_db"]["reason"]
        workers = wait_for(lambda: (c := _health(env)["workers"])["status"] != "ok" and c,
                           10, interval=0.2)
        assert "paused: state db damaged" in workers["reason"]
    finally:
        assert worker.stop() == 0  # a paused worker still stops cleanly

    restored = CliRunner().invoke(main, ["restore", "latest", "--to", str(data), "--yes"],
                                  env=env)
    assert restored.exit_code == 0, restored.output
    assert _rows(settings) == stored
    worker = WorkerProcess(env, tmp_path / "worker2.log")
    try:
        _send(settings, TURNS[10:20])
        wait_for(lambda: len(_rows(settings)) == 20, 60, interval=0.2)
        assert not worker.events("storage_paused")
        assert _health(env)["state_db"]["status"] == "ok"
    finally:
        assert worker.stop() == 0
    assert set(stored) <= set(_rows(settings))
    _no_memory_text(tmp_path / "worker.log", TURNS)
