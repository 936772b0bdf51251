"""The whole ``mnemo health`` report: memory_core's checks plus the schedules' own.

The schedule checks live here because the lease name and the schedule table do
(``memory_core`` never imports ``schedules``): who holds the leader lease, and whether each
schedule's latest fired window is within twice its cadence of now (the firing ledger).
"""

from __future__ import annotations

from datetime import datetime

from memory_core import heartbeats
from memory_core.db import leases as sqlite_leases
from memory_core.health.mirrors import check_mirror_drift
from memory_core.health.ops import check_mirror_lag, check_restore_drill, check_workers
from memory_core.health.queue import (
    check_broker,
    check_dead_letters,
    check_queue_age,
    check_queue_depth,
    check_spool,
)
from memory_core.health.report import (
    DEGRADED,
    OK,
    Check,
    CheckFn,
    HealthEnv,
    run_checks,
)
from memory_core.health.stores import check_embedder, check_ops_db, check_state_db
from memory_core.maintenance import firings
from memory_core.settings import Settings
from schedules.leader import LEADER_LEASE
from schedules.table import SCHEDULES, Schedule, window_at


def check_scheduler_lease(env: HealthEnv) -> Check:
    """Someone holds ``scheduler-leader`` (Redis leases with Redis, else memory_ops.db)."""
    if env.settings.broker_kind == "redis":
        from memory_core.brokers.redis import redis_client
        from memory_core.brokers.redis_leases import RedisLeases

        client = redis_client(env.settings)
        env.on_close(client.close)
        holder = RedisLeases(client).holder_of(LEADER_LEASE)
    else:
        holder = sqlite_leases.holder_of(env.ops, LEADER_LEASE, now=env.now.timestamp())
    if holder is None:
        return Check("scheduler_lease", DEGRADED,
                     f"no scheduler holds the {LEADER_LEASE} lease: the schedules do not fire; "
                     "run `mnemo scheduler` (or `mnemo up`)", {"holder": None})
    return Check("scheduler_lease", OK, f"held by {holder}", {"holder": holder})


def _scheduler_since(env: HealthEnv) -> datetime | None:
    """When the longest-known scheduler here started (None: no scheduler heartbeat)."""
    beats = heartbeats.read_all(env.ops, heartbeats.SCHEDULER)
    return min((b.started_at for b in beats), default=None)


def _schedule_check(env: HealthEnv, schedule: Schedule, since: datetime | None) -> Check:
    name = f"schedule:{schedule.id}"
    window = window_at(schedule, env.now)
    cadence = window.end - window.start
    last = firings.last_fired_window_start(env.ops, schedule.id)
    latest = firings.latest(env.ops, schedule.id)
    detail = {"cadence_s": int(cadence.total_seconds()),
              "last_window_start": None if last is None else last.isoformat(),
              "outcome": latest.status if latest else None}
    if last is None:
        if since is not None and env.now - since > 2 * cadence:
            return Check(name, DEGRADED, f"never fired, though a scheduler started "
                         f"{since.isoformat(timespec='seconds')}: see `mnemo schedules list`",
                         detail)
        return Check(name, OK, "no window yet", detail)
    if env.now - last > 2 * cadence:
        return Check(name, DEGRADED,
                     f"last window started {last.isoformat(timespec='seconds')}, more than "
                     f"twice its cadence ({schedule.cadence}) ago: is a scheduler leading?",
                     detail)
    if latest is not None and latest.status == firings.FAILED:
        return Check(name, DEGRADED, f"window {latest.window_key} failed ({latest.error}): "
                     f"see `mnemo schedules history {schedule.id}`", detail)
    return Check(name, OK, f"last window {last.isoformat(timespec='seconds')}", detail)


def check_schedules(env: HealthEnv) -> list[Check]:
    since = _scheduler_since(env)
    return [_schedule_check(env, s, since) for s in SCHEDULES]


CHECKS: tuple[tuple[str, CheckFn], ...] = (
    ("state_db", check_state_db),
    ("ops_db", check_ops_db),
    ("broker", check_broker),
    ("queue_depth", check_queue_depth),
    ("queue_age", check_queue_age),
    ("dead_letters", check_dead_letters),
    ("spool", check_spool),
    ("workers", check_workers),
    ("embedder", check_embedder),
    ("scheduler_lease", check_scheduler_lease),
    ("schedules", check_schedules),
    ("restore_drill", check_restore_drill),
    ("mirror_lag", check_mirror_lag),
    ("mirror_drift", check_mirror_drift),
)


def health_report(settings: Settings, now: datetime) -> list[Check]:
    """Every check, in order; ``now`` is the time the thresholds are measured against."""
    env = HealthEnv(settings, now)
    try:
        return run_checks(env, CHECKS)
    finally:
        env.close()
