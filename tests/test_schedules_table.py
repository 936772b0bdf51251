"""The schedule table: exactly eight rows, each naming a job with an actor and a body, and
the pure functions over it (fire times, windows, due), tested by passing timestamps."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from dramatiq.brokers.stub import StubBroker

from memory_core.errors import InvalidInputError
from memory_core.jobs import JOBS, MAINTENANCE, build_message
from memory_core.maintenance import firings
from memory_core.maintenance.bodies import BODIES
from schedules.bootstrap import register
from schedules.table import (
    BY_ID,
    SCHEDULES,
    due,
    fire_times,
    fire_times_between,
    get_schedule,
    last_fire_time,
    window_at,
    windows_between,
)
from workers.actors import declare_actors
from workers.middleware import worker_middleware

EIGHT = {"macro_sleep", "backup", "global_reconsolidation", "commitment_gc", "session_purge",
         "daily_digest", "firing_ledger", "restore_drill"}
T0 = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)  # a Monday


def at(day: int, hour: int, minute: int = 0) -> datetime:
    """Day ``day`` of the week starting at T0 (0 = Monday 30 Nov 2026)."""
    return T0 + timedelta(days=day, hours=hour, minutes=minute)


def test_there_are_exactly_the_eight_schedules() -> None:
    assert len(SCHEDULES) == 8
    assert {s.id for s in SCHEDULES} == EIGHT
    assert set(BY_ID) == EIGHT


@pytest.fixture(scope="module")
def actors() -> dict[str, object]:
    broker = StubBroker(middleware=worker_middleware())
    declare_actors(broker)
    return dict(broker.actors)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: s.id)
def test_each_schedule_names_a_job_with_an_actor_and_a_body(schedule, actors) -> None:
    assert schedule.job in JOBS, f"schedule {schedule.id} names job {schedule.job}, not declared"
    job = JOBS[schedule.job]
    assert job.queue == MAINTENANCE
    assert schedule.job in actors, f"job {schedule.job} has no actor"
    assert actors[schedule.job].queue_name == MAINTENANCE
    assert schedule.job in BODIES, f"job {schedule.job} has no body"
    # The ledger names a manual window by its job: one schedule per job.
    assert schedule.job == schedule.id
    message = build_message(schedule.job, window="x@2026-12-01T00:00:00Z", **schedule.kwargs)
    assert message.queue_name == MAINTENANCE


def test_the_maintenance_jobs_are_exactly_the_scheduled_ones() -> None:
    assert {n for n, j in JOBS.items() if j.queue == MAINTENANCE} == {s.job for s in SCHEDULES}
    assert set(BODIES) == EIGHT


def _every(start: datetime, step: timedelta, end: datetime) -> list[datetime]:
    out, t = [], start
    while t <= end:
        out.append(t)
        t += step
    return out


# Expected fire times over the week T0 < f <= T0 + 7 days, written out by cadence.
WEEK_END = T0 + timedelta(days=7)
EXPECTED = {
    "macro_sleep": _every(at(0, 6), timedelta(hours=6), WEEK_END),
    "backup": _every(at(0, 3), timedelta(hours=6), WEEK_END),
    "global_reconsolidation": [at(d, 2) for d in range(7)],
    "commitment_gc": _every(at(0, 0, 15), timedelta(minutes=15), WEEK_END),
    "session_purge": [at(d, 1) for d in range(7)],
    "daily_digest": [at(d, 0, 10) for d in range(7)],
    "firing_ledger": [at(0, 0, 30)],  # Monday 00:30
    "restore_drill": [at(6, 4)],  # Sunday 04:00
}


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: s.id)
def test_every_schedule_fires_at_the_right_times(schedule) -> None:
    expected = EXPECTED[schedule.id]
    assert list(fire_times_between(schedule, T0, WEEK_END)) == expected
    assert fire_times(schedule, T0, 1) == expected[:1]
    assert all(t.tzinfo is not None and t.utcoffset() == timedelta(0) for t in expected)
    # Each fire time opens a window that ends at the next one.
    for start, end in itertools.pairwise(expected):
        assert window_at(schedule, start) == window_at(schedule, end - timedelta(seconds=1))
        assert window_at(schedule, start).end == end
        assert last_fire_time(schedule, start) == start


def test_weekly_schedules_fire_once_a_week_on_their_day() -> None:
    drill, report = get_schedule("restore_drill"), get_schedule("firing_ledger")
    assert fire_times(drill, T0, 3) == [at(6, 4), at(13, 4), at(20, 4)]
    assert fire_times(report, T0, 2) == [at(0, 0, 30), at(7, 0, 30)]
    assert fire_times(report, at(0, 0, 30), 1) == [at(7, 0, 30)]  # strictly after


def test_due_reads_the_table_at_a_timestamp_like_hueys_read_periodic() -> None:
    def ids(t: datetime) -> set[str]:
        return {s.id for s in due(t)}

    assert ids(at(0, 0)) == {"macro_sleep", "commitment_gc"}
    assert ids(at(0, 0, 30)) == {"commitment_gc", "firing_ledger"}
    assert ids(at(0, 0, 10)) == {"daily_digest"}
    assert ids(at(0, 1)) == {"commitment_gc", "session_purge"}
    assert ids(at(0, 2)) == {"commitment_gc", "global_reconsolidation"}
    assert ids(at(0, 3)) == {"commitment_gc", "backup"}
    assert ids(at(6, 4)) == {"commitment_gc", "restore_drill"}
    assert ids(at(1, 4)) == {"commitment_gc"}
    assert ids(at(0, 0, 7)) == set()


def test_windows_and_their_keys() -> None:
    sleep = get_schedule("macro_sleep")
    window = window_at(sleep, at(1, 7, 42))
    assert (window.start, window.end) == (at(1, 6), at(1, 12))
    assert window.key == "macro_sleep@2026-12-01T06:00:00Z"
    assert firings.parse_window_key(window.key) == ("macro_sleep", at(1, 6))
    assert firings.message_id_for(window.key) == firings.message_id_for(window.key)
    assert firings.message_id_for(window.key) != firings.message_id_for(
        window_at(sleep, at(1, 12)).key)
    assert window_at(sleep, at(1, 6)).start == at(1, 6)  # a fire time opens its window


def test_windows_between_lists_the_missed_ones_lazily() -> None:
    sleep = get_schedule("macro_sleep")
    missed = list(windows_between(sleep, at(0, 6), at(1, 6) - timedelta(microseconds=1)))
    assert [w.start for w in missed] == [at(0, 12), at(0, 18), at(1, 0)]
    assert missed[-1].end == at(1, 6)
    gc = get_schedule("commitment_gc")
    # A year of 15-minute windows is counted without building a list up front.
    year = windows_between(gc, T0, T0 + timedelta(days=365))
    assert sum(1 for _ in year) == 365 * 96


@pytest.mark.parametrize(("key", "match"), [
    ("macro_sleep", "must be <schedule>@"),
    ("macro_sleep@2026-12-01", "must be <schedule>@"),
    ("@2026-12-01T06:00:00Z", "must be <schedule>@"),
    ("manual:not-a-uuid", "must be manual:<uuid>"),
])
def test_bad_window_keys_are_refused(key: str, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        firings.parse_window_key(key)


def test_unknown_schedule_lists_the_eight() -> None:
    with pytest.raises(InvalidInputError, match="the schedules are macro_sleep, backup"):
        get_schedule("nightly")


def test_apscheduler_gets_the_tables_trigger_for_each_of_the_eight() -> None:
    scheduler = BackgroundScheduler(timezone=UTC)
    calls: list[str] = []

    def fire(schedule_id: str) -> None:
        calls.append(schedule_id)

    register(scheduler, fire)
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == EIGHT
    for schedule in SCHEDULES:
        job = jobs[schedule.id]
        assert job.kwargs == {"schedule_id": schedule.id}
        assert job.coalesce is True and job.misfire_grace_time is None
        assert job.max_instances == 1
        # The registered trigger computes the table's fire times.
        first = job.trigger.get_next_fire_time(None, T0 + timedelta(seconds=1))
        assert first == fire_times(schedule, T0 + timedelta(seconds=1), 1)[0]
        # What APScheduler would run after a 2-day pause: coalesced into one run.
        job._modify(next_run_time=first)
        run_times = job._get_run_times(T0 + timedelta(days=2))
        assert run_times == list(fire_times_between(schedule, T0 + timedelta(seconds=1),
                                                    T0 + timedelta(days=2)))
        assert (run_times[-1:] if job.coalesce else run_times) == run_times[-1:]
