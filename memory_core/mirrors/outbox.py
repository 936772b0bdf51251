"""Shipping the change outbox to the mirrors: one cursor per sink, moved only on success.

Every memory mutation appends ``(tenant, kind, object_id, op)`` to the ``outbox`` of
``memory_state.db`` in the transaction that made it (``write_tx``). A mirror sink (Postgres,
Neo4j) reads the rows after its cursor (``mirror_cursors`` in ``memory_ops.db``), applies
them with upserts on natural keys, and only then the cursor moves. A crash between the two
ships the same rows again, which the upserts absorb; two shipping runs at once ship the same
rows twice, harmlessly, and the cursor only moves forward.

The sinks themselves arrive with the mirrors issue: until then a configured mirror is refused
with ``MirrorNotInstalled`` (a ``ConfigurationError``, dead-lettered at once, so the work
can be requeued once the sink exists), and with no mirror configured there is nothing to
ship.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import Connection, atomic
from memory_core.errors import ConfigurationError
from memory_core.settings import Settings

DEFAULT_BATCH = 500


class MirrorNotInstalled(ConfigurationError):
    """A mirror is configured but this install has no sink for it."""


@dataclass(frozen=True)
class Change:
    """One outbox row: ids only (the sink reads the object's current state itself)."""

    outbox_id: int
    tenant: str
    kind: str  # belief | entity | episode
    object_id: str
    op: str  # upsert | delete


class MirrorSink(Protocol):
    """A mirror of the state db. ``name`` keys its cursor (``postgres``, ``neo4j``)."""

    name: str

    def apply(self, changes: Sequence[Change]) -> None:
        """Apply ``changes`` (upserts/deletes on natural keys, so a repeat changes nothing).
        Return only once the mirror has them durably; raise on any failure."""
        ...


def configured_mirrors(settings: Settings) -> tuple[str, ...]:
    """The names of the mirrors the settings ask for."""
    names = []
    if settings.postgres_url:
        names.append("postgres")
    if settings.neo4j_url:
        names.append("neo4j")
    return tuple(names)


def make_sinks(settings: Settings) -> list[MirrorSink]:
    """The configured sinks. Raises MirrorNotInstalled for a mirror this install lacks."""
    names = configured_mirrors(settings)
    if names:
        raise MirrorNotInstalled(
            f"mirror(s) {', '.join(names)} are configured but this mnemo has no sink for them "
            "yet: unset MNEMO_POSTGRES_URL / MNEMO_NEO4J_URL, or upgrade mnemo and run "
            "`mnemo queue requeue` to ship the outbox")
    return []


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


def _move_cursor(ops_conn: Connection, sink: str, last_id: int) -> None:
    with atomic(ops_conn) as conn:
        conn.execute(
            "INSERT INTO mirror_cursors (sink, last_outbox_id, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (sink) DO UPDATE SET last_outbox_id = max(last_outbox_id, "
            "excluded.last_outbox_id), updated_at = excluded.updated_at",
            (sink, last_id, to_db(utcnow())))


def ship_outbox(state_conn: Connection, ops_conn: Connection, sink: MirrorSink, *,
                batch: int = DEFAULT_BATCH, max_batches: int = 100) -> ShipReport:
    """Ship the outbox rows after ``sink``'s cursor, batch by batch; the cursor moves after
    each batch the sink accepted. Stops when caught up (or after ``max_batches``: the next
    run continues). A sink error propagates with the cursor at the last confirmed batch."""
    cursor = cursor_of(ops_conn, sink.name)
    first: int | None = None
    per_tenant: Counter[str] = Counter()
    for _ in range(max_batches):
        rows = state_conn.execute(
            "SELECT id, tenant, kind, object_id, op FROM outbox WHERE id > ? ORDER BY id "
            "LIMIT ?", (cursor, batch)).fetchall()
        if not rows:
            break
        changes = [Change(*row) for row in rows]
        sink.apply(changes)
        cursor = changes[-1].outbox_id
        _move_cursor(ops_conn, sink.name, cursor)
        first = changes[0].outbox_id if first is None else first
        per_tenant.update(c.tenant for c in changes)
    return ShipReport(sink.name, first, cursor if first is not None else None,
                      dict(per_tenant))
