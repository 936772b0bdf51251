"""The ego anchor: every non-hub subject reaches the hub ``user``.

A subject that has no belief edge of its own with the hub (either direction, any status)
gets ``user -related_to-> subject`` (source ``system_tool``, one per subject, content key
``anchor_key``), valid from the subject's earliest belief. When a real edge with the hub
appears the anchor is dropped: it is a derived edge, not a statement. "Reaches" is decided by
direct edges only, so the anchor set is a function of the beliefs and never of the order they
arrived in (a multi-hop rule would make it depend on which edge came first).

Payload objects (literals, paths, values) are never minted as entities, so they need no
anchor: their belief's subject carries them. ``backfill_ego_anchors`` is the idempotent sweep
run by the sleep loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_core.db.sqlite import Connection
from memory_core.model.belief_rules import Resolution, anchor_key, normalize_object, render_text
from memory_core.model.entities import HUB, entity_name
from memory_core.model.slots import NewBelief, Row, delete, insert, load_rows
from memory_core.model.tenants import require_tenant
from memory_core.model.write_tx import Embeds, WriteTx, write_tx
from memory_core.vectors import VectorIndex
from memory_core.vocabulary import ACTIVE, SYSTEM_TOOL

ANCHOR_PREDICATE = "related_to"
ANCHOR_SOURCE = SYSTEM_TOOL


def has_hub_edge(conn: Connection, tenant: str, entity_id: str) -> bool:
    """Whether a belief other than the anchor joins ``entity_id`` and the hub directly."""
    row = conn.execute(
        "SELECT 1 FROM beliefs WHERE tenant = ? AND belief_uid != ? AND ("
        "(subject_id = ? AND object_entity_id = ?) OR (subject_id = ? AND object_entity_id = ?)"
        ") LIMIT 1",
        (tenant, anchor_key(tenant, entity_id), HUB, entity_id, entity_id, HUB)).fetchone()
    return row is not None


def _anchor_row(conn: Connection, tenant: str, entity_id: str) -> Row | None:
    rows = load_rows(conn, tenant, "belief_uid = ?", (anchor_key(tenant, entity_id),))
    return rows[0] if rows else None


def _first_valid_from(conn: Connection, tenant: str, entity_id: str) -> str | None:
    row = conn.execute(
        "SELECT min(valid_from) FROM beliefs WHERE tenant = ? AND subject_id = ? "
        "AND belief_uid != ?", (tenant, entity_id, anchor_key(tenant, entity_id))).fetchone()
    return row[0] if row else None


def anchor_text(conn: Connection, tenant: str, entity_id: str) -> str:
    return render_text(entity_name(conn, tenant, HUB), ANCHOR_PREDICATE,
                       entity_name(conn, tenant, entity_id))


def sync_anchor(tx: WriteTx, entity_id: str) -> str | None:
    """Add, move or drop the anchor of ``entity_id``; returns the action taken, if any."""
    if entity_id == HUB:
        return None
    conn, tenant = tx.conn, tx.tenant
    anchor = _anchor_row(conn, tenant, entity_id)
    first = _first_valid_from(conn, tenant, entity_id)
    if first is None or has_hub_edge(conn, tenant, entity_id):
        if anchor is not None:
            delete(tx, anchor)
            tx.act("anchor_removed")
            return "removed"
        return None
    if anchor is None:
        _insert_anchor(tx, entity_id, first)
        tx.act("anchor_added")
        return "added"
    if anchor.valid_from != first:
        conn.execute("UPDATE beliefs SET valid_from = ? WHERE id = ?", (first, anchor.id))
        tx.change("belief", anchor.uid)
        return "moved"
    return None


def _insert_anchor(tx: WriteTx, entity_id: str, valid_from: str) -> int:
    name = entity_name(tx.conn, tx.tenant, entity_id)
    belief = NewBelief(
        uid=anchor_key(tx.tenant, entity_id), subject_id=HUB, predicate=ANCHOR_PREDICATE,
        object_text=name, object_norm=normalize_object(name), object_entity_id=entity_id,
        text=anchor_text(tx.conn, tx.tenant, entity_id), valid_from=valid_from,
        stated_valid_to=None, source=ANCHOR_SOURCE, confidence=1.0, turn_uid=None,
        expires_at=None)
    return insert(tx, belief, Resolution(ACTIVE, None))


@dataclass(frozen=True)
class BackfillReport:
    tenant: str
    added: int
    removed: int
    moved: int


def _candidates(conn: Connection, tenant: str) -> list[str]:
    """Subjects of beliefs, and entities that hold an anchor."""
    rows = conn.execute(
        "SELECT DISTINCT subject_id FROM beliefs WHERE tenant = ? AND subject_id != ? "
        "UNION SELECT object_entity_id FROM beliefs WHERE tenant = ? AND subject_id = ? "
        "AND predicate = ? AND source = ? AND object_entity_id IS NOT NULL",
        (tenant, HUB, tenant, HUB, ANCHOR_PREDICATE, ANCHOR_SOURCE)).fetchall()
    return sorted(r[0] for r in rows)


def backfill_ego_anchors(conn: Connection, index: VectorIndex, tenant: str) -> BackfillReport:
    """Bring every anchor of ``tenant`` in line with the rule (idempotent; for the sleep loop)."""
    require_tenant(conn, tenant)
    candidates = _candidates(conn, tenant)
    embeds = Embeds(index)
    embeds.prepare(anchor_text(conn, tenant, e) for e in candidates)
    with write_tx(conn, index, tenant, embeds) as tx:
        actions = [sync_anchor(tx, e) for e in _candidates(conn, tenant)]
    return BackfillReport(tenant, actions.count("added"), actions.count("removed"),
                          actions.count("moved"))
