"""Shipping the change outbox to the mirrors: one cursor per sink, moved only on success.

Every memory mutation appends ``(tenant, kind, object_id, op)`` to the ``outbox`` of
``memory_state.db`` in the transaction that made it (``write_tx``). A mirror sink
(``memory_core.mirrors.sink.MirrorSink``: Postgres, Neo4j) is handed the rows after its cursor
(``mirror_cursors`` in ``memory_ops.db``) as ``Record``s — each object's current state, or a
tombstone — applies them with upserts on natural keys, and only after it committed does the
cursor move. A crash between the two ships the same rows again, which the upserts absorb;
two shipping runs at once ship the same rows twice, harmlessly, and the cursor only moves
forward. A sink that is down raises ``MirrorUnavailable``: the error is recorded on its
cursor (``mnemo mirror status``), the cursor stays, and the ``ship_changes`` message is
retried with backoff by the worker's Retries middleware.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import Connection, atomic
from memory_core.errors import ConfigurationError, MnemoError
from memory_core.mirrors.records import read_records
from memory_core.mirrors.sink import MirrorSink, order_records
from memory_core.settings import Settings

DEFAULT_BATCH = 500

# Sink name -> "module:class" with a ``from_settings(settings)`` constructor, imported only
# when that mirror is configured (so psycopg / neo4j load only where they are used).
SINKS: dict[str, str] = {
    "postgres": "memory_core.mirrors.postgres:PostgresSink",
    "neo4j": "memory_core.mirrors.neo4j:Neo4jSink",
}


class MirrorNotInstalled(ConfigurationError):
    """A mirror is configured but this install has no sink for it."""


@dataclass(frozen=True)
class Change:
    """One outbox row: ids only (the shipper reads the object's current state itself)."""

    outbox_id: int
    tenant: str
    kind: str  # turn | episode | entity | belief | tenant
    object_id: str
    op: str  # upsert | delete | clear


def configured_mirrors(settings: Settings) -> tuple[str, ...]:
    """The names of the mirrors the settings ask for."""
    names = []
    # With the Postgres primary (MNEMO_STATE_BACKEND=postgres) the URL names the primary
    # itself: there is no Postgres mirror to ship to.
    if settings.postgres_url and settings.state_backend != "postgres":
        names.append("postgres")
    if settings.neo4j_url:
        names.append("neo4j")
    return tuple(names)


def make_sinks(settings: Settings) -> list[MirrorSink]:
    """The configured sinks (not connected yet). Raises MirrorNotInstalled for a mirror this
    install has no sink for."""
    missing = [n for n in configured_mirrors(settings) if n not in SINKS]
    if missing:
        raise MirrorNotInstalled(
            f"mirror(s) {', '.join(missing)} are configured but this mnemo has no sink for "
            "them yet: unset their MNEMO_*_URL, or upgrade mnemo and run "
            "`mnemo queue requeue` to ship the outbox")
    return [make_sink(settings, name) for name in configured_mirrors(settings)]


def make_sink(settings: Settings, name: str) -> MirrorSink:
    """The sink ``name`` of ``SINKS`` built from the settings (not connected yet)."""
    module, cls = SINKS[name].split(":")
    sink: MirrorSink = getattr(importlib.import_module(module), cls).from_settings(settings)
    return sink


@dataclass(frozen=True)
class ShipReport:
    sink: str
    first_id: int | None
    last_id: int | None
    per_tenant: dict[str, int] = field(default_factory=dict)

    @property
    def shipped(self) -> int:
        return sum(self.per_tenant.values())


def cursor_of(ops_conn: Connection, sink: str) -> int:
    row = ops_conn.execute("SELECT last_outbox_id FROM mirror_cursors WHERE sink = ?",
                           (sink,)).fetchone()
    return int(row[0]) if row else 0


def move_cursor(ops_conn: Connection, sink: str, last_id: int) -> None:
    with atomic(ops_conn) as conn:
        conn.execute(
            "INSERT INTO mirror_cursors (sink, last_outbox_id, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (sink) DO UPDATE SET last_outbox_id = max(last_outbox_id, "
            "excluded.last_outbox_id), updated_at = excluded.updated_at, last_error = NULL, "
            "last_error_at = NULL",
            (sink, last_id, to_db(utcnow())))


def record_error(ops_conn: Connection, sink: str, error: BaseException) -> None:
    """Keep ``error`` on ``sink``'s cursor: its type and, for mnemo's own errors (whose
    messages carry no secret and no memory text), the message; a library's text never."""
    text = type(error).__name__
    if isinstance(error, MnemoError):
        text += f": {error}"
    with atomic(ops_conn) as conn:
        conn.execute(
            "INSERT INTO mirror_cursors (sink, last_outbox_id, updated_at, last_error, "
            "last_error_at) VALUES (?, 0, ?, ?, ?) ON CONFLICT (sink) DO UPDATE SET "
            "last_error = excluded.last_error, last_error_at = excluded.last_error_at",
            (sink, to_db(utcnow()), text[:500], to_db(utcnow())))


def settled_outbox_id(state_conn: Connection) -> int:
    """The outbox's last id read under the store-wide write lock: every transaction that took
    an id at or below it has ended. On the Postgres primary writers of different tenants
    commit at once, so a row with a lower id can appear after a higher one; shipping only up
    to this id never moves a cursor past a row still to come. (On SQLite, one writer at a
    time, it is simply the last id.)"""
    with atomic(state_conn):
        row = state_conn.execute("SELECT max(id) FROM outbox").fetchone()
    return int(row[0] or 0) if row else 0


def ship_outbox(state_conn: Connection, ops_conn: Connection, sink: MirrorSink, *,
                batch: int = DEFAULT_BATCH, max_batches: int = 100) -> ShipReport:
    """Ship the outbox rows after ``sink``'s cursor, batch by batch: each batch becomes the
    records of the kinds the sink mirrors (``sink.kinds``), the sink applies them, then the
    cursor moves past the batch. Stops when caught up (or after ``max_batches``: the next run
    continues). A sink error is recorded on the cursor and propagates, the cursor at the last
    batch the sink committed."""
    cursor = cursor_of(ops_conn, sink.name)
    first: int | None = None
    per_tenant: Counter[str] = Counter()
    try:
        settled = settled_outbox_id(state_conn)
        for _ in range(max_batches):
            rows = state_conn.execute(
                "SELECT id, tenant, kind, object_id, op FROM outbox WHERE id > ? AND id <= ? "
                "ORDER BY id LIMIT ?", (cursor, settled, batch)).fetchall()
            if not rows:
                break
            changes = [Change(*row) for row in rows]
            records = read_records(state_conn, ((c.tenant, c.kind, c.object_id)
                                                for c in changes), sink.kinds)
            if records:
                sink.apply(order_records(records))
            cursor = changes[-1].outbox_id
            move_cursor(ops_conn, sink.name, cursor)
            first = changes[0].outbox_id if first is None else first
            per_tenant.update(c.tenant for c in changes)
    except Exception as e:
        record_error(ops_conn, sink.name, e)
        raise
    return ShipReport(sink.name, first, cursor if first is not None else None,
                      dict(per_tenant))


def ship_all(state_conn: Connection, ops_conn: Connection, sinks: Sequence[MirrorSink], *,
             batch: int = DEFAULT_BATCH) -> list[ShipReport]:
    """Ship to every sink; one that fails does not hold the others back. Raises the first
    failure after all were tried (so the message is retried and the healthy sinks moved)."""
    reports: list[ShipReport] = []
    failure: Exception | None = None
    for sink in sinks:
        try:
            try:
                sink.open()
            except Exception as e:
                record_error(ops_conn, sink.name, e)
                raise
            reports.append(ship_outbox(state_conn, ops_conn, sink, batch=batch))  # records its own
        except Exception as e:
            if failure is None:
                failure = e
    if failure is not None:
        raise failure
    return reports
