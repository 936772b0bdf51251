"""The firing ledger: its rows, the weekly ``firing_ledger`` body, and its schema upgrade."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.db import open_ops
from memory_core.db.leases import claim
from memory_core.db.migrations import latest_version
from memory_core.maintenance import firings
from memory_core.maintenance.base import JobEnv
from memory_core.maintenance.ledger import firing_ledger, latest_report
from memory_core.settings import Settings
from tests.helpers.queue_env import running, wait_for
from tests.helpers.schedule_env import SchedTarget, ledger
from workers.context import WorkerContext

NOW = datetime(2026, 12, 7, 0, 30, tzinfo=UTC)  # the report's window: Monday 00:30


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[WorkerContext]:
    context = WorkerContext.open(Settings.from_env({}, data_dir=tmp_path / "data"))
    yield context
    context.close()


def _env(ctx: WorkerContext, now: datetime = NOW) -> JobEnv:
    return JobEnv(ctx.settings, ctx.state, ctx.ops, ctx.index, now=now,
                  window=firings.window_key("firing_ledger", now))


def _fired(conn, schedule: str, start: datetime, *, status: str, ms: int | None = None,
           kind: str = firings.SCHEDULED, error: str | None = None) -> str:
    key = firings.window_key(schedule, start) if kind != firings.MANUAL else \
        firings.manual_key()
    firings.record_claimed(conn, schedule, key, kind=kind,
                           window_start=None if kind == firings.MANUAL else start,
                           fired_at=start)
    if status in (firings.DONE, firings.FAILED):
        firings.begin_run(conn, schedule, key, message_id=None, window_start=start,
                          now=start)
        if status == firings.DONE:
            firings.finish_run(conn, schedule, key, counts={"n": 1}, duration_ms=ms or 0,
                               done=True, now=start)
        else:
            firings.fail_run(conn, schedule, key, error=error or "RuntimeError",
                             duration_ms=ms or 0, now=start)
    return key


def test_the_weekly_report_counts_firings_misses_failures_and_durations(
        ctx: WorkerContext) -> None:
    conn = ctx.ops.conn
    day = timedelta(days=1)
    _fired(conn, "macro_sleep", NOW - 6 * day, status="done", ms=100)
    _fired(conn, "macro_sleep", NOW - 5 * day, status="done", ms=300)
    _fired(conn, "macro_sleep", NOW - 4 * day, status="failed", ms=50, error="OSError")
    _fired(conn, "macro_sleep", NOW - 8 * day, status="done", ms=9999)  # the week before
    _fired(conn, "backup", NOW - 2 * day, status="done", ms=2000, kind=firings.CATCH_UP)
    firings.record_missed(conn, "backup", firings.window_key("backup", NOW - 3 * day),
                          NOW - 3 * day, 4, NOW - 2 * day)
    _fired(conn, "backup", NOW - day, status="enqueued", kind=firings.MANUAL)
    _fired(conn, "commitment_gc", NOW, status="done", ms=1)  # at `until`: next week's
    report = firing_ledger(_env(ctx))
    counts = report.counts
    assert counts["schedules"] == 8
    assert (counts["macro_sleep.firings"], counts["macro_sleep.done"],
            counts["macro_sleep.failed"]) == (3, 2, 1)
    assert (counts["macro_sleep.duration_ms_max"], counts["macro_sleep.duration_ms_mean"]) == (
        300, 150)
    assert (counts["backup.firings"], counts["backup.missed"]) == (2, 4)
    assert counts["commitment_gc.firings"] == 0
    assert counts["restore_drill.firings"] == counts["restore_drill.missed"] == 0
    assert (counts["firings"], counts["failures"], counts["misses"]) == (5, 1, 4)
    stored = latest_report(conn)
    assert stored is not None and stored["window"] == firings.window_key("firing_ledger", NOW)
    backup = stored["schedules"]["backup"]
    assert (backup["manual"], backup["catch_up"], backup["open"]) == (1, 1, 1)
    assert stored["schedules"]["macro_sleep"]["last_status"] == "failed"
    # The same window again rewrites the same row.
    again = firing_ledger(_env(ctx))
    assert again.counts == counts | {"pruned": 0}
    assert conn.execute("SELECT count(*) FROM firing_reports").fetchone()[0] == 1


def test_the_report_prunes_history_and_lapsed_window_claims(ctx: WorkerContext) -> None:
    conn = ctx.ops.conn
    keep = timedelta(days=ctx.settings.schedule_history_days)
    _fired(conn, "backup", NOW - keep - timedelta(hours=1), status="done")
    recent = _fired(conn, "backup", NOW - keep + timedelta(hours=1), status="done")
    assert claim(conn, "window:old", "s", 1.0, now=1000.0)  # lapsed long ago
    assert claim(conn, "window:current", "s", 3600.0)
    assert claim(conn, "scheduler-leader", "s", 1.0, now=1000.0)  # not a window claim
    report = firing_ledger(_env(ctx))
    assert report.counts["pruned"] == 1
    assert [r[1] for r in ledger(ctx.ops)] == [recent]
    names = {r[0] for r in conn.execute("SELECT name FROM leases")}
    assert names == {"window:current", "scheduler-leader"}


def test_chained_runs_add_up_their_counts_and_durations(ctx: WorkerContext) -> None:
    conn = ctx.ops.conn
    start = NOW - timedelta(hours=1)
    key = firings.window_key("global_reconsolidation", start)
    for partition in range(3):
        assert firings.begin_run(conn, "global_reconsolidation", key, message_id=None,
                                 window_start=start, now=start)
        firings.finish_run(conn, "global_reconsolidation", key,
                           counts={"merged": partition + 1, "run_id": key},
                           duration_ms=10, done=partition == 2, now=start)
        row = firings.history(conn, "global_reconsolidation")[0]
        assert row.status == ("done" if partition == 2 else "running")
    assert (row.counts, row.duration_ms, row.attempts) == ({"merged": 6, "run_id": key}, 30, 3)
    # A redelivery of any partition's message now finds the window done.
    assert not firings.begin_run(conn, "global_reconsolidation", key, message_id=None,
                                 window_start=start, now=start)


def test_the_real_firing_ledger_body_runs_through_a_worker(tmp_path: Path) -> None:
    target = SchedTarget("embedded", tmp_path, None)
    try:
        firer = target.firer()
        from schedules.table import get_schedule

        assert firer.fire_current(get_schedule("firing_ledger"), NOW)
        broker = target.worker_broker()
        with running(broker):
            wait_for(lambda: ledger(firer.ops, "firing_ledger")[0][3] == "done", 30)
        (row,) = firings.history(firer.ops.conn, "firing_ledger")
        assert row.counts["schedules"] == 8 and row.counts["firing_ledger.firings"] == 0
        assert latest_report(firer.ops.conn) is not None
    finally:
        target.close()


def test_an_ops_db_from_before_the_ledger_columns_is_upgraded(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path)
    db = open_ops(settings)
    conn = db.conn
    # Make it look like a version-2 database (before the ledger's migration 3): the ledger
    # as it was, no reports table.
    for index in ("ix_firings_schedule_start", "ix_firings_fired_at"):
        conn.execute(f"DROP INDEX {index}")
    for column in ("kind", "window_start", "missed_count", "started_at", "attempts", "counts"):
        conn.execute(f"ALTER TABLE schedule_firings DROP COLUMN {column}")
    conn.execute("DROP TABLE firing_reports")
    conn.execute("INSERT INTO schedule_firings (schedule_id, window_key, fired_at, status) "
                 "VALUES ('backup', 'backup@2026-01-01T03:00:00Z', "
                 "'2026-01-01T03:00:00.000000Z', 'done')")
    conn.execute("DELETE FROM schema_migrations WHERE version > 2")
    conn.execute("PRAGMA user_version = 2")
    db.close()
    db = open_ops(settings)
    try:
        assert db.version() == latest_version("ops")
        (row,) = firings.history(db.conn, "backup")
        assert (row.kind, row.attempts, row.missed_count, row.counts) == ("scheduled", 0, 0, {})
        assert db.conn.execute("SELECT count(*) FROM firing_reports").fetchone()[0] == 0
        assert json.loads(json.dumps(row.as_json()))["window_key"] == row.window_key
    finally:
        db.close()
