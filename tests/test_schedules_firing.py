"""Exactly once per window, over both brokers (embedded, and the real Redis at 6379).

The schedulers' firing logic (``schedules.firing.Firer``) is driven with test times, never a
sleep; real workers (in-process Dramatiq Workers with every actor declared) run the messages
through the maintenance wrapper and its ledger, with stand-in bodies that record each run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core.maintenance import firings
from schedules.table import SCHEDULES, fire_times_between, get_schedule, window_at
from tests.helpers.queue_env import broker_target, running, wait_for
from tests.helpers.schedule_env import Recorder, SchedTarget, ledger, queued

T0 = datetime(2026, 12, 5, 0, 0, tzinfo=UTC)  # a Saturday
SPAN_END = datetime(2026, 12, 7, 0, 30, tzinfo=UTC)  # Monday 00:30: every schedule fires


@pytest.fixture(params=["embedded", "redis"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SchedTarget]:
    yield from broker_target(request, lambda kind, url: SchedTarget(kind, tmp_path, url))


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    rec.install(monkeypatch)
    return rec


def _fire_times() -> list[datetime]:
    """Every fire time of every schedule in (T0, SPAN_END], in order."""
    return sorted({t for s in SCHEDULES for t in fire_times_between(s, T0, SPAN_END)})


def _expected_windows() -> dict[str, list[str]]:
    return {s.id: [window_at(s, t).key for t in fire_times_between(s, T0, SPAN_END)]
            for s in SCHEDULES}


def _done(ops, n: int) -> bool:
    row = ops.conn.execute("SELECT count(*) FROM schedule_firings WHERE status = 'done'"
                           ).fetchone()
    return bool(row[0] >= n)


def test_two_schedulers_over_one_broker_run_each_window_exactly_once(
        target: SchedTarget, recorder: Recorder) -> None:
    # On Redis the second scheduler has a data dir (ledger) of its own, as on another host:
    # only the window claims in Redis keep it from sending a window again.
    a = target.firer("data")
    b = target.firer("data" if target.kind == "embedded" else "other-host")
    sent: dict[str, list[bool]] = {}
    for t in _fire_times():
        for schedule in SCHEDULES:
            if window_at(schedule, t).start != t:
                continue
            results: list[bool] = []
            barrier = threading.Barrier(2)

            def fire(firer, schedule=schedule, t=t, results=results, barrier=barrier) -> None:
                barrier.wait()  # both schedulers fire the window at the same moment
                results.append(firer.fire_current(schedule, t))

            threads = [threading.Thread(target=fire, args=(f,)) for f in (a, b)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            sent[window_at(schedule, t).key] = results
    expected = _expected_windows()
    total = sum(len(v) for v in expected.values())
    assert set(sent) == {k for keys in expected.values() for k in keys}
    assert all(sorted(r) == [False, True] for r in sent.values()), "one winner per window"
    broker = target.worker_broker("data")
    assert queued(broker) == total  # one message per window on the broker
    with running(broker, threads=2):
        wait_for(lambda: _done(a.ops, total), 60)
        wait_for(lambda: queued(broker) == 0, 30)
    for schedule in SCHEDULES:
        assert sorted(recorder.windows(schedule.id)) == sorted(expected[schedule.id]), schedule.id
    # Each reconsolidation window ran its three partitions once each, then closed.
    recon = sorted((w, p) for n, w, p in recorder.calls if n == "global_reconsolidation")
    windows = expected["global_reconsolidation"]
    assert recon == sorted((w, p) for w in windows for p in range(3))
    rows = ledger(a.ops)
    assert len(rows) == total
    assert {r[3] for r in rows} == {"done"}
    assert [r[5] for r in ledger(a.ops, "global_reconsolidation")] == [3] * len(windows)


def test_a_restarted_scheduler_or_a_repeated_firing_sends_nothing_twice(
        target: SchedTarget, recorder: Recorder) -> None:
    sleep = get_schedule("macro_sleep")
    first = target.firer()
    assert first.fire_current(sleep, T0 + timedelta(minutes=1))
    assert not first.fire_current(sleep, T0 + timedelta(hours=5))  # same window, later
    restarted = target.firer()  # a new process: a new holder
    assert not restarted.fire_current(sleep, T0 + timedelta(minutes=2))
    broker = target.worker_broker()
    assert queued(broker) == 1
    assert restarted.fire_current(sleep, T0 + timedelta(hours=6))  # the next window
    assert queued(broker) == 2


def test_a_redelivered_message_for_a_done_window_is_a_no_op(
        target: SchedTarget, recorder: Recorder) -> None:
    gc = get_schedule("commitment_gc")
    firer = target.firer()
    assert firer.fire_current(gc, T0)
    broker = target.worker_broker()
    with running(broker):
        wait_for(lambda: _done(firer.ops, 1), 30)
        # The same window's message again (a redelivery after its ack was lost, or a
        # second send): the worker finds the window done and skips the body.
        firings.mark_enqueued(firer.ops.conn, gc.id, window_at(gc, T0).key)
        from schedules.firing import send

        send(firer.ops, firer.enqueuer, gc, window_at(gc, T0).key)
        wait_for(lambda: queued(broker) == 0, 30)
    assert recorder.windows("commitment_gc") == [window_at(gc, T0).key]
    ((_, _, _, status, _, attempts),) = ledger(firer.ops, "commitment_gc")
    assert (status, attempts) == ("done", 1)


EXPECTED_MISSED = {  # windows between the last run (at T0) and the current one, by cadence
    "macro_sleep": 7,  # Dec 5 06, 12, 18; Dec 6 00, 06, 12, 18
    "backup": 7,  # Dec 5 03, 09, 15, 21; Dec 6 03, 09, 15
    "global_reconsolidation": 1,  # Dec 5 02:00
    "commitment_gc": 195,  # Dec 5 00:15 .. Dec 7 00:45
    "session_purge": 2,  # Dec 5 and Dec 6 01:00
    "daily_digest": 2,  # Dec 5 and Dec 6 00:10
    "firing_ledger": 0,  # last: Mon Nov 30; current: Mon Dec 7
    "restore_drill": 0,  # last: Sun Nov 29; current: Sun Dec 6
}


def test_a_scheduler_down_two_days_catches_up_once_per_schedule_and_records_misses(
        target: SchedTarget, recorder: Recorder) -> None:
    before = target.firer()
    for schedule in SCHEDULES:  # the last windows fired before the outage
        assert before.fire_current(schedule, T0)
    back = T0 + timedelta(days=2, hours=1)
    after = target.firer()  # the scheduler that starts two days later
    broker = target.worker_broker()
    queued_before = queued(broker)
    assert after.catch_up(back) == EXPECTED_MISSED
    assert queued(broker) == queued_before + 8  # one catch-up run per schedule
    for schedule in SCHEDULES:
        rows = ledger(after.ops, schedule.id)
        current = window_at(schedule, back).key
        catch_up = [r for r in rows if r[2] == "catch_up"]
        assert [r[1] for r in catch_up] == [current]
        missed = [r for r in rows if r[3] == "missed"]
        if EXPECTED_MISSED[schedule.id]:
            first = window_at(schedule, window_at(schedule, T0).end).key
            assert [(r[1], r[4]) for r in missed] == [(first, EXPECTED_MISSED[schedule.id])]
        else:
            assert missed == []
    # Starting again (or a second scheduler) catches nothing up twice.
    assert target.firer().catch_up(back + timedelta(minutes=1)) == {}
    assert queued(broker) == queued_before + 8
    with running(broker, threads=2):
        wait_for(lambda: _done(after.ops, 16), 60)
    for schedule in SCHEDULES:
        assert window_at(schedule, back).key in recorder.windows(schedule.id)


def test_a_first_start_catches_nothing_up(target: SchedTarget, recorder: Recorder) -> None:
    firer = target.firer()
    assert firer.catch_up(T0 + timedelta(days=3)) == {}
    assert ledger(firer.ops) == []


def test_a_claim_never_sent_is_sent_again_by_the_next_leader(
        target: SchedTarget, recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    backup = get_schedule("backup")
    crashing = target.firer()

    def broker_gone(message) -> str:
        raise ConnectionError("the scheduler died here, between the claim and the send")

    monkeypatch.setattr(crashing.enqueuer, "send", broker_gone)
    with pytest.raises(ConnectionError):
        crashing.fire_current(backup, T0)
    ((_, key, _, status, _, _),) = ledger(crashing.ops, "backup")
    assert status == "claimed"
    successor = target.firer("data")
    assert not successor.fire_current(backup, T0)  # the window is claimed: not re-fired
    assert successor.redrive(T0 + timedelta(seconds=5)) == 0  # too fresh to call lost
    assert successor.redrive(T0 + timedelta(minutes=5)) == 1
    assert successor.redrive(T0 + timedelta(minutes=6)) == 0
    broker = target.worker_broker()
    with running(broker):
        wait_for(lambda: _done(successor.ops, 1), 30)
    assert recorder.windows("backup") == [key]


def test_a_failing_body_is_retried_recorded_failed_and_runs_when_requeued(
        target: SchedTarget, recorder: Recorder) -> None:
    purge = get_schedule("session_purge")
    recorder.fail.add("session_purge")
    firer = target.firer()
    assert firer.fire_current(purge, T0)
    key = window_at(purge, T0).key
    broker = target.worker_broker()
    # Retry within milliseconds instead of the job's 30 s backoff (the policy is Dramatiq's).
    broker.get_actor("session_purge").options.update(min_backoff=10, max_backoff=20)
    with running(broker):
        wait_for(lambda: len(broker.dead_letters()) == 1, 30)
        (row,) = firings.history(firer.ops.conn, "session_purge")
        assert (row.status, row.error, row.attempts) == ("failed", "RuntimeError", 4)
        assert row.duration_ms is not None
        assert recorder.windows("session_purge") == [key] * 4  # the run and three retries
        recorder.fail.clear()
        assert broker.requeue_dead() == 1  # the operator's `mnemo queue requeue`
        wait_for(lambda: _done(firer.ops, 1), 30)
    (row,) = firings.history(firer.ops.conn, "session_purge")
    assert (row.status, row.error, row.attempts) == ("done", None, 5)
