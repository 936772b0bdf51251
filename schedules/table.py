"""The eight schedules as data, and the pure functions over them.

A schedule is a row: id, trigger (an interval or a cron spec, built into an APScheduler 3.x
trigger object), job (a ``memory_core.jobs`` name), kwargs, description. Every time is UTC, and
interval triggers are anchored at a fixed instant (not at "now"), so every scheduler process
computes the same fire times.

A schedule's fire times cut time into windows: the window of fire time ``f`` runs from ``f``
to the next fire time. The window key, ``<schedule id>@<window start, ISO UTC>``, names one
firing everywhere: the claim that makes it run once, the message id, the ledger row.

The functions take the time as an argument and never read a clock (huey's
``read_periodic(timestamp)``): tests pass timestamps instead of sleeping. They drive the
APScheduler triggers directly; the scheduler process (``schedules.bootstrap``) registers the
same trigger objects with APScheduler.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from memory_core.clock import ensure_utc
from memory_core.errors import InvalidInputError
from memory_core.maintenance.firings import window_key

# Interval triggers count from here, so "every 6 h" means 00:00, 06:00, ... UTC on any host.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_LONGEST_GAP = timedelta(days=400)  # no schedule here has fire times further apart


@dataclass(frozen=True)
class Interval:
    """Every ``minutes`` minutes, counted from ``EPOCH + offset``."""

    minutes: int
    offset: timedelta = timedelta(0)

    def build(self) -> BaseTrigger:
        return IntervalTrigger(minutes=self.minutes, start_date=EPOCH + self.offset,
                               timezone=UTC)

    def cadence(self) -> str:
        every = (f"{self.minutes // 60} h" if self.minutes % 60 == 0
                 else f"{self.minutes} min")
        if not self.offset:
            return f"every {every}"
        start = EPOCH + self.offset
        return f"every {every} from {start:%H:%M} UTC"


@dataclass(frozen=True)
class Cron:
    """A cron spec in UTC (APScheduler's CronTrigger fields; Monday is the first weekday)."""

    hour: int
    minute: int = 0
    day_of_week: str | None = None  # None: every day

    def build(self) -> BaseTrigger:
        return CronTrigger(day_of_week=self.day_of_week, hour=self.hour, minute=self.minute,
                           second=0, timezone=UTC)

    def cadence(self) -> str:
        when = f"{self.hour:02d}:{self.minute:02d} UTC"
        return f"weekly {self.day_of_week} {when}" if self.day_of_week else f"daily {when}"


@dataclass(frozen=True)
class Schedule:
    """One row of the table."""

    id: str
    trigger: Interval | Cron
    job: str  # the job (actor) a firing enqueues, by name
    description: str
    kwargs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def build_trigger(self) -> BaseTrigger:
        """A new APScheduler trigger object for this row."""
        return self.trigger.build()

    @property
    def cadence(self) -> str:
        return self.trigger.cadence()


@dataclass(frozen=True)
class Window:
    """One window of a schedule: [start, end)."""

    schedule_id: str
    start: datetime
    end: datetime

    @property
    def key(self) -> str:
        return window_key(self.schedule_id, self.start)


SCHEDULES: tuple[Schedule, ...] = (
    Schedule("macro_sleep", Interval(6 * 60), "macro_sleep",
             "Decay and tier moves, reinforcement from the recall log, ego-anchor backfill, "
             "FTS drift check."),
    # Three hours after the sleep runs, so a backup never competes with one.
    Schedule("backup", Interval(6 * 60, offset=timedelta(hours=3)), "backup",
             "Online backups of both databases with a manifest, per-tenant exports, "
             "retention."),
    Schedule("global_reconsolidation", Cron(hour=2), "global_reconsolidation",
             "Dedupe episodes, beliefs and entities, re-embed, recount; partitioned by "
             "subject hash, chained partition tasks."),
    Schedule("commitment_gc", Interval(15), "commitment_gc",
             "Expire commitments and pending-review items past their time to live."),
    Schedule("session_purge", Cron(hour=1), "session_purge",
             "Purge working-tier material of ended sessions; the retention/expiry sweep."),
    # Just after midnight: the digest reports the UTC day that just ended.
    Schedule("daily_digest", Cron(hour=0, minute=10), "daily_digest",
             "Per tenant: what memory learned, changed and dropped that day."),
    Schedule("firing_ledger", Cron(hour=0, minute=30, day_of_week="mon"), "firing_ledger",
             "Each schedule's firings, misses, failures and durations over the week."),
    # Sunday 04:00: after the 03:00 backup, so the drill restores a fresh one.
    Schedule("restore_drill", Cron(hour=4, day_of_week="sun"), "restore_drill",
             "Restore the latest backup into scratch, integrity check, compare with the "
             "manifest."),
)

BY_ID: Mapping[str, Schedule] = MappingProxyType({s.id: s for s in SCHEDULES})


def get_schedule(schedule_id: str) -> Schedule:
    """The schedule ``schedule_id``; InvalidInputError listing the eight otherwise."""
    try:
        return BY_ID[schedule_id]
    except (KeyError, TypeError):
        raise InvalidInputError(
            f"unknown schedule {schedule_id!r}: the schedules are {', '.join(BY_ID)}"
        ) from None


def _iter_from(trigger: BaseTrigger, start: datetime) -> Iterator[datetime]:
    """The trigger's fire times at or after ``start``, in order (endless)."""
    fire = trigger.get_next_fire_time(None, start)
    while fire is not None:
        yield fire.astimezone(UTC)
        # (fire, fire): the next strictly after ``fire`` for both trigger kinds.
        fire = trigger.get_next_fire_time(fire, fire)


def fire_times(schedule: Schedule, after: datetime, n: int) -> list[datetime]:
    """The ``n`` fire times strictly after ``after``."""
    after = ensure_utc(after, "after")
    out: list[datetime] = []
    for fire in _iter_from(schedule.build_trigger(), after):
        if fire > after:
            out.append(fire)
            if len(out) == n:
                break
    return out


def fire_times_between(schedule: Schedule, after: datetime, until: datetime
                       ) -> Iterator[datetime]:
    """The fire times ``f`` with ``after < f <= until``, lazily (a long span is not a list)."""
    after, until = ensure_utc(after, "after"), ensure_utc(until, "until")
    for fire in _iter_from(schedule.build_trigger(), after):
        if fire > until:
            return
        if fire > after:
            yield fire


def last_fire_time(schedule: Schedule, t: datetime) -> datetime:
    """The latest fire time at or before ``t``."""
    t = ensure_utc(t, "t")
    trigger = schedule.build_trigger()
    lookback = timedelta(hours=1)
    while lookback <= _LONGEST_GAP:
        last = None
        for fire in _iter_from(trigger, t - lookback):
            if fire > t:
                break
            last = fire
        if last is not None:
            return last
        lookback *= 2  # no fire time that close: look further back
    raise InvalidInputError(f"schedule {schedule.id} has no fire time in the "
                            f"{_LONGEST_GAP.days} days before {t.isoformat()}")


def window_at(schedule: Schedule, t: datetime) -> Window:
    """The window ``t`` falls in: from the last fire time at or before ``t`` to the next."""
    start = last_fire_time(schedule, t)
    (end,) = fire_times(schedule, start, 1)
    return Window(schedule.id, start, end)


def windows_between(schedule: Schedule, after: datetime, until: datetime) -> Iterator[Window]:
    """The windows starting in ``(after, until]`` — e.g. those missed while no scheduler ran
    between the last recorded window ``after`` and the current window ``until``."""
    starts = fire_times_between(schedule, after, until)
    start = next(starts, None)
    while start is not None:
        nxt = next(starts, None)
        end = nxt if nxt is not None else fire_times(schedule, start, 1)[0]
        yield Window(schedule.id, start, end)
        start = nxt


def due(t: datetime, schedules: tuple[Schedule, ...] = SCHEDULES) -> list[Schedule]:
    """The schedules with a fire time exactly at ``t`` (huey's ``read_periodic``)."""
    t = ensure_utc(t, "t")
    return [s for s in schedules if last_fire_time(s, t) == t]
