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


def _decide(conn: Connection, tenant: str,
            entity_id: str) -> tuple[str | None, Row | None, str | None]:
    """``(action, anchor row, first valid_from)``: what the rule asks for ``entity_id``."""
    if entity_id == HUB:
        return None, None, None
    anchor = _anchor_row(conn, tenant, entity_id)
    first = _first_valid_from(conn, tenant, entity_id)
    if first is None or has_hub_edge(conn, tenant, entity_id):
        return ("removed" if anchor is not None else None), anchor, first
    if anchor is None:
        return "added", None, first
    return ("moved" if anchor.valid_from != first else None), anchor, first


def needs_anchor(conn: Connection, tenant: str, entity_id: str) -> bool:
    """Whether a new belief about ``entity_id`` would add its anchor: not the hub, no anchor
    yet, no direct edge with the hub. Read only: what the write path embeds first."""
    return (entity_id != HUB and _anchor_row(conn, tenant, entity_id) is None
            and not has_hub_edge(conn, tenant, entity_id))


def anchor_action(conn: Connection, tenant: str, entity_id: str) -> str | None:
    """What ``sync_anchor`` would do, read only: ``added``, ``removed``, ``moved`` or None."""
    return _decide(conn, tenant, entity_id)[0]


def sync_anchor(tx: WriteTx, entity_id: str) -> str | None:
    """Add, move or drop the anchor of ``entity_id``; returns the action taken, if any."""
    action, anchor, first = _decide(tx.conn, tx.tenant, entity_id)
    if action == "removed" and anchor is not None:
        delete(tx, anchor)
        tx.act("anchor_removed")
    elif action == "added" and first is not None:
        _insert_anchor(tx, entity_id, first)
        tx.act("anchor_added")
    elif action == "moved" and anchor is not None:
        tx.conn.execute("UPDATE beliefs SET valid_from = ? WHERE id = ?", (first, anchor.id))
        tx.change("belief", anchor.uid)
    return action


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


def _subjects(conn: Connection, tenant: str, after: str, limit: int) -> list[str]:
    """A page of the subjects of beliefs, in id order (streamed from ix_beliefs_subject)."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT subject_id FROM beliefs WHERE tenant = ? AND subject_id > ? AND "
        "subject_id != ? ORDER BY subject_id LIMIT ?", (tenant, after, HUB, limit))]


def _anchored(conn: Connection, tenant: str, after: str, limit: int) -> list[str]:
    """A page of the entities that hold an anchor, in id order (streamed from
    ix_beliefs_object: the subject index would sort every anchor again for each page)."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT object_entity_id FROM beliefs INDEXED BY ix_beliefs_object WHERE "
        "tenant = ? AND object_entity_id > ? AND subject_id = ? AND predicate = ? AND "
        "source = ? ORDER BY object_entity_id LIMIT ?",
        (tenant, after, HUB, ANCHOR_PREDICATE, ANCHOR_SOURCE, limit))]


def _sync_page(conn: Connection, index: VectorIndex, tenant: str, batch: list[str],
               totals: dict[str, int]) -> None:
    todo = {e: a for e in batch if (a := anchor_action(conn, tenant, e)) is not None}
    if not todo:
        return
    embeds = Embeds(index)
    embeds.prepare(anchor_text(conn, tenant, e) for e, a in todo.items() if a == "added")
    with write_tx(conn, index, tenant, embeds) as tx:
        for entity_id in todo:
            action = sync_anchor(tx, entity_id)
            if action is not None:
                totals[action] += 1


def backfill_ego_anchors(conn: Connection, index: VectorIndex, tenant: str, *,
                         page: int = 500) -> BackfillReport:
    """Bring every anchor of ``tenant`` in line with the rule (idempotent; for the sleep loop).

    Pages through the subjects of beliefs, then the entities holding an anchor (one whose
    beliefs are gone must lose it); a page with nothing to fix writes nothing, and only the
    anchors to add are embedded (first, outside the transaction).
    """
    require_tenant(conn, tenant)
    totals = {"added": 0, "removed": 0, "moved": 0}
    for pager in (_subjects, _anchored):
        after = ""
        while batch := pager(conn, tenant, after, page):
            after = batch[-1]
            _sync_page(conn, index, tenant, batch, totals)
    return BackfillReport(tenant, totals["added"], totals["removed"], totals["moved"])
