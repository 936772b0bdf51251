"""The retention sweep: memories past their ``expires_at`` are removed, verifiably.

A belief or an episode may carry a retention date (``expires_at``). Recall stops showing it
as soon as the date passes (``recall.candidates``); the sweep then removes it through the
verified delete path (``model.deletion.delete_memories``: primary, FTS and vector rows go,
a digest-only tombstone with reason ``retention_sweep`` stays), a page per transaction.
Turns carry no retention date; deleting an episode leaves its turn. ``session_purge`` runs
the sweep daily; ``mnemo memory sweep --dry-run`` lists what it would remove (kinds, ids
and dates, never text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_core.clock import to_db
from memory_core.db.sqlite import Connection
from memory_core.model.deletion import delete_memories
from memory_core.model.tenants import require_tenant
from memory_core.vectors import VectorIndex

PAGE = 200
REASON = "retention_sweep"
# kind -> (table, uid column)
_KINDS = {"belief": ("beliefs", "belief_uid"), "episode": ("episodes", "episode_uid")}


@dataclass(frozen=True)
class Expired:
    """One memory past its retention date (no text)."""

    tenant: str
    kind: str  # belief | episode
    id: int
    uid: str
    expires_at: str

    def to_dict(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "kind": self.kind, "id": self.id, "uid": self.uid,
                "expires_at": self.expires_at}


@dataclass
class SweepReport:
    tenant: str
    found: dict[str, int] = field(default_factory=dict)  # kind -> memories past their date
    deleted: dict[str, int] = field(default_factory=dict)  # table -> rows removed


def expired_pages(conn: Connection, tenant: str, now: datetime,
                  page: int = PAGE) -> Iterator[list[Expired]]:
    """The memories of ``tenant`` past their retention date at ``now``, a page at a time,
    oldest date first (a cursor, so the caller may delete each page as it goes)."""
    cutoff = to_db(now)
    for kind, (table, uid_col) in _KINDS.items():
        last_at, last_id = "", 0
        while rows := conn.execute(
                f"SELECT id, {uid_col}, expires_at FROM {table} WHERE tenant = ? AND "
                "expires_at IS NOT NULL AND expires_at <= ? AND (expires_at > ? OR "
                "(expires_at = ? AND id > ?)) ORDER BY expires_at, id LIMIT ?",
                (tenant, cutoff, last_at, last_at, last_id, page)).fetchall():
            last_id, _, last_at = rows[-1]
            yield [Expired(tenant, kind, r[0], r[1], r[2]) for r in rows]


def sweep(conn: Connection, index: VectorIndex, tenant: str, now: datetime, *,
          dry_run: bool = False,
          on_page: Callable[[list[Expired]], None] | None = None) -> SweepReport:
    """Remove (``dry_run``: only find) the memories of ``tenant`` past their retention date.

    Never touches another tenant. Raises UnknownTenantError, or DeletionNotConfirmedError
    (that page is left whole; the pages before it are gone, and a rerun continues).
    """
    require_tenant(conn, tenant)
    report = SweepReport(tenant)
    for items in expired_pages(conn, tenant, now):
        if on_page is not None:
            on_page(items)
        for item in items:
            report.found[item.kind] = report.found.get(item.kind, 0) + 1
        if dry_run:
            continue
        done = delete_memories(conn, index, tenant, [(i.kind, i.id) for i in items],
                               reason=REASON, now=now)
        for table, n in done.deleted.items():
            report.deleted[table] = report.deleted.get(table, 0) + n
    return report
