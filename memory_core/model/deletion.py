"""Verified deletion: primary, FTS and vector rows go, a digest-only tombstone stays.

``delete_memory(kind, ref)`` (``delete_memories`` for a batch of one tenant, as the sweeps
do) deletes a turn (with its episodes and the beliefs drawn from it),
an episode, or a belief, in one transaction with ``PRAGMA secure_delete`` on (freed pages are
zeroed). Beliefs leave through the normal rules (their slot is re-resolved, anchors and
counts follow), entities left with no belief are dropped with their aliases, and each FTS
table touched is optimised so no segment still holds the deleted tokens. Then every part is
confirmed — primary rows, FTS ``docsize`` rows, vectors in every generation — and if any
cannot be confirmed the transaction rolls back and ``DeletionNotConfirmedError`` is raised:
nothing is deleted. The write-ahead log is checkpointed afterwards (best effort).

On the Postgres primary the same plan runs in one transaction holding the tenant's write
lock; the full-text postings and row lengths of a deleted row go with it (the ``pg_fts``
trigger), and the confirmation reads the base rows, the postings, the row lengths, the
pending queue and every vector generation. There is no ``secure_delete``: the deleted
tuples' bytes stay in the table files until VACUUM reuses them (autovacuum, or an operator's
``VACUUM``) and in WAL archives and backups until they expire — ``checkpointed`` is False.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_core.clock import to_db, utcnow
from memory_core.db.dialect import is_postgres
from memory_core.db.sqlite import Connection, atomic
from memory_core.errors import DeletionNotConfirmedError, InvalidInputError, NotFoundError
from memory_core.model.ego_anchor import sync_anchor
from memory_core.model.entities import HUB
from memory_core.model.self_hub import NAME_PREDICATE, forget_hub_names
from memory_core.model.slots import Row, delete, load_rows, resolve
from memory_core.model.tenants import require_tenant
from memory_core.model.write_tx import Embeds, WriteTx
from memory_core.vectors import VectorIndex

KINDS = ("turn", "episode", "belief")
_REASON_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


@dataclass
class DeletionReport:
    tenant: str
    kind: str
    ref: str
    tombstones: int = 0
    deleted: dict[str, int] = field(default_factory=dict)  # table -> rows
    checkpointed: bool = False


def digest(kind: str, uid: str, text: str) -> str:
    return hashlib.sha256(f"{kind}\x00{uid}\x00{text}".encode()).hexdigest()


@dataclass
class _Plan:
    turns: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (uid, text)
    episodes: dict[int, tuple[str, str]] = field(default_factory=dict)
    beliefs: dict[int, Row] = field(default_factory=dict)


def _one(conn: Connection, sql: str, params: tuple[Any, ...], what: str) -> Any:
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise NotFoundError(f"{what} does not exist in this tenant: nothing was deleted")
    return row


def _plan(conn: Connection, tenant: str, kind: str, ref: int | str, plan: _Plan) -> _Plan:
    """Add what deleting ``kind`` ``ref`` removes to ``plan``; raises NotFoundError."""
    col = "id" if isinstance(ref, int) else ("turn_uid" if kind == "turn" else f"{kind}_uid")
    if kind == "turn":
        tid, uid, text = _one(conn, f"SELECT id, turn_uid, text FROM turns WHERE tenant = ? AND "
                              f"{col} = ?", (tenant, ref), f"turn {ref!r}")
        plan.turns[tid] = (uid, text)
        for eid, euid, etext in conn.execute(
                "SELECT e.id, e.episode_uid, e.text FROM episodes e JOIN episode_turns et ON "
                "et.episode_id = e.id WHERE et.turn_id = ?", (tid,)):
            plan.episodes[eid] = (euid, etext)
        for row in load_rows(conn, tenant, "turn_uid = ?", (uid,)):
            plan.beliefs[row.id] = row
    elif kind == "episode":
        eid, uid, text = _one(conn, f"SELECT id, episode_uid, text FROM episodes WHERE "
                              f"tenant = ? AND {col} = ?", (tenant, ref),
                              f"episode {ref!r}")
        plan.episodes[eid] = (uid, text)
    else:
        where = "id = ?" if isinstance(ref, int) else "belief_uid = ?"
        rows = load_rows(conn, tenant, where, (ref,))
        if not rows:
            raise NotFoundError(f"belief {ref!r} does not exist in this tenant: nothing deleted")
        plan.beliefs[rows[0].id] = rows[0]
    return plan


def _texts(conn: Connection, ids: list[int]) -> dict[int, tuple[str, str, str]]:
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT id, predicate, text, object_text FROM beliefs WHERE id IN "
                        f"({marks})", ids).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _tomb(tx: WriteTx, kind: str, uid: str, text: str, reason: str) -> None:
    tx.conn.execute("INSERT INTO tombstones (tenant, kind, digest, deleted_at, reason) VALUES "
                    "(?, ?, ?, ?, ?)", (tx.tenant, kind, digest(kind, uid, text), tx.now, reason))


def _delete_beliefs(tx: WriteTx, rows: list[Row], reason: str) -> set[str]:
    """Delete beliefs through the rules; returns the entities they touched."""
    if not rows:
        return set()
    details = _texts(tx.conn, [r.id for r in rows])
    touched: set[str] = set()
    slots: set[tuple[str, str, str]] = set()
    names: list[str] = []  # the user's names deleted
    for row in rows:
        predicate, text, object_text = details[row.id]
        delete(tx, row)
        _tomb(tx, "belief", row.uid, text, reason)
        slots.add((row.subject_id, predicate, row.object_norm))
        touched.update(e for e in (row.subject_id, row.object_entity_id) if e)
        if row.subject_id == HUB and predicate == NAME_PREDICATE:
            names.append(object_text)
    for subject, predicate, object_norm in sorted(slots):
        resolve(tx, subject, predicate, object_norm)
    if names:  # after the slots: an older name this one had closed may be current again
        forget_hub_names(tx, names)
    for entity_id in sorted(touched):
        sync_anchor(tx, entity_id)
    return touched


def _drop_orphans(tx: WriteTx, entity_ids: set[str]) -> int:
    dropped = 0
    for entity_id in sorted(entity_ids - {HUB}):
        used = tx.conn.execute(
            "SELECT 1 FROM beliefs WHERE tenant = ? AND (subject_id = ? OR object_entity_id = ?) "
            "LIMIT 1", (tx.tenant, entity_id, entity_id)).fetchone()
        if used is None:
            tx.conn.execute("DELETE FROM entity_aliases WHERE tenant = ? AND entity_id = ?",
                            (tx.tenant, entity_id))
            tx.conn.execute("DELETE FROM entities WHERE tenant = ? AND entity_id = ?",
                            (tx.tenant, entity_id))
            tx.count_deltas.pop(entity_id, None)
            tx.change("entity", entity_id, "delete")
            dropped += 1
    return dropped


def _index_rows(conn: Connection, table: str, marks: str, ids: list[int]) -> int:
    """How many full-text index rows ``ids`` of ``table`` still have."""
    if not is_postgres(conn):
        return int(conn.execute(f"SELECT count(*) FROM {table}_fts_docsize WHERE id IN "
                                f"({marks})", ids).fetchone()[0])
    return int(conn.execute(
        f"SELECT (SELECT count(*) FROM {table}_fts_p WHERE doc IN ({marks})) + (SELECT "
        f"count(*) FROM {table}_fts_len WHERE doc IN ({marks})) + (SELECT count(*) FROM "
        f"fts_pending WHERE tbl = ? AND doc IN ({marks}))",
        [*ids, *ids, table, *ids]).fetchone()[0])


def _confirm(conn: Connection, index: VectorIndex, table: str, ids: list[int]) -> None:
    if not ids:
        return
    marks = ",".join("?" * len(ids))
    left = conn.execute(f"SELECT count(*) FROM {table} WHERE id IN ({marks})",
                        ids).fetchone()[0]
    left += _index_rows(conn, table, marks, ids)
    if table in ("episodes", "beliefs"):
        left += index.delete(conn, table, ids)
    if left:
        raise DeletionNotConfirmedError(
            f"could not confirm the deletion from {table} and its search indexes ({left} "
            "rows remain): nothing was deleted; check the vector index with `mnemo memory "
            "status` and retry")


def _execute(tx: WriteTx, plan: _Plan, reason: str) -> dict[str, int]:
    conn = tx.conn
    touched = _delete_beliefs(tx, list(plan.beliefs.values()), reason)
    for eid, (uid, text) in plan.episodes.items():
        conn.execute("DELETE FROM episodes WHERE id = ?", (eid,))
        tx.drop_vector("episodes", eid)
        tx.change("episode", uid, "delete")
        _tomb(tx, "episode", uid, text, reason)
    for tid, (uid, text) in plan.turns.items():
        conn.execute("DELETE FROM turns WHERE id = ?", (tid,))
        tx.change("turn", uid, "delete")
        _tomb(tx, "turn", uid, text, reason)
    orphans = _drop_orphans(tx, touched)
    tx.flush()
    for table, ids in (("turns", plan.turns), ("episodes", plan.episodes),
                       ("beliefs", plan.beliefs)):
        if ids and not is_postgres(conn):  # no FTS5 segment keeps the deleted tokens
            conn.execute(f"INSERT INTO {table}_fts({table}_fts) VALUES ('optimize')")
        _confirm(conn, tx.index, table, list(ids))
    return {"turns": len(plan.turns), "episodes": len(plan.episodes),
            "beliefs": len(plan.beliefs), "entities": orphans}


def _check_args(conn: Connection, tenant: str, refs: Sequence[tuple[str, int | str]],
                reason: str) -> None:
    require_tenant(conn, tenant)
    for kind, ref in refs:
        if kind not in KINDS:
            raise InvalidInputError(f"kind must be one of {', '.join(KINDS)}")
        if isinstance(ref, bool) or not isinstance(ref, int | str):
            raise InvalidInputError("ref must be an id (int) or a uid (str)")
    if not isinstance(reason, str) or not _REASON_RE.match(reason):
        raise InvalidInputError("reason must be a short snake_case word, e.g. user_request")


def _verified(conn: Connection, index: VectorIndex, tenant: str,
              refs: Sequence[tuple[str, int | str]], reason: str, now: datetime | None,
              missing_ok: bool) -> tuple[_Plan, dict[str, int], int, bool]:
    """Plan, delete and confirm ``refs`` in one secure transaction; then checkpoint.

    Returns the plan, the deleted counts, how many refs were already gone (``missing_ok``)
    and whether the checkpoint completed.
    """
    skipped = 0
    with _secure_delete(conn), atomic(conn, tenants=(tenant,)):
        tx = WriteTx(conn, index, tenant, to_db(now or utcnow()), Embeds(index))
        plan = _Plan()
        for kind, ref in refs:
            try:
                _plan(conn, tenant, kind, ref, plan)
            except NotFoundError:
                if not missing_ok:
                    raise
                skipped += 1
        deleted = _execute(tx, plan, reason)
    return plan, deleted, skipped, _checkpoint(conn)


@contextlib.contextmanager
def _secure_delete(conn: Connection) -> Iterator[None]:
    """SQLite zeroes the pages it frees while this is open (PostgreSQL has no such switch:
    see the module)."""
    if is_postgres(conn):
        yield
        return
    previous = conn.execute("PRAGMA secure_delete").fetchone()[0]
    conn.execute("PRAGMA secure_delete = ON")
    try:
        if conn.execute("PRAGMA secure_delete").fetchone()[0] != 1:
            raise DeletionNotConfirmedError("SQLite refused PRAGMA secure_delete: nothing "
                                            "was deleted")
        yield
    finally:
        conn.execute(f"PRAGMA secure_delete = {int(previous)}")


def _checkpoint(conn: Connection) -> bool:
    """Fold the write-ahead log into the file so no old page of it keeps deleted text (best
    effort; never on the Postgres primary, whose WAL is the server's)."""
    if is_postgres(conn):
        return False
    try:
        return bool(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0)
    except Exception:
        return False


def delete_memory(conn: Connection, index: VectorIndex, tenant: str, kind: str, ref: int | str,
                  *, reason: str = "user_request", now: datetime | None = None,
                  ) -> DeletionReport:
    """Delete a ``turn``, ``episode`` or ``belief`` (by id or uid) and confirm it is gone.

    ``now`` stamps the tombstones (default: the clock). Raises NotFoundError,
    InvalidInputError, or DeletionNotConfirmedError (nothing deleted).
    """
    _check_args(conn, tenant, [(kind, ref)], reason)
    plan, deleted, _, checkpointed = _verified(conn, index, tenant, [(kind, ref)], reason, now,
                                               missing_ok=False)
    tombs = len(plan.turns) + len(plan.episodes) + len(plan.beliefs)
    return DeletionReport(tenant, kind, str(ref), tombs, deleted, checkpointed)


@dataclass
class BatchDeletion:
    tenant: str
    deleted: dict[str, int]  # table -> rows
    tombstones: int
    skipped: int  # refs that were already gone
    checkpointed: bool


def delete_memories(conn: Connection, index: VectorIndex, tenant: str,
                    refs: Sequence[tuple[str, int | str]], *, reason: str,
                    now: datetime | None = None) -> BatchDeletion:
    """Delete many ``(kind, id or uid)`` of one tenant through the same verified path, in one
    transaction (one FTS optimise and one checkpoint for the lot: what the sweeps use).

    A ref that is already gone is skipped and counted, so a rerun after a crash is
    harmless. Raises InvalidInputError or DeletionNotConfirmedError (nothing deleted).
    """
    _check_args(conn, tenant, refs, reason)
    if not refs:
        return BatchDeletion(tenant, {}, 0, 0, True)
    plan, deleted, skipped, checkpointed = _verified(conn, index, tenant, refs, reason, now,
                                                     missing_ok=True)
    tombs = len(plan.turns) + len(plan.episodes) + len(plan.beliefs)
    return BatchDeletion(tenant, deleted, tombs, skipped, checkpointed)
