"""Merging two entities: rewire beliefs, record the merge, archive the ledger first.

``merge_entities(from, into)`` moves every belief of ``from`` onto ``into`` (new content keys
for rewired subjects; an exact duplicate of a belief ``into`` already holds is dropped),
repoints ``from``'s aliases, re-resolves the slots it touched and the ego anchors, and
drops ``from``. Ledger rows that mention ``from`` are copied to ``entity_merges_archive``
before ``from`` is dropped, so the history survives any later cleanup of the live ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_core.db.entity_kinds import THING
from memory_core.db.sqlite import Connection
from memory_core.errors import InvalidInputError
from memory_core.model.belief_rules import anchor_key, content_key, count_contribution, render_text
from memory_core.model.ego_anchor import sync_anchor
from memory_core.model.entities import HUB, entity_name
from memory_core.model.slots import Row, delete, load_rows, resolve
from memory_core.model.tenants import require_tenant
from memory_core.model.write_tx import Embeds, WriteTx, write_tx
from memory_core.vectors import VectorIndex


@dataclass(frozen=True)
class MergeResult:
    tenant: str
    from_entity_id: str
    into_entity_id: str
    beliefs_rewired: int
    duplicates_dropped: int


def _archive_ledger(tx: WriteTx, from_id: str, into_id: str) -> None:
    params = (tx.tenant, from_id, from_id)
    tx.conn.execute(
        "INSERT INTO entity_merges_archive (tenant, from_entity_id, into_entity_id, from_name, "
        "beliefs_rewired, merged_at, archived_at) SELECT tenant, from_entity_id, "
        "into_entity_id, from_name, beliefs_rewired, merged_at, ? FROM entity_merges "
        "WHERE tenant = ? AND (from_entity_id = ? OR into_entity_id = ?)", (tx.now, *params))
    tx.conn.execute("UPDATE entity_merges SET into_entity_id = ? WHERE tenant = ? AND "
                    "into_entity_id = ?", (into_id, tx.tenant, from_id))


def _details(conn: Connection, row_id: int) -> tuple[str, str]:
    return conn.execute("SELECT predicate, object_text FROM beliefs WHERE id = ?",
                        (row_id,)).fetchone()


def _rewire(tx: WriteTx, row: Row, from_id: str, into_id: str,
            touched: set[tuple[str, str]], others: set[str]) -> bool:
    """Move one belief; returns False when it was dropped as a duplicate or dead anchor."""
    conn = tx.conn
    if row.uid == anchor_key(tx.tenant, from_id):
        delete(tx, row)
        return False
    predicate, object_text = _details(conn, row.id)
    subject = into_id if row.subject_id == from_id else row.subject_id
    obj = into_id if row.object_entity_id == from_id else row.object_entity_id
    uid = row.uid
    if subject != row.subject_id:
        uid = content_key(tx.tenant, subject, predicate, row.object_norm, row.valid_from,
                          row.source, bool(row.negated))
        if conn.execute("SELECT 1 FROM beliefs WHERE tenant = ? AND belief_uid = ?",
                        (tx.tenant, uid)).fetchone():
            delete(tx, row)
            return False
    text = render_text(entity_name(conn, tx.tenant, subject), predicate, object_text,
                       bool(row.negated))
    conn.execute("UPDATE beliefs SET subject_id = ?, object_entity_id = ?, belief_uid = ?, "
                 "text = ? WHERE id = ?", (subject, obj, uid, text, row.id))
    tx.count(count_contribution(row.status, row.subject_id, row.object_entity_id), -1)
    tx.count(count_contribution(row.status, subject, obj), +1)
    if uid != row.uid:
        tx.change("belief", row.uid, "delete")
    tx.change("belief", uid)
    tx.vector("beliefs", row.id, text)
    touched.add((predicate, row.object_norm))
    others.update(e for e in (subject, obj) if e is not None)
    return True


def merge_in_tx(tx: WriteTx, from_id: str, into_id: str) -> MergeResult:
    """Merge inside an open transaction (see the module docstring)."""
    conn, tenant = tx.conn, tx.tenant
    if from_id == into_id:
        raise InvalidInputError(f"cannot merge entity {from_id!r} into itself")
    if from_id == HUB:
        raise InvalidInputError("the hub entity 'user' cannot be merged away: merge the "
                                "other entity into 'user' instead")
    from_name = entity_name(conn, tenant, from_id)
    entity_name(conn, tenant, into_id)  # raises NotFoundError
    _archive_ledger(tx, from_id, into_id)
    rows = load_rows(conn, tenant, "(subject_id = ? OR object_entity_id = ?)", (from_id, from_id))
    touched: set[tuple[str, str]] = set()
    others: set[str] = set()
    moved = sum(_rewire(tx, row, from_id, into_id, touched, others) for row in rows)
    conn.execute("UPDATE entity_aliases SET entity_id = ? WHERE tenant = ? AND entity_id = ?",
                 (into_id, tenant, from_id))
    conn.execute("INSERT INTO entity_merges (tenant, from_entity_id, into_entity_id, from_name, "
                 "beliefs_rewired, merged_at) VALUES (?, ?, ?, ?, ?, ?)",
                 (tenant, from_id, into_id, from_name, moved, tx.now))
    # The survivor takes the merged entity's kind when it had none of its own (a "thing").
    conn.execute("UPDATE entities SET kind = (SELECT kind FROM entities WHERE tenant = ? AND "
                 "entity_id = ?) WHERE tenant = ? AND entity_id = ? AND kind = ?",
                 (tenant, from_id, tenant, into_id, THING))
    conn.execute("DELETE FROM entities WHERE tenant = ? AND entity_id = ?", (tenant, from_id))
    tx.count_deltas.pop(from_id, None)
    for predicate, object_norm in sorted(touched):
        resolve(tx, into_id, predicate, object_norm)
    for entity_id in sorted(others - {from_id}):
        sync_anchor(tx, entity_id)
    tx.change("entity", from_id, "delete")
    tx.change("entity", into_id)
    tx.act("entity_merged")
    return MergeResult(tenant, from_id, into_id, moved, len(rows) - moved)


def merge_entities(conn: Connection, index: VectorIndex, tenant: str, from_entity_id: str,
                   into_entity_id: str) -> MergeResult:
    """Merge ``from_entity_id`` into ``into_entity_id`` in one transaction.

    Raises NotFoundError for an unknown entity, InvalidInputError for a self-merge or an
    attempt to merge the hub away.
    """
    require_tenant(conn, tenant)
    embeds = Embeds(index)
    into_name = entity_name(conn, tenant, into_entity_id)
    rows = conn.execute("SELECT predicate, object_text, negated FROM beliefs WHERE tenant = ? "
                        "AND subject_id = ?", (tenant, from_entity_id)).fetchall()
    embeds.prepare(render_text(into_name, p, o, bool(n)) for p, o, n in rows)
    with write_tx(conn, index, tenant, embeds) as tx:
        result = merge_in_tx(tx, from_entity_id, into_entity_id)
    return result
