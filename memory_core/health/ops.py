"""Health from ``memory_ops.db``: live workers, the last restore drill, mirror lag."""

from __future__ import annotations

from datetime import timedelta

from memory_core import heartbeats
from memory_core.clock import from_db
from memory_core.health.report import DEGRADED, OK, UNHEALTHY, Check, HealthEnv
from memory_core.mirrors.outbox import configured_mirrors, cursor_of


def _who(beat: heartbeats.Heartbeat) -> str:
    return f"{beat.host}:{beat.pid}"


def check_workers(env: HealthEnv) -> Check:
    """Unhealthy without a fresh worker heartbeat, or when every live worker is paused by its
    StorageGuard (a database read-only, full or damaged); degraded when some are paused, or
    one went stale (a worker died without a clean stop; its row goes after
    MNEMO_HEARTBEAT_KEEP_S)."""
    stale_s = env.settings.health_stale_s
    beats = [b for b in heartbeats.read_all(env.ops, heartbeats.WORKER) if b.stopped_at is None]
    fresh = [b for b in beats if b.is_fresh(env.now, stale_s)]
    stale = [b for b in beats if not b.is_fresh(env.now, stale_s)]
    paused = {_who(b): reason for b in fresh if (reason := b.paused_reason()) is not None}
    stale_ages = {_who(b): round(b.age_s(env.now)) for b in stale}
    detail = {"fresh": [_who(b) for b in fresh], "stale": stale_ages, "paused": paused,
              "processed": sum(b.processed for b in fresh),
              "failed": sum(b.failed for b in fresh)}
    if not fresh:
        seen = (f"; the last heartbeat ({_who(stale[0])}) is {stale[0].age_s(env.now):.0f} s old"
                if stale else "; no worker has written a heartbeat")
        return Check("workers", UNHEALTHY,
                     f"no live worker (none within MNEMO_HEALTH_STALE_S={stale_s} s){seen}: "
                     "start them with `mnemo worker` or `mnemo up`", detail)
    problems = [f"worker {w} paused: {why}" for w, why in paused.items()]
    if problems:
        problems[-1] += " (it resumes by itself once the state_db / ops_db check is ok)"
    if stale:
        listed = ", ".join(f"{w} ({age} s)" for w, age in stale_ages.items())
        problems.append(f"stale heartbeat(s) from {listed}: a worker died without stopping; "
                        "check its host and log")
    taking = len(fresh) - len(paused)
    if taking == 0:
        return Check("workers", UNHEALTHY, f"no worker takes messages: {'; '.join(problems)}",
                     detail)
    if problems:
        return Check("workers", DEGRADED, f"{taking} live worker process(es) taking messages, "
                     f"but {'; '.join(problems)}", detail)
    return Check("workers", OK, f"{len(fresh)} live worker process(es)", detail)


def check_restore_drill(env: HealthEnv) -> Check:
    """The latest drill passed and is younger than MNEMO_HEALTH_DRILL_AGE_S. None yet is ok:
    the restore_drill schedule's own check notices a drill that never runs."""
    row = env.ops.execute("SELECT at, ok FROM restore_drills ORDER BY at DESC, id DESC "
                          "LIMIT 1").fetchone()
    if row is None:
        return Check("restore_drill", OK, "no restore drill has run yet (weekly, Sunday 04:00 "
                     "UTC; `mnemo restore-drill` runs one now)")
    at, passed = from_db(row[0]), bool(row[1])
    age = env.now - at
    detail = {"at": row[0], "ok": passed, "age_s": round(age.total_seconds())}
    if not passed:
        return Check("restore_drill", DEGRADED, f"the last restore drill ({row[0]}) failed: "
                     "see `mnemo schedules history restore_drill` and check the backups",
                     detail)
    limit = timedelta(seconds=env.settings.health_drill_age_s)
    if age > limit:
        return Check("restore_drill", DEGRADED,
                     f"the last restore drill passed but is {age.days} day(s) old (more than "
                     "MNEMO_HEALTH_DRILL_AGE_S): is the scheduler running?", detail)
    return Check("restore_drill", OK, f"last drill passed {row[0]}", detail)


def check_mirror_lag(env: HealthEnv) -> Check:
    """Outbox rows not yet shipped to each configured mirror."""
    sinks = configured_mirrors(env.settings)
    if not sinks:
        return Check("mirror_lag", OK, "not configured")
    head = int(env.state.execute("SELECT coalesce(max(id), 0) FROM outbox").fetchone()[0])
    lag = {sink: max(0, head - cursor_of(env.ops, sink)) for sink in sinks}
    limit = env.settings.health_mirror_lag
    behind = {s: n for s, n in lag.items() if n > limit}
    if behind:
        listed = ", ".join(f"{s} {n} row(s)" for s, n in behind.items())
        return Check("mirror_lag", DEGRADED,
                     f"mirror(s) behind the outbox: {listed} (MNEMO_HEALTH_MIRROR_LAG="
                     f"{limit}): see `mnemo queue dead --queue mirrors`", {"lag": lag})
    return Check("mirror_lag", OK, ", ".join(f"{s} {n} behind" for s, n in lag.items()),
                 {"lag": lag})
