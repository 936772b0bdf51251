"""Reconsolidation of subjects: entity duplicates, belief duplicates, missing vectors, counts.

Everything here reuses the model's own rules:
- **entities**: an entity whose own name now names another entity (its alias moved: a
  person shell of the user, an imported duplicate) is merged into that one through
  ``merges.merge_in_tx`` (beliefs rewired, exact duplicates dropped, the ledger archived);
- **beliefs**: a row's ``belief_uid`` must be the content key of what it says
  (``belief_rules.content_key``; ``anchor_key`` for an ego anchor). A row whose key is stale
  takes the right one; when another row already holds it, the two say the same thing and
  the stale one goes (provenance merged as a replay would: highest confidence, earliest
  turn; an ``invalidated`` decision is carried over, never dropped). The slot is then
  re-resolved (``slots.resolve``): statuses and ``valid_to`` are recomputed, nothing else
  is deleted, so every bi-temporal row the rules keep stays;
- **vectors**: a row with no vector in the active generation is embedded (another
  embedder's vectors are handled by a reindex: see ``reconsolidation``);
- **counts**: ``counts.recount`` for the partition's entities.

Rows are streamed by id (``scan``) and kept when their subject hashes to the partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memory_core.maintenance.partitions import bucket
from memory_core.model import counts
from memory_core.model.belief_rules import (
    INVALIDATED,
    Resolution,
    anchor_key,
    content_key,
    render_text,
)
from memory_core.model.ego_anchor import ANCHOR_PREDICATE, ANCHOR_SOURCE
from memory_core.model.entities import HUB, entity_name, lookup
from memory_core.model.merges import merge_in_tx
from memory_core.model.slots import delete, load_rows, resolve, update_status
from memory_core.model.write_tx import Embeds, WriteTx


@lru_cache(maxsize=4096)  # for the rows of one subject next to each other (and the hub)
def _subject_bucket(tenant: str, subject: str, partitions: int) -> int:
    return bucket("subject", tenant, subject, partitions)


def scan(conn: Any, table: str, column: str, after: int, limit: int, partition: int,
         partitions: int) -> tuple[list[tuple[int, str, str]], int | None]:
    """The next ``limit`` rows of ``table`` by id: ``(id, tenant, column)`` of those whose
    ``column`` (a subject entity id) hashes to ``partition``, and the last id read (None at
    the end of the table)."""
    rows = conn.execute(f"SELECT id, tenant, {column} FROM {table} WHERE id > ? ORDER BY id "
                        "LIMIT ?", (after, limit)).fetchall()
    if not rows:
        return [], None
    mine = [(r[0], r[1], r[2]) for r in rows
            if _subject_bucket(r[1], r[2], partitions) == partition]
    return mine, int(rows[-1][0])


# --- beliefs ------------------------------------------------------------------------------

@dataclass(frozen=True)
class BeliefRow:
    id: int
    tenant: str
    uid: str
    subject_id: str
    predicate: str
    object_norm: str
    object_entity_id: str | None
    valid_from: str
    source: str
    negated: int
    text: str


def canonical_uid(b: BeliefRow) -> str:
    """The key this row should carry: its anchor key or its content key."""
    if (b.subject_id == HUB and b.predicate == ANCHOR_PREDICATE and b.source == ANCHOR_SOURCE
            and b.object_entity_id is not None):
        return anchor_key(b.tenant, b.object_entity_id)
    return content_key(b.tenant, b.subject_id, b.predicate, b.object_norm, b.valid_from,
                       b.source, bool(b.negated))


def load_beliefs(conn: Any, ids: list[int]) -> list[BeliefRow]:
    if not ids:
        return []
    rows = conn.execute(
        "SELECT id, tenant, belief_uid, subject_id, predicate, object_norm, object_entity_id, "
        f"valid_from, source, negated, text FROM beliefs WHERE id IN ({','.join('?' * len(ids))})"
        " ORDER BY id", ids).fetchall()
    return [BeliefRow(*r) for r in rows]


def _merge_into_twin(tx: WriteTx, stale: BeliefRow, twin_id: int) -> None:
    conn = tx.conn
    a = conn.execute("SELECT confidence, turn_uid, expires_at, status FROM beliefs WHERE id = ?",
                     (stale.id,)).fetchone()
    b = conn.execute("SELECT confidence, turn_uid, expires_at, status FROM beliefs WHERE id = ?",
                     (twin_id,)).fetchone()
    turns = [t for t in (a[1], b[1]) if t is not None]
    expires = None if a[2] is None or b[2] is None else max(a[2], b[2])
    conn.execute("UPDATE beliefs SET confidence = ?, turn_uid = ?, expires_at = ? WHERE id = ?",
                 (max(a[0], b[0]), min(turns) if turns else None, expires, twin_id))
    if a[3] == INVALIDATED and b[3] != INVALIDATED:  # a person's decision outlives the copy
        twin = load_rows(conn, tx.tenant, "id = ?", (twin_id,))[0]
        update_status(tx, twin, Resolution(INVALIDATED, twin.valid_to))
    delete(tx, load_rows(conn, tx.tenant, "id = ?", (stale.id,))[0])


def fix_key(tx: WriteTx, b: BeliefRow) -> str | None:
    """Give a stale row its key, or fold it into the row holding it; re-resolve the slot.
    Returns the action taken, or None when the key was right."""
    canon = canonical_uid(b)
    if canon == b.uid:
        return None
    twin = tx.conn.execute("SELECT id FROM beliefs WHERE tenant = ? AND belief_uid = ?",
                           (tx.tenant, canon)).fetchone()
    if twin is None:
        tx.conn.execute("UPDATE beliefs SET belief_uid = ? WHERE id = ?", (canon, b.id))
        tx.change("belief", b.uid, "delete")
        tx.change("belief", canon)
        action = "beliefs_rekeyed"
    else:
        _merge_into_twin(tx, b, int(twin[0]))
        action = "beliefs_deduped"
    resolve(tx, b.subject_id, b.predicate, b.object_norm)
    return action


# --- entities -----------------------------------------------------------------------------

def duplicate_of(conn: Any, tenant: str, entity_id: str) -> str | None:
    """The entity this one's own name names now, when that is another entity."""
    if entity_id == HUB:
        return None
    row = conn.execute("SELECT name FROM entities WHERE tenant = ? AND entity_id = ?",
                       (tenant, entity_id)).fetchone()
    if row is None:
        return None
    target = lookup(conn, tenant, row[0])
    if target is None or target == entity_id:
        return None
    exists = conn.execute("SELECT 1 FROM entities WHERE tenant = ? AND entity_id = ?",
                          (tenant, target)).fetchone()
    return target if exists else None


