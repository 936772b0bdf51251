"""Leases in Redis: the ``Leases`` contract (``memory_core.db.leases``) for the Redis broker.

Used instead of the ``leases`` table of ``memory_ops.db`` when Redis is the broker, so that
schedulers on several hosts share one lease (and one set of window claims). A lease is the
key ``<namespace>:lease:<name>`` holding the holder's id:

- ``claim``: ``SET key holder NX PX ttl`` takes a free name; if the name is taken, a Lua
  compare-and-renew sets it again (new expiry) only when the caller already holds it. Both
  are single atomic commands, so two racing claimers never both win. ``ttl_s=None`` claims
  for good (no expiry), like the SQLite leases.
- ``release``: a Lua compare-and-delete (only the holder's own claim is removed).
- Expiry is Redis' own (``PX``): one clock, the server's, for every host. There is no
  injectable ``now`` here; passing one is refused so a test cannot believe it moved time.

Redis errors become ``BrokerError`` naming the (redacted) URL and the fix.
"""

from __future__ import annotations

import math
from typing import Any

import redis

from memory_core.errors import BrokerError, InvalidInputError

# KEYS[1] = the lease key; ARGV[1] = holder; ARGV[2] = ttl in ms, or "" for no expiry.
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
if ARGV[2] == '' then
    redis.call('SET', KEYS[1], ARGV[1])
else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


def _ttl_ms(ttl_s: float | None) -> int | None:
    if ttl_s is None:
        return None
    if not isinstance(ttl_s, int | float) or math.isnan(ttl_s) or ttl_s <= 0:
        raise InvalidInputError(f"a lease's ttl_s must be a positive number of seconds, or None "
                                f"for a claim that never expires; got {ttl_s!r}")
    return max(1, math.ceil(ttl_s * 1000))


def _no_now(now: float | None) -> None:
    if now is not None:
        raise InvalidInputError("Redis leases expire on the Redis server's clock: call them "
                                "without now= (inject time only into the SQLite leases)")


class RedisLeases:
    """``Leases`` over a Redis client, keys under ``<namespace>:lease:``."""

    def __init__(self, client: redis.Redis, *, namespace: str = "mnemo") -> None:
        self.client = client
        self.namespace = namespace
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    def key(self, name: str) -> str:
        return f"{self.namespace}:lease:{name}"

    def _call(self, what: str, fn: Any) -> Any:
        try:
            return fn()
        except redis.RedisError as e:
            url = _url(self.client)
            raise BrokerError(f"cannot {what} a lease in Redis at {url} ({type(e).__name__}): "
                              "start Redis or check MNEMO_BROKER_URL") from e

    def claim(self, name: str, holder: str, ttl_s: float | None, *,
              now: float | None = None) -> bool:
        """Take ``name`` for ``holder`` or renew ``holder``'s own claim (see the module)."""
        _no_now(now)
        ttl = _ttl_ms(ttl_s)
        key = self.key(name)

        def run() -> bool:
            if self.client.set(key, holder, nx=True, px=ttl):
                return True
            return bool(self._renew(keys=[key], args=[holder, "" if ttl is None else ttl]))

        return bool(self._call("claim", run))

    def release(self, name: str, holder: str) -> bool:
        return bool(self._call("release", lambda: self._release(keys=[self.key(name)],
                                                                args=[holder])))

    def holder_of(self, name: str, *, now: float | None = None) -> str | None:
        _no_now(now)
        value = self._call("read", lambda: self.client.get(self.key(name)))
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    def __repr__(self) -> str:
        return f"RedisLeases({_url(self.client)}, namespace={self.namespace!r})"


def _url(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
