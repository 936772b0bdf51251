"""Leases: one atomic claim-with-expiry over the ``leases`` table of ``memory_ops.db``.

A lease is a name held by one holder until it expires. ``claim`` takes a free or lapsed name,
renews the caller's own, and refuses while another holder's claim is current; it is a single
``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` statement, so two processes racing for a name
never both win (huey's ``put_if_empty``, plus an expiry). ``ttl_s=None`` claims for good: a
one-time key that is never taken over.

Who uses it: the spool relay (``memory_core.brokers.spool``: one process relays at a time),
the scheduler's leader lease (extra schedulers stand by) and the schedule firing-window keys
(a window fires once). ``Leases`` is the interface a Redis implementation also meets;
``SqliteLeases`` is this one, over a ``Database``.

Times are epoch seconds (REAL), like the queue's: ``now`` is injectable so tests never sleep.
A claim is current while ``expires_at > now``. A forever claim stores ``expires_at = inf``:
SQLite keeps IEEE infinity as a REAL (checked by the tests), which no ``now`` reaches.
"""

from __future__ import annotations

import math
import time
from typing import Protocol

from memory_core.db.sqlite import Connection, atomic
from memory_core.db.stores import Database
from memory_core.errors import InvalidInputError

FOREVER = math.inf  # the expires_at of a claim made with ttl_s=None

# Insert, or take over when the row is the caller's own or has lapsed; otherwise the update's
# WHERE is false and nothing changes (rowcount 0). One statement: no read-then-write race.
_CLAIM = (
    "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
    "expires_at = excluded.expires_at "
    "WHERE leases.holder = excluded.holder OR leases.expires_at <= ?"
)
_RELEASE = "DELETE FROM leases WHERE name = ? AND holder = ?"
_HOLDER = "SELECT holder FROM leases WHERE name = ? AND expires_at > ?"


def _now(now: float | None) -> float:
    if now is None:
        return time.time()
    if not math.isfinite(now):
        # An infinite ``now`` would reach a forever claim's expiry and take it over.
        raise InvalidInputError(f"a lease's now must be finite epoch seconds; got {now!r}")
    return now


def _expires_at(ttl_s: float | None, now: float) -> float:
    if ttl_s is None:
        return FOREVER
    if math.isnan(ttl_s) or ttl_s <= 0:
        raise InvalidInputError(f"a lease's ttl_s must be a positive number of seconds, or None "
                                f"for a claim that never expires; got {ttl_s!r}")
    return now + ttl_s


def claim(conn: Connection, name: str, holder: str, ttl_s: float | None, *,
          now: float | None = None) -> bool:
    """Take ``name`` for ``holder``, or renew it if ``holder`` already has it, unless another
    holder's claim is still current. Returns whether ``holder`` has it now.

    ``ttl_s=None``: the claim never expires (a one-time key, e.g. a firing window); only
    ``release`` by its holder frees it. A renewal sets the expiry anew, so renewing a forever
    claim with a ``ttl_s`` makes it expire. The same holder claiming a one-time key again
    also gets True (a renewal): give each process its own holder id when a repeat by another
    process must be refused.
    Atomic inside or outside the caller's transaction (a savepoint when one is open): if the
    caller rolls back, the claim was never made. ``now``: epoch seconds (default time.time()).
    """
    now = _now(now)
    expires_at = _expires_at(ttl_s, now)
    with atomic(conn) as c:
        cursor = c.execute(_CLAIM, (name, holder, expires_at, now))
        return bool(cursor.rowcount == 1)


def release(conn: Connection, name: str, holder: str) -> bool:
    """Give ``name`` up if ``holder`` has it. Returns True if a claim by ``holder`` was removed.

    A lapsed claim nobody took over still counts as ``holder``'s (removing it is harmless);
    another holder's claim is never touched.
    """
    with atomic(conn) as c:
        return bool(c.execute(_RELEASE, (name, holder)).rowcount == 1)


def holder_of(conn: Connection, name: str, *, now: float | None = None) -> str | None:
    """The holder of ``name``'s current claim, or None when it is free or has lapsed."""
    row = conn.execute(_HOLDER, (name, _now(now))).fetchone()
    return None if row is None else str(row[0])


class Leases(Protocol):
    """Claim-with-expiry on named leases; see ``claim``, ``release`` and ``holder_of`` above
    for the contract every implementation (SQLite here, Redis) keeps."""

    def claim(self, name: str, holder: str, ttl_s: float | None, *,
              now: float | None = None) -> bool: ...

    def release(self, name: str, holder: str) -> bool: ...

    def holder_of(self, name: str, *, now: float | None = None) -> str | None: ...


class SqliteLeases:
    """``Leases`` over an ops ``Database``: each calling thread uses its own connection."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def claim(self, name: str, holder: str, ttl_s: float | None, *,
              now: float | None = None) -> bool:
        return claim(self.db.conn, name, holder, ttl_s, now=now)

    def release(self, name: str, holder: str) -> bool:
        return release(self.db.conn, name, holder)

    def holder_of(self, name: str, *, now: float | None = None) -> str | None:
        return holder_of(self.db.conn, name, now=now)

    def __repr__(self) -> str:
        return f"SqliteLeases({self.db.path})"
