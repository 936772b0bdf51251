"""How far behind each configured mirror is: ``mnemo mirror status`` (and ``--json``).

Read from the two SQLite files only (the outbox and the cursors), so it answers while a
mirror is down — which is when it is most needed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from memory_core.clock import from_db, to_display, utcnow
from memory_core.db.sqlite import Connection
from memory_core.settings import Settings


@dataclass(frozen=True)
class SinkStatus:
    sink: str
    target: str | None  # the canonical URL (it cannot hold a password)
    cursor: int  # the last outbox id the sink committed
    head: int  # the newest outbox id
    lag_changes: int  # outbox rows not yet shipped
    lag_seconds: float  # age of the oldest unshipped row (0 when caught up)
    shipped_at: str | None  # when the cursor last moved
    last_error: str | None  # the last failed attempt since then (type and mnemo's message)
    last_error_at: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _target(settings: Settings, sink: str) -> str | None:
    return {"postgres": settings.postgres_url, "neo4j": settings.neo4j_url}.get(sink)


def _display(text: str | None) -> str | None:
    return to_display(from_db(text)) if text else None


def mirror_status(state: Connection, ops: Connection, settings: Settings,
                  sinks: tuple[str, ...], now: datetime | None = None) -> list[SinkStatus]:
    """One ``SinkStatus`` per name in ``sinks`` (the configured mirrors)."""
    now = now or utcnow()
    head = int(state.execute("SELECT coalesce(max(id), 0) FROM outbox").fetchone()[0])
    out = []
    for sink in sinks:
        row = ops.execute("SELECT last_outbox_id, updated_at, last_error, last_error_at FROM "
                          "mirror_cursors WHERE sink = ?", (sink,)).fetchone()
        cursor = int(row[0]) if row else 0
        lag, oldest = state.execute("SELECT count(*), min(created_at) FROM outbox WHERE id > ?",
                                    (cursor,)).fetchone()
        seconds = max(0.0, (now - from_db(oldest)).total_seconds()) if oldest else 0.0
        shipped = row[1] if row and cursor else None
        out.append(SinkStatus(sink, _target(settings, sink), cursor, head, int(lag),
                              round(seconds, 1), _display(shipped),
                              row[2] if row else None, _display(row[3] if row else None)))
    return out