def merge_texts(conn: Any, tenant: str, from_id: str, into_id: str) -> list[str]:
    """The texts a merge will embed (computed before its transaction)."""
    into_name = entity_name(conn, tenant, into_id)
    rows = conn.execute("SELECT predicate, object_text, negated FROM beliefs WHERE tenant = ? "
                        "AND subject_id = ?", (tenant, from_id)).fetchall()
    hub = entity_name(conn, tenant, HUB)
    return [*(render_text(into_name, p, o, bool(n)) for p, o, n in rows),
            render_text(hub, ANCHOR_PREDICATE, into_name)]


def merge_duplicate(tx: WriteTx, entity_id: str) -> bool:
    """Merge ``entity_id`` into the entity its name names, when it is a duplicate."""
    into = duplicate_of(tx.conn, tx.tenant, entity_id)
    if into is None:
        return False
    merge_in_tx(tx, entity_id, into)
    return True


def recount(conn: Any, tenant: str, entity_ids: list[str]) -> int:
    return counts.recount(conn, tenant, entity_ids)


def prepare_merges(conn: Any, embeds: Embeds, rows: list[tuple[int, str, str]]) -> None:
    texts: list[str] = []
    for _, tenant, entity_id in rows:
        into = duplicate_of(conn, tenant, entity_id)
        if into is not None:
            texts.extend(merge_texts(conn, tenant, entity_id, into))
    embeds.prepare(texts)
