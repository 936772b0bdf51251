"""Belief rows inside a write transaction: insert, delete, and re-resolve a slot.

Every change of a belief row goes through here, so each one updates the entity counts (by
the before/after contribution), queues its vector write and appends its outbox row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_core.db.sqlite import Connection, inserted_id
from memory_core.model.belief_rules import (
    COUNTED,
    Resolution,
    SlotBelief,
    count_contribution,
    resolve_slot,
)
from memory_core.model.predicates import PREDICATES
from memory_core.model.write_tx import WriteTx
from memory_core.vocabulary import ACTIVE

_COLS = ("id, belief_uid, object_norm, valid_from, source, status, valid_to, stated_valid_to, "
         "subject_id, object_entity_id, retired_at, negated")


@dataclass(frozen=True)
class Row:
    id: int
    uid: str
    object_norm: str
    valid_from: str
    source: str
    status: str
    valid_to: str | None
    stated_valid_to: str | None
    subject_id: str
    object_entity_id: str | None
    retired_at: str | None
    negated: int = 0

    def slot_belief(self) -> SlotBelief:
        return SlotBelief(self.uid, self.object_norm, self.valid_from, self.source,
                          self.status, self.valid_to, self.stated_valid_to, bool(self.negated))


@dataclass(frozen=True)
class NewBelief:
    uid: str
    subject_id: str
    predicate: str
    object_text: str
    object_norm: str
    object_entity_id: str | None
    text: str
    valid_from: str
    stated_valid_to: str | None
    source: str
    confidence: float
    turn_uid: str | None
    expires_at: str | None
    status: str = ACTIVE  # pending_review is kept; anything else is resolved
    negated: bool = False

    def slot_belief(self) -> SlotBelief:
        return SlotBelief(self.uid, self.object_norm, self.valid_from, self.source,
                          self.status, None, self.stated_valid_to, self.negated)


def load_rows(conn: Connection, tenant: str, where: str, params: tuple[Any, ...]) -> list[Row]:
    sql = f"SELECT {_COLS} FROM beliefs WHERE tenant = ? AND {where}"
    return [Row(*r) for r in conn.execute(sql, (tenant, *params))]


def load_slot(conn: Connection, tenant: str, subject_id: str, predicate: str,
              object_norm: str | None) -> list[Row]:
    if object_norm is None:
        return load_rows(conn, tenant, "subject_id = ? AND predicate = ?",
                         (subject_id, predicate))
    return load_rows(conn, tenant, "subject_id = ? AND predicate = ? AND object_norm = ?",
                     (subject_id, predicate, object_norm))


def _retired(old_retired: str | None, status: str, now: str) -> str | None:
    if status in COUNTED:
        return None
    return old_retired or now


def update_status(tx: WriteTx, row: Row, res: Resolution) -> bool:
    if (row.status, row.valid_to) == (res.status, res.valid_to):
        return False
    tx.conn.execute("UPDATE beliefs SET status = ?, valid_to = ?, retired_at = ? WHERE id = ?",
                    (res.status, res.valid_to, _retired(row.retired_at, res.status, tx.now),
                     row.id))
    tx.count(count_contribution(row.status, row.subject_id, row.object_entity_id), -1)
    tx.count(count_contribution(res.status, row.subject_id, row.object_entity_id), +1)
    tx.change("belief", row.uid)
    tx.act(f"belief_{res.status}")
    return True


def _resolve(tx: WriteTx, subject_id: str, predicate: str, object_norm: str,
             new: NewBelief | None) -> tuple[list[str], dict[str, Resolution]]:
    """Re-resolve a slot (``new`` joining it); the uids it changed and every result."""
    functional = PREDICATES[predicate].functional if predicate in PREDICATES else False
    rows = load_slot(tx.conn, tx.tenant, subject_id, predicate,
                     None if functional else object_norm)
    members = [r.slot_belief() for r in rows]
    if new is not None:
        members.append(new.slot_belief())
    result = resolve_slot(members, functional)
    changed = [row.uid for row in rows if update_status(tx, row, result[row.uid])]
    return changed, result


def resolve(tx: WriteTx, subject_id: str, predicate: str, object_norm: str) -> list[str]:
    """Re-resolve the slot of (subject, predicate[, object]) as it stands; the uids of the
    beliefs whose status or ``valid_to`` changed (one outbox row each)."""
    return _resolve(tx, subject_id, predicate, object_norm, None)[0]


def resolve_new(tx: WriteTx, subject_id: str, predicate: str, object_norm: str,
                new: NewBelief) -> Resolution:
    """Re-resolve the slot with ``new`` joining it (it is inserted next, with this result)."""
    return _resolve(tx, subject_id, predicate, object_norm, new)[1][new.uid]


def insert(tx: WriteTx, b: NewBelief, res: Resolution) -> int:
    cur = tx.conn.execute(
        "INSERT INTO beliefs (tenant, belief_uid, subject_id, predicate, object_text, "
        "object_norm, object_entity_id, text, valid_from, valid_to, stated_valid_to, "
        "recorded_at, retired_at, status, source, confidence, turn_uid, expires_at, negated) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (tx.tenant, b.uid, b.subject_id, b.predicate, b.object_text, b.object_norm,
         b.object_entity_id, b.text, b.valid_from, res.valid_to, b.stated_valid_to, tx.now,
         _retired(None, res.status, tx.now), res.status, b.source, b.confidence, b.turn_uid,
         b.expires_at, int(b.negated)))
    row_id = inserted_id(cur)
    tx.count(count_contribution(res.status, b.subject_id, b.object_entity_id), +1)
    tx.vector("beliefs", row_id, b.text)
    tx.change("belief", b.uid)
    tx.act("belief_inserted")
    return row_id


def delete(tx: WriteTx, row: Row) -> None:
    """Drop one belief row with its FTS (trigger) and vector rows."""
    tx.conn.execute("DELETE FROM beliefs WHERE id = ?", (row.id,))
    tx.count(count_contribution(row.status, row.subject_id, row.object_entity_id), -1)
    tx.drop_vector("beliefs", row.id)
    tx.change("belief", row.uid, "delete")
    tx.act("belief_deleted")
