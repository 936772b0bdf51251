"""The StorageGuard's periodic probe: a database damaged while messages keep succeeding (the
damage is in pages no message touches) pauses the worker within ``check_s``; the probe
costs at most 1% of one thread's time.

Real files, a real Dramatiq Worker on the real embedded broker; the damage is real garbled
pages in memory_state.db, which the test actor never opens.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dramatiq
import structlog
from dramatiq import Message

from memory_core.db import connect, migrate_stores
from memory_core.db.faults import StorageStatus, storage_status
from memory_core.settings import Settings
from tests.helpers.queue_env import running, wait_for
from workers.entry import build_worker_broker
from workers.storage_guard import PROBE_BUDGET, StorageGuard, storage_guard_of


def garble(path: Path) -> bytes:
    """Overwrite every page of ``path`` after the first with garbage (what a torn disk or a
    stray writer leaves); returns the bytes it had, to put back."""
    before = path.read_bytes()
    page = int.from_bytes(before[16:18], "big") or 65536
    raw = bytearray(before)
    for i in range(page, len(raw)):
        raw[i] = (i * 7 + 3) & 0xFF
    with open(path, "r+b") as f:  # in place: the same file (inode) the worker probes
        f.write(raw)
    return before


def put_back(path: Path, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate()


@dataclass
class Round:
    """One probe round of a StorageGuard."""

    started: float  # time.monotonic()
    period_s: float  # the guard's period when it started: the wait that led to it
    states: dict[str, str]  # database kind -> state found


def note_rounds(guard: StorageGuard, rounds: list[Round], done: threading.Event) -> None:
    """Have ``guard`` probe through its own probe, each round noted in ``rounds`` and
    ``done`` set after it."""
    real = guard.probe

    def probe() -> dict[str, StorageStatus]:
        started, period_s = time.monotonic(), guard.period_s()
        statuses = real()
        rounds.append(Round(started, period_s, {k: s.state for k, s in statuses.items()}))
        done.set()
        return statuses

    guard.probe = probe


def test_a_db_damaged_while_messages_succeed_pauses_the_worker_within_the_bound(
        tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path / "data")
    migrate_stores(settings)
    effects = tmp_path / "effects.db"
    conn = connect(effects)
    conn.execute("CREATE TABLE done (key TEXT PRIMARY KEY, at REAL)")
    conn.close()
    succeeded: list[tuple[str, float]] = []

    def declare(broker: Any) -> None:
        def record(key: str) -> None:  # never opens the state db: it keeps succeeding
            c = connect(effects)
            try:
                c.execute("INSERT OR IGNORE INTO done VALUES (?, ?)", (key, time.time()))
            finally:
                c.close()
            succeeded.append((key, time.monotonic()))

        dramatiq.actor(record, broker=broker, actor_name="record", queue_name="probe",
                       max_retries=20, min_backoff=50, max_backoff=200)

    check_s = 1.0
    broker = build_worker_broker(settings, declare=declare, guard_interval_s=0.1,
                                 guard_check_s=check_s)
    guard = storage_guard_of(broker)
    assert guard is not None
    rounds: list[Round] = []
    probed = threading.Event()
    note_rounds(guard, rounds, probed)
    sent: list[str] = []
    stop = threading.Event()

    def feed() -> None:  # a steady stream of messages, as a busy chat would send
        i = 0
        while not stop.is_set():
            key = f"k{i:04d}"
            broker.enqueue(Message(queue_name="probe", actor_name="record", args=(key,),
                                   kwargs={}, options={}))
            sent.append(key)
            i += 1
            time.sleep(0.02)

    feeder = threading.Thread(target=feed, daemon=True)
    with structlog.testing.capture_logs() as logs, running(broker) as worker:
        feeder.start()
        wait_for(lambda: len(succeeded) >= 10, 60)
        # Damaged just after a probe round: about one period of traffic before the next.
        probed.clear()
        assert probed.wait(30)
        before = garble(settings.state_db_path)
        damaged_at = time.monotonic()
        paused = wait_for(lambda: [e for e in logs if e["event"] == "storage_paused"], 30)
        # Messages kept succeeding on the damaged data dir until the probe noticed.
        assert any(at > damaged_at for _, at in succeeded)
        assert not [e for e in logs if e["event"] == "storage_probe_failed"]
        bound = guard.period_s()  # check_s, or 100 x the probe's CPU time if that is longer
        assert bound < 3 * check_s, (bound, guard.last_cost_s)
        # The round that found it started within one period of the damage (+ slack for the
        # guard thread's wake on a busy machine; the probe's own run is the machine's).
        caught = next(r for r in rounds if r.states.get("state") == "damaged")
        assert caught.started - damaged_at <= caught.period_s + 2.0, (caught, damaged_at)
        assert paused[0]["databases"] == {"state": "damaged"}
        assert paused[0]["path"] == str(settings.state_db_path)
        assert "mnemo restore latest" in paused[0]["fix"]
        assert guard.state()["paused"]
        # The guard says so before Worker.pause has each worker thread finish its message
        # and stop: counted once every one has stopped.
        wait_for(lambda: all(t.paused and t.paused_event.is_set() for t in worker.workers),
                 30)
        done_while_paused = len(succeeded)
        time.sleep(0.5)
        assert len(succeeded) == done_while_paused  # paused: nothing more is taken

        put_back(settings.state_db_path, before)  # restored (the same bytes as before)
        wait_for(lambda: any(e["event"] == "storage_resumed" for e in logs), 30)
        stop.set()
        feeder.join()
        wait_for(lambda: {k for k, _ in succeeded} == set(sent), 60)
    broker.close()
    conn = connect(effects)
    try:
        stored = {r[0] for r in conn.execute("SELECT key FROM done")}
    finally:
        conn.close()
    assert stored == set(sent)  # no message lost while paused


def test_the_periodic_probe_costs_at_most_one_percent(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path / "data")
    migrate_stores(settings)
    spent: list[float] = []

    def timed_probe() -> dict[str, StorageStatus]:  # the real probe, its CPU time counted
        started = time.thread_time()
        try:
            return storage_status(settings)
        finally:
            spent.append(time.thread_time() - started)

    # Asked to probe 1000 times a second: the budget holds it to 1% of the guard's time.
    guard = StorageGuard(timed_probe, interval_s=0.1, check_s=0.001)

    class Worker:
        def pause(self) -> None:
            raise AssertionError("healthy storage must not pause")

        def resume(self) -> None:
            raise AssertionError("never paused")

    started = time.monotonic()
    guard.after_worker_boot(None, Worker())  # type: ignore[arg-type]
    time.sleep(2.0)
    guard.before_worker_shutdown(None, Worker())  # type: ignore[arg-type]
    elapsed = time.monotonic() - started
    assert len(spent) >= 3  # it did probe periodically, not only at boot
    assert sum(spent) <= PROBE_BUDGET * elapsed + max(spent), (sum(spent), elapsed, len(spent))
