"""Is the Redis broker's data durable? ``CONFIG GET appendonly``, read at worker start.

Without the append-only file, a Redis restart loses every message it held (issue 11 measured
48 of 300 turns lost, silently). Workers check at start and warn, or refuse when
``MNEMO_REDIS_REQUIRE_PERSISTENCE`` is on; ``mnemo health`` reports the same.

A server that hides ``CONFIG`` (``rename-command CONFIG ""``, many managed services) cannot be
checked: persistence is ``unknown``, which warns but never refuses (such services usually
persist, and the operator knows; the warning says what to verify).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis
import structlog

from memory_core.errors import ConfigurationError
from memory_core.settings import Settings

log = structlog.get_logger("mnemo.queue")

ON, OFF, UNKNOWN = "on", "off", "unknown"

FIX = ("set `appendonly yes` in redis.conf (or run `redis-cli CONFIG SET appendonly yes` "
       "and `CONFIG REWRITE`), see docs/queue.md")


@dataclass(frozen=True)
class Persistence:
    """``state``: on, off or unknown; ``reason``: why, in words (no secrets)."""

    state: str
    reason: str


def redis_persistence(client: Any) -> Persistence:
    """Ask the server for ``appendonly``. Raises redis.ConnectionError / TimeoutError when it
    does not answer (the caller reports the broker unreachable); a refused ``CONFIG`` is
    ``unknown``."""
    try:
        reply = client.config_get("appendonly")
    except redis.ResponseError as e:  # CONFIG renamed away, or an ACL without +config
        return Persistence(UNKNOWN, f"the server refused CONFIG GET ({type(e).__name__}): "
                           "check by hand that it runs with `appendonly yes`")
    value = _text(reply.get("appendonly") if isinstance(reply, dict) else None)
    if value is None:
        return Persistence(UNKNOWN, "the server did not report appendonly: check by hand "
                           "that it runs with `appendonly yes`")
    if value.lower() == "yes":
        return Persistence(ON, "appendonly yes")
    return Persistence(OFF, f"appendonly {value}: a Redis restart loses queued messages; {FIX}")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def check_broker_persistence(settings: Settings, client: Any) -> Persistence | None:
    """At worker start: warn when the Redis broker is not persistent, refuse (raise
    ConfigurationError) when ``MNEMO_REDIS_REQUIRE_PERSISTENCE`` is on and it is off.

    None for the embedded broker (a SQLite commit is durable). Redis errors propagate.
    """
    if settings.broker_kind != "redis":
        return None
    found = redis_persistence(client)
    url = settings.broker_url  # canonical: it cannot hold a password
    if found.state == OFF and settings.redis_require_persistence:
        raise ConfigurationError(
            f"Redis at {url} runs without persistence ({found.reason.split(':')[0]}) and "
            f"MNEMO_REDIS_REQUIRE_PERSISTENCE is on: {FIX}; or unset "
            "MNEMO_REDIS_REQUIRE_PERSISTENCE to start anyway")
    if found.state != ON:
        log.warning("redis_not_persistent", url=url, persistence=found.state,
                    reason=found.reason)
    return found


def check_configured_persistence(settings: Settings) -> Persistence | None:
    """``check_broker_persistence`` with a client of its own (the pool, before it spawns
    workers); a Redis that does not answer is left to the workers (None)."""
    if settings.broker_kind != "redis":
        return None
    from memory_core.brokers.redis import redis_client

    client = redis_client(settings)
    try:
        return check_broker_persistence(settings, client)
    except redis.RedisError as e:
        log.warning("redis_persistence_unchecked", error=type(e).__name__)
        return None
    finally:
        client.close()
