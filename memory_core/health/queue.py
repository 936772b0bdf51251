"""Health of the task queue: broker reachable and durable, depth, age, dead letters, spool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_core.brokers.base import QueueStats
from memory_core.brokers.durability import OFF, ON, redis_persistence
from memory_core.brokers.factory import embedded_path, make_broker
from memory_core.db.faults import MISSING, fix_for
from memory_core.errors import BrokerError, StoreError
from memory_core.health.report import DEGRADED, OK, UNHEALTHY, Check, HealthEnv
from memory_core.jobs import QUEUES


def _broker(env: HealthEnv) -> Any:
    """The configured broker (no middleware), built once per report."""
    if "broker" in env.cache:
        return env.cache["broker"]
    settings = env.settings
    if settings.broker_kind == "embedded" and not embedded_path(settings).exists():
        path = embedded_path(settings)
        raise StoreError(f"the embedded queue {path} does not exist: {fix_for(MISSING, path)}")
    broker = make_broker(settings)
    env.on_close(broker.close)
    for name in QUEUES:
        broker.declare_queue(name)
    env.cache["broker"] = broker
    return broker


def _stats(env: HealthEnv) -> list[QueueStats]:
    if "stats" not in env.cache:
        env.cache["stats"] = _broker(env).queue_stats(QUEUES)
    return list(env.cache["stats"])


def check_broker(env: HealthEnv) -> list[Check]:
    """Reachable, and (Redis) running with the append-only file."""
    settings = env.settings
    if settings.broker_kind == "embedded":
        broker = _broker(env)
        path = str(embedded_path(settings))
        return [Check("broker", OK, f"embedded queue in {path}", {"kind": broker.kind}),
                Check("broker_persistence", OK, "embedded: every enqueue is a SQLite commit",
                      {"persistence": ON})]
    import redis

    url = settings.broker_url
    broker = _broker(env)
    try:
        broker.client.ping()
        found = redis_persistence(broker.client)
    except redis.RedisError as e:
        raise BrokerError(f"Redis at {url} does not answer ({type(e).__name__}): start it, or "
                          "check MNEMO_BROKER_URL") from e
    reachable = Check("broker", OK, f"Redis at {url} answers", {"kind": "redis"})
    detail = {"persistence": found.state}
    if found.state == OFF:
        status = UNHEALTHY if settings.redis_require_persistence else DEGRADED
        return [reachable, Check("broker_persistence", status,
                                 f"Redis at {url} is not persistent: {found.reason}", detail)]
    if found.state == ON:
        return [reachable, Check("broker_persistence", OK, found.reason, detail)]
    return [reachable, Check("broker_persistence", OK, f"persistence unknown: {found.reason}",
                             detail)]


def _worst(per_queue: Mapping[str, float]) -> str | None:
    """The queue with the largest value (the first on a tie), or None when there is none."""
    return max(per_queue, key=per_queue.__getitem__, default=None)


def check_queue_depth(env: HealthEnv) -> Check:
    limit = env.settings.health_queue_depth
    depth = {s.queue: s.ready + s.delayed for s in _stats(env)}
    worst = _worst(depth)
    if worst is not None and depth[worst] > limit:
        return Check("queue_depth", DEGRADED,
                     f"queue {worst} holds {depth[worst]} waiting messages (more than "
                     f"MNEMO_HEALTH_QUEUE_DEPTH={limit}): add workers (`mnemo worker "
                     "--processes N`) or find what slows them", {"waiting": depth})
    return Check("queue_depth", OK, f"{sum(depth.values())} message(s) waiting",
                 {"waiting": depth})


def check_queue_age(env: HealthEnv) -> Check:
    limit = env.settings.health_queue_age_s
    ages = {s.queue: s.oldest_age_s for s in _stats(env) if s.oldest_age_s is not None}
    worst = _worst(ages)
    if worst is not None and ages[worst] > limit:
        return Check("queue_age", DEGRADED,
                     f"the oldest ready message of queue {worst} waits for {ages[worst]:.0f} s "
                     f"(more than MNEMO_HEALTH_QUEUE_AGE_S={limit}): are the workers running "
                     "and consuming it?", {"oldest_age_s": ages})
    reason = ("no message waiting" if worst is None
              else f"oldest ready message {ages[worst]:.0f} s")
    return Check("queue_age", OK, reason, {"oldest_age_s": ages})


def check_dead_letters(env: HealthEnv) -> Check:
    limit = env.settings.health_dead_letters
    dead = {s.queue: s.dead for s in _stats(env) if s.dead}
    total = sum(dead.values())
    if total > limit:
        listed = ", ".join(f"{q}: {n}" for q, n in sorted(dead.items()))
        return Check("dead_letters", DEGRADED,
                     f"{total} dead letter(s) ({listed}; MNEMO_HEALTH_DEAD_LETTERS={limit}): "
                     "see `mnemo queue dead`, fix the cause, then `mnemo queue requeue`",
                     {"dead": dead})
    return Check("dead_letters", OK, f"{total} dead letter(s)", {"dead": dead})


def check_spool(env: HealthEnv) -> Check:
    if env.settings.broker_kind != "redis":
        return Check("spool", OK, "not used (embedded broker)")
    limit = env.settings.health_spool
    size = int(env.ops.execute("SELECT count(*) FROM spool").fetchone()[0])
    oldest = env.ops.execute("SELECT min(spooled_at) FROM spool").fetchone()[0]
    detail = {"spooled": size,
              "oldest_age_s": None if oldest is None else env.now.timestamp() - oldest}
    if size > limit:
        return Check("spool", DEGRADED,
                     f"{size} message(s) wait in the local spool for Redis (more than "
                     f"MNEMO_HEALTH_SPOOL={limit}): is Redis reachable from the chat hosts, "
                     "and are workers (which relay the spool) running here?", detail)
    return Check("spool", OK, f"{size} message(s) spooled", detail)
