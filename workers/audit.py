"""The audit log: one row in ``memory_ops.db`` per memory mutation a message made.

An actor hands what it changed to ``report()`` (ids and counts, never text) instead of
returning it (Dramatiq discards return values without a Results backend, and warns). The
``Audit`` middleware writes the reported rows after the actor returned, that is after its
effect committed, and drops them when the actor raised. Rows are keyed by (message_id,
action, object_kind, object_id) and inserted with ``INSERT OR IGNORE``, so a redelivered
message, which reports the same rows again, adds nothing. The state db and the ops db are
separate files, so the effect and its audit row are two commits: an audit write that fails
is logged (``audit_write_failed``) and the message still counts as done.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import structlog
from dramatiq.broker import Broker, MessageProxy
from dramatiq.middleware import Middleware

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import Connection, atomic, sqlite_module
from memory_core.db.stores import Database

log = structlog.get_logger("mnemo.worker")

# An id (turn_uid, session id, entity id, sink name): no spaces, so no sentence fits.
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")


def _check_value(key: str, value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and _ID_RE.match(value):
        return value
    if isinstance(value, list | tuple):
        return [_check_value(key, v) for v in value]
    raise ValueError(f"audit detail {key!r} must be ids and counts, not {type(value).__name__} "
                     "text: memory text never goes to the audit log")


@dataclass(frozen=True)
class AuditEntry:
    """One mutation: what (action, object) in which tenant, with ids/counts in ``detail``."""

    tenant: str
    action: str
    object_kind: str
    object_id: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("tenant", "action", "object_kind", "object_id"):
            _check_value(name, getattr(self, name))
        for key, value in self.detail.items():
            _check_value(key, value)


# The current message's reported entries, each with the message id it is keyed by (None:
# the message's own; an inline follow-up reports under the id it would have as a message).
_Pending = tuple[Database, list[tuple[str | None, AuditEntry]]]
_PENDING: ContextVar[_Pending | None] = ContextVar("mnemo_audit_pending", default=None)


def report(db: Database, entries: Iterable[AuditEntry], message_id: str | None = None) -> None:
    """Hand the current message's mutations to the Audit middleware (written to ``db``),
    keyed by ``message_id`` (default: the message's own id). A step run inline in its
    parent's message passes the id it has as a message of its own, so its rows are the same
    whichever way it ran, and a later run of it as a message adds none."""
    pending = _PENDING.get()
    if pending is None or pending[0] is not db:
        pending = (db, [])
        _PENDING.set(pending)
    pending[1].extend((message_id, e) for e in entries)


def take_reported() -> list[AuditEntry]:
    """The entries reported since the last take (for callers that run actors directly)."""
    pending = _PENDING.get()
    _PENDING.set(None)
    return [e for _, e in pending[1]] if pending else []


def write_audit(conn: Connection, message_id: str | None, entries: Iterable[AuditEntry]) -> int:
    """Insert the entries (one transaction); how many were new."""
    return write_audit_rows(conn, ((message_id, e) for e in entries))


def write_audit_rows(conn: Connection,
                     rows: Iterable[tuple[str | None, AuditEntry]]) -> int:
    """Insert (message id, entry) rows in one transaction; how many were new."""
    now = to_db(utcnow())
    values = [(e.tenant, e.action, e.object_kind, e.object_id, message_id, now,
               json.dumps(dict(e.detail), sort_keys=True, separators=(",", ":")))
              for message_id, e in rows]
    with atomic(conn):
        before = conn.total_changes
        conn.executemany(
            "INSERT OR IGNORE INTO audit_log (tenant, action, object_kind, object_id, "
            "message_id, at, detail) VALUES (?, ?, ?, ?, ?, ?, ?)", values)
        return int(conn.total_changes - before)


class Audit(Middleware):
    """Writes the rows an actor reported once it returned; forgets them if it raised."""

    def before_process_message(self, broker: Broker, message: MessageProxy) -> None:
        _PENDING.set(None)

    def after_process_message(self, broker: Broker, message: MessageProxy, *,
                              result: Any = None, exception: BaseException | None = None
                              ) -> None:
        pending = _PENDING.get()
        _PENDING.set(None)
        if exception is not None or pending is None or not pending[1]:
            return
        db, entries = pending
        try:
            write_audit_rows(db.conn, ((mid or message.message_id, e) for mid, e in entries))
        except sqlite_module().Error as e:
            log.error("audit_write_failed", error=type(e).__name__, rows=len(entries))

    def after_skip_message(self, broker: Broker, message: MessageProxy) -> None:
        _PENDING.set(None)
