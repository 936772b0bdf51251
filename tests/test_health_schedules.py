"""The ``schedule:<id>`` checks of `mnemo health`, on a clock the test sets: a schedule whose
last window started more than twice its cadence ago is degraded, a failed last window is
degraded, a fresh one is ok; never fired is ok until a scheduler has run for two cadences."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core import heartbeats
from memory_core.db import open_ops
from memory_core.db.stores import Database, migrate_stores
from memory_core.health import HealthEnv
from memory_core.health.report import Check
from memory_core.maintenance import firings
from memory_core.settings import Settings
from schedules.health import check_schedules
from schedules.table import get_schedule, window_at

NOW = datetime(2026, 3, 4, 15, 30, tzinfo=UTC)  # a Wednesday afternoon
BACKUP = get_schedule("backup")  # every 6 hours
CADENCE = timedelta(hours=6)


@pytest.fixture
def ops(tmp_path: Path) -> Iterator[tuple[Settings, Database]]:
    settings = Settings.from_env({}, data_dir=tmp_path)
    migrate_stores(settings)
    db = open_ops(settings)
    yield settings, db
    db.close()


def fired(db: Database, start: datetime, *, failed: bool = False) -> str:
    """The ledger rows of one backup window that started at ``start`` and ran."""
    key = firings.window_key(BACKUP.id, start)
    firings.record_claimed(db.conn, BACKUP.id, key, kind=firings.SCHEDULED,
                           window_start=start, fired_at=start)
    assert firings.begin_run(db.conn, BACKUP.id, key, message_id=None, window_start=start,
                             now=start + timedelta(seconds=5))
    if failed:
        firings.fail_run(db.conn, BACKUP.id, key, error="RuntimeError", duration_ms=10,
                         now=start + timedelta(seconds=6))
    else:
        firings.finish_run(db.conn, BACKUP.id, key, counts={}, duration_ms=10, done=True,
                           now=start + timedelta(seconds=6))
    return key


def backup_check(settings: Settings, now: datetime) -> Check:
    env = HealthEnv(settings, now)
    try:
        return next(c for c in check_schedules(env) if c.name == "schedule:backup")
    finally:
        env.close()


def test_the_cadence_is_read_from_the_schedule() -> None:
    window = window_at(BACKUP, NOW)
    assert window.end - window.start == CADENCE and window.start <= NOW < window.end


def test_a_fresh_window_is_ok(ops: tuple[Settings, Database]) -> None:
    settings, db = ops
    start = window_at(BACKUP, NOW).start
    fired(db, start)
    check = backup_check(settings, NOW)
    assert check.status == "ok", check
    assert check.reason == f"last window {start.isoformat(timespec='seconds')}"
    assert check.detail == {"cadence_s": 6 * 3600, "last_window_start": start.isoformat(),
                            "outcome": firings.DONE}


def test_a_window_older_than_twice_the_cadence_is_degraded(
        ops: tuple[Settings, Database]) -> None:
    settings, db = ops
    start = window_at(BACKUP, NOW).start - 2 * CADENCE  # more than 12 h before NOW
    fired(db, start)
    # Exactly twice the cadence after the window started is still on time...
    assert backup_check(settings, start + 2 * CADENCE).status == "ok"
    # ...a second later it is not: the scheduler missed two windows in a row.
    late = backup_check(settings, start + 2 * CADENCE + timedelta(seconds=1))
    assert late.status == "degraded", late
    assert late.reason == (f"last window started {start.isoformat(timespec='seconds')}, more "
                           f"than twice its cadence ({BACKUP.cadence}) ago: is a scheduler "
                           "leading?")
    assert backup_check(settings, NOW).status == "degraded"


def test_a_failed_last_window_is_degraded(ops: tuple[Settings, Database]) -> None:
    settings, db = ops
    start = window_at(BACKUP, NOW).start
    fired(db, start - CADENCE)  # the one before ran fine
    key = fired(db, start, failed=True)
    check = backup_check(settings, NOW)
    assert check.status == "degraded", check
    assert check.reason == (f"window {key} failed (RuntimeError): see `mnemo schedules "
                            "history backup`")
    assert check.detail["outcome"] == firings.FAILED


def test_never_fired_is_degraded_once_a_scheduler_ran_two_cadences(
        ops: tuple[Settings, Database]) -> None:
    settings, db = ops
    assert backup_check(settings, NOW).reason == "no window yet"  # no scheduler ever ran
    started = NOW - 2 * CADENCE - timedelta(minutes=1)
    heartbeats.Heartbeater(db, heartbeats.SCHEDULER, interval_s=1, keep_s=30 * 86_400,
                           clock=lambda: started).beat()
    assert backup_check(settings, NOW - timedelta(minutes=2)).status == "ok"
    check = backup_check(settings, NOW)
    assert check.status == "degraded" and check.reason.startswith("never fired, though a "
                                                                  "scheduler started")
