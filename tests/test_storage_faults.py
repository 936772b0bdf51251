"""Storage faults: a damaged, read-only or full database gives its Error: line and exit code
4, a worker stops taking messages and resumes, and nothing already stored is lost.

Read-only and full are real: a small tmpfs this test mounts (the tests run as root, where
chmod does not stop writes), remounted read-only, or filled to the last byte.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dramatiq
import pytest
import structlog
from click.testing import CliRunner
from dramatiq import Message

from memory_core.brokers.embedded import EmbeddedBroker
from memory_core.clock import utcnow
from memory_core.db import connect, migrate_stores, open_state
from memory_core.db.faults import free_bytes, storage_status
from memory_core.errors import StoreDamagedError
from memory_core.health import HealthEnv, probe
from memory_core.settings import Settings
from scripts.cli import main
from tests.conftest import service_unavailable
from tests.helpers.queue_env import running, wait_for
from workers.entry import build_worker_broker
from workers.middleware import DurableRetries
from workers.storage_guard import storage_guard_of


def cli(data_dir: Path, *args: str) -> Any:
    return CliRunner().invoke(main, list(args), env={"MNEMO_DATA_DIR": str(data_dir)})


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 8 MiB tmpfs of this test's own (unmounted at the end)."""
    where = tmp_path / "small"
    where.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)],
                          capture_output=True, check=False)
    if made.returncode != 0:
        service_unavailable(f"a tmpfs mount (needs root): {made.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(fs: Path, leave: int = 0) -> Path:
    """Write a file until the file system has ``leave`` bytes or less free (default: full);
    returns it (delete it to free space)."""
    filler = fs / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as f:
        while free_bytes(filler) > leave + 65536 or leave == 0:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


def tenants(data_dir: Path) -> list[str]:
    result = cli(data_dir, "tenant", "list")
    assert result.exit_code == 0, result.output
    return result.output.split()


def test_a_truncated_state_db_is_damaged_not_a_missing_fts5(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert cli(data, "tenant", "add", "acme").exit_code == 0
    state = data / "memory_state.db"
    for side in ("-wal", "-shm"):
        Path(f"{state}{side}").unlink(missing_ok=True)
    state.write_bytes(state.read_bytes()[:5000])
    before = state.read_bytes()

    with pytest.raises(StoreDamagedError, match="restore latest --to DIR"):
        open_state(Settings.from_env({}, data_dir=data))
    result = cli(data, "tenant", "list")
    assert result.exit_code == 4
    assert f"Error: {state} is damaged" in result.output
    assert "FTS5" not in result.output and "pysqlite3" not in result.output
    assert "Traceback" not in result.output
    assert state.read_bytes() == before  # the damaged file is left as found
    assert storage_status(Settings.from_env({}, data_dir=data))["state"].state == "damaged"


def test_garbled_ops_pages_give_an_error_line_from_queue_stats(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert cli(data, "db", "migrate").exit_code == 0
    ops = data / "memory_ops.db"
    raw = bytearray(ops.read_bytes())
    for i in range(8192, len(raw)):  # keep the header page, garble every page after it
        raw[i] = (i * 7) & 0xFF
    ops.write_bytes(bytes(raw))

    result = cli(data, "queue", "stats")
    assert result.exit_code == 4
    assert result.output.startswith(f"Error: {ops} is damaged")
    assert "mnemo restore latest" in result.output


def test_a_read_only_data_dir_names_the_file_and_keeps_the_data(small_fs: Path) -> None:
    assert cli(small_fs, "tenant", "add", "acme").exit_code == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)

    result = cli(small_fs, "tenant", "add", "beta")
    assert result.exit_code == 4
    assert result.output.startswith(f"Error: {small_fs / 'memory_state.db'} cannot be written")
    assert "mounted read-only" in result.output and "writable" in result.output
    status = storage_status(Settings.from_env({}, data_dir=small_fs))
    assert {k: s.state for k, s in status.items()} == {"state": "readonly", "ops": "readonly"}

    subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)
    assert tenants(small_fs) == ["acme"]


def test_a_full_disk_names_the_file_and_keeps_the_data(small_fs: Path) -> None:
    assert cli(small_fs, "tenant", "add", "acme").exit_code == 0
    filler = fill(small_fs)

    result = cli(small_fs, "tenant", "add", "beta")
    assert result.exit_code == 4
    assert "cannot be written, the disk is full" in result.output
    assert "Traceback" not in result.output

    filler.unlink()
    assert cli(small_fs, "tenant", "add", "beta").exit_code == 0
    assert tenants(small_fs) == ["acme", "beta"]


def _rows(path: Path) -> list[str]:
    conn = connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT key FROM done ORDER BY key")]
    finally:
        conn.close()


def test_a_worker_on_a_full_disk_stops_and_resumes(small_fs: Path) -> None:
    settings = Settings.from_env({}, data_dir=small_fs)
    migrate_stores(settings)
    target = small_fs / "effects.db"
    conn = connect(target)
    conn.execute("CREATE TABLE done (key TEXT PRIMARY KEY, pad BLOB)")
    conn.close()

    recorded: list[str] = []

    def declare(broker: Any) -> None:
        def record(key: str) -> None:
            c = connect(target)
            try:
                c.execute("INSERT OR IGNORE INTO done VALUES (?, zeroblob(20000))", (key,))
            finally:
                c.close()
            recorded.append(key)

        dramatiq.actor(record, broker=broker, actor_name="record", queue_name="faults",
                       max_retries=20, min_backoff=50, max_backoff=200)

    broker = build_worker_broker(settings, declare=declare, guard_interval_s=0.1)
    for i in range(5):
        broker.enqueue(Message(queue_name="faults", actor_name="record", args=(f"k{i}",),
                               kwargs={}, options={}))
    filler = fill(small_fs)
    with structlog.testing.capture_logs() as logs, running(broker):
        wait_for(lambda: any(e["event"] == "storage_paused" for e in logs), 10)
        time.sleep(0.5)  # paused: nothing is taken while the disk is full
        assert recorded == []
        paused = [e for e in logs if e["event"] == "storage_paused"]
        assert len(paused) == 1 and paused[0]["databases"] == {"state": "full", "ops": "full"}
        filler.unlink()
        wait_for(lambda: len(set(recorded)) == 5, 20)
        assert any(e["event"] == "storage_resumed" for e in logs)
    assert _rows(target) == [f"k{i}" for i in range(5)]
    broker.close()


def test_a_retry_that_cannot_be_stored_returns_the_message(tmp_path: Path) -> None:
    broker = EmbeddedBroker(tmp_path / "ops.db", lease_seconds=30,
                            middleware=[DurableRetries(max_retries=5)])
    dramatiq.actor(lambda: None, broker=broker, actor_name="job", queue_name="q")
    broker.enqueue(Message(queue_name="q", actor_name="job", args=(), kwargs={}, options={}))
    consumer = broker.consume("q")
    # This test beats the leases by hand. The lease keeper's own beat (at its start, then
    # every 5 s, on its thread's connection, which query_only does not cover) would release
    # the abandoned delivery whenever the machine stalls this thread long enough: stop it
    # (its first beat done) so the checks below see only the test's own beats.
    assert broker._keeper is not None
    broker._keeper.stop()
    assert not broker._keeper.is_alive()
    delivery = wait_for(lambda: next(consumer), 60)
    conn = broker.db.conn
    conn.execute("PRAGMA query_only = ON")  # SQLite's own SQLITE_READONLY on every write

    broker.emit_after("process_message", delivery, exception=RuntimeError("boom"))
    consumer.ack(delivery)  # no ack, no ConnectionClosed loop: the message is given back
    assert broker._abandoned == {(delivery.row_id, delivery.attempts)}
    with pytest.raises(Exception, match="readonly"):
        broker._keep_leases()  # the lease is not renewed while the database refuses writes

    conn.execute("PRAGMA query_only = OFF")
    broker._keep_leases()
    assert conn.execute("SELECT state, lease_owner FROM queue_messages").fetchall() == [
        ("ready", None)]
    again = wait_for(lambda: next(consumer), 60)
    assert again.message_id == delivery.message_id and again.attempts == 2
    consumer.close()
    broker.close()


def test_storage_status_is_ok_for_a_fresh_data_dir(settings: Settings) -> None:
    migrate_stores(settings)
    status = storage_status(settings)
    assert {k: (s.state, s.path.name) for k, s in status.items()} == {
        "state": ("ok", "memory_state.db"), "ops": ("ok", "memory_ops.db")}
    assert os.path.exists(settings.state_db_path)


def _health_cli(data_dir: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, ["health", "--json", *args],
                                env={"MNEMO_DATA_DIR": str(data_dir)})
    return result.exit_code, json.loads(result.stdout)


def _workers_check(settings: Settings) -> dict[str, Any]:
    _, report = _health_cli(settings.data_dir)
    return next(c for c in report["checks"] if c["name"] == "workers")


def test_a_paused_worker_is_in_its_heartbeat_and_in_mnemo_health(small_fs: Path) -> None:
    # Almost full (under the 1 MiB the guard wants free) but a heartbeat still fits: the
    # guard's boot probe pauses the worker before a write fails half-way, and the heartbeat
    # says so.
    settings = Settings.from_env({"MNEMO_HEARTBEAT_INTERVAL_S": "1"}, data_dir=small_fs)
    migrate_stores(settings)

    def declare(broker: Any) -> None:
        dramatiq.actor(lambda: None, broker=broker, actor_name="noop", queue_name="faults")

    broker = build_worker_broker(settings, declare=declare, guard_interval_s=0.1)
    guard = storage_guard_of(broker)
    assert guard is not None
    filler = fill(small_fs, leave=256 * 1024)
    with running(broker):
        wait_for(lambda: guard.state()["paused"], 10)
        assert guard.state()["databases"] == {"state": "full", "ops": "full"}
        workers = wait_for(lambda: (c := _workers_check(settings))["status"] != "ok" and c, 10)
        assert workers["status"] == "unhealthy", workers
        assert workers["reason"].startswith("no worker takes messages: worker ")
        assert " paused: ops db full, state db full (it resumes by itself" in workers["reason"]
        # Alive (a restart would not help) but not ready.
        code, alive = _health_cli(small_fs, "--worker")
        assert code == 0 and "paused: ops db full, state db full" in alive["checks"][0]["reason"]
        code, ready = _health_cli(small_fs, "--worker", "--ready")
        assert code == 2 and ready["checks"][0]["name"] == "worker_ready"
        assert "(alive, not ready;" in ready["checks"][0]["reason"]
        _, report = _health_cli(small_fs)
        state_db = next(c for c in report["checks"] if c["name"] == "state_db")
        assert state_db["status"] == "unhealthy" and "the disk is full" in state_db["reason"]
        assert f"free space on the file system holding {small_fs}" in state_db["reason"]

        filler.unlink()
        wait_for(lambda: not guard.state()["paused"], 10)
        wait_for(lambda: _workers_check(settings)["status"] == "ok", 10)
        assert _health_cli(small_fs, "--worker", "--ready")[0] == 0
        env = HealthEnv(settings, utcnow())
        try:
            assert probe(env, "worker", ready=True).status == "ok"
        finally:
            env.close()
    broker.close()
