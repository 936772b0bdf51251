"""What the post-turn actors call. Each function is idempotent: its ``applied_jobs`` key is
written in the same transaction as its effect, so a redelivered message changes nothing.

- ``record_turn_and_episode`` — the raw turn and its episode (+ FTS, vector, outbox);
- ``extract_and_apply`` — run an extractor on a recorded turn, apply the beliefs;
- ``anchor_turn`` — the ego anchors of the turn's subjects (already done at write time; the
  job is a cheap, idempotent re-check); writes an ``anchor`` key: the record that it ran;
- ``micro_consolidate`` — fold duplicate working episodes, re-resolve the turn's belief slots
  (or every slot of the given subjects), recount their entities; with a turn, writes a
  ``consolidate`` key: the record that it ran;
- ``process_turn`` / ``process_turns`` — all of it for one turn or a batch, embedding first
  and then writing in one short transaction (what ``bench/write_path.py`` uses).

Each returns ids, counts and action names for the worker's audit row; never memory text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import Connection, atomic
from memory_core.db.stores import Database
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.extraction.api import Extractor, candidates_for, default_extractor, extractor_name
from memory_core.jobs import applied_key
from memory_core.model import counts, episodes
from memory_core.model.beliefs import Checked, apply_in_tx, predicted_texts
from memory_core.model.ego_anchor import anchor_action, anchor_text, sync_anchor
from memory_core.model.entities import HUB
from memory_core.model.slots import resolve
from memory_core.model.tenants import require_tenant
from memory_core.model.turns import (
    DEFAULT_MAX_TURN_CHARS,
    CheckedTurn,
    TurnInput,
    TurnRow,
    check_turn,
    get_turn,
    insert_turn,
)
from memory_core.model.write_tx import Embeds, WriteTx, write_tx
from memory_core.vectors import VectorIndex


@dataclass(frozen=True)
class TurnRecord:
    tenant: str
    turn_uid: str
    turn_id: int
    session_id: str
    episode_id: int
    episode_uid: str
    created: bool  # False when the turn was already recorded (a redelivery)


@dataclass(frozen=True)
class TurnOutcome:
    record: TurnRecord | None  # None: the turn was recorded once and has been deleted since
    belief_ids: list[int]
    actions: dict[str, int] = field(default_factory=dict)


# The kinds of ``applied_jobs`` keys, one per step of a turn (``<kind>:<tenant>:<turn_uid>``,
# extraction with ``:<extractor>``): what ``memory_core.write.completeness`` checks.
RECORDED = "record_turn"
EXTRACTED = "extract"
ANCHORED = "anchor"
CONSOLIDATED = "consolidate"


def step_key(kind: str, tenant: str, turn_uid: str, extra: str = "") -> str:
    """The ``applied_jobs`` key step ``kind`` writes for a turn."""
    return _key(kind, tenant, turn_uid, extra)


def _key(kind: str, tenant: str, turn_uid: str, extra: str = "") -> str:
    return applied_key(kind, tenant, turn_uid, extra)


# Keys looked up per statement (SQLite's default limit is 999 variables a statement).
IN_CHUNK = 800


def applied_keys(conn: Connection, keys: Sequence[str]) -> set[str]:
    """Those of ``keys`` whose step ran (written in ``applied_jobs``)."""
    found: set[str] = set()
    for i in range(0, len(keys), IN_CHUNK):
        chunk = keys[i:i + IN_CHUNK]
        found.update(r[0] for r in conn.execute(
            f"SELECT key FROM applied_jobs WHERE key IN ({','.join('?' * len(chunk))})",
            chunk))
    return found


def _claim(conn: Connection, key: str, now: str) -> bool:
    """Write the idempotency key; False when it was already there."""
    cur = conn.execute("INSERT OR IGNORE INTO applied_jobs (key, applied_at) VALUES (?, ?)",
                       (key, now))
    return cur.rowcount == 1


def _as_turn(turn: TurnInput | Mapping[str, Any]) -> TurnInput:
    return turn if isinstance(turn, TurnInput) else TurnInput.from_dict(turn)


def _record(tx: WriteTx, t: CheckedTurn) -> TurnRecord | None:
    """Record the turn and its episode; None when it was recorded once and deleted since.

    The idempotency key outlives a verified delete, so a redelivered message never brings a
    deleted turn back.
    """
    claimed = _claim(tx.conn, _key(RECORDED, t.tenant, t.turn_uid), tx.now)
    if not claimed and get_turn(tx.conn, t.tenant, t.turn_uid) is None:
        return None
    turn_id, created = insert_turn(tx.conn, t)
    if created:
        tx.change("turn", t.turn_uid)
    episode_id, ep_uid, _ = episodes.add_turn_episode(
        tx, turn_id, t.turn_uid, t.session_id, t.speaker, t.text, t.occurred_at)
    return TurnRecord(t.tenant, t.turn_uid, turn_id, t.session_id, episode_id, ep_uid, created)


def _turn_ids(conn: Connection, tenant: str, turn_uid: str) -> list[int]:
    rows = conn.execute("SELECT id FROM beliefs WHERE tenant = ? AND turn_uid = ? ORDER BY id",
                        (tenant, turn_uid)).fetchall()
    return [r[0] for r in rows]


def _apply(tx: WriteTx, turn_id: int, t: CheckedTurn, checked: list[Checked],
           rejected: int, name: str) -> list[int]:
    if not _claim(tx.conn, _key(EXTRACTED, t.tenant, t.turn_uid, name), tx.now):
        return _turn_ids(tx.conn, t.tenant, t.turn_uid)
    if rejected:
        tx.conn.execute(
            "INSERT INTO hygiene_rejections (tenant, reason, count, last_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (tenant, reason) DO UPDATE SET count = count + excluded.count, "
            "last_at = excluded.last_at", (t.tenant, "invalid_candidate", rejected, tx.now))
    ids: list[int] = []
    for c in checked:
        outcome = apply_in_tx(tx, c, t.speaker)
        if outcome.belief_id is not None and outcome.belief_id not in ids:
            ids.append(outcome.belief_id)
    if ids:
        episodes.note_beliefs(tx, turn_id, t.text)
    return ids


def _episode_text(t: CheckedTurn) -> str:
    return episodes.episode_text(t.speaker, t.text, t.occurred_at)


def episode_text_for(turn: TurnInput | Mapping[str, Any], max_turn_chars: int) -> str:
    """The text ``record_turn_and_episode`` embeds for ``turn`` (what a worker embeds ahead,
    ``workers/lookahead.py``). Raises as ``check_turn`` does for a turn it refuses."""
    return _episode_text(check_turn(_as_turn(turn), max_turn_chars))


def _prepare(conn: Connection, index: VectorIndex,
             work: Iterable[tuple[CheckedTurn, list[Checked]]], *,
             with_episodes: bool = True) -> Embeds:
    """Embed what the transaction will write: the turns' episode texts (unless
    ``with_episodes=False``: the episode was recorded before) and their beliefs' texts."""
    embeds = Embeds(index)
    texts: list[str] = []
    for t, checked in work:
        if with_episodes:
            texts.append(_episode_text(t))
        texts.extend(predicted_texts(conn, t.tenant, [(c, t.speaker) for c in checked]))
    embeds.prepare(texts)
    return embeds


def record_turn_and_episode(state_db: Database, index: VectorIndex,
                            turn: TurnInput | Mapping[str, Any], *,
                            max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> TurnRecord | None:
    """Record the raw turn and its episode in one transaction (idempotent on turn_uid).

    Returns None for a turn that was recorded and then deleted (a redelivery): nothing is
    written again.
    """
    conn = state_db.conn
    t = check_turn(_as_turn(turn), max_turn_chars)
    require_tenant(conn, t.tenant)
    embeds = _prepare(conn, index, [(t, [])])
    with write_tx(conn, index, t.tenant, embeds) as tx:
        record = _record(tx, t)
    return record


def _was_deleted(conn: Connection, tenant: str, turn_uid: str) -> bool:
    claimed = conn.execute("SELECT 1 FROM applied_jobs WHERE key = ?",
                           (_key(RECORDED, tenant, turn_uid),)).fetchone()
    return claimed is not None and get_turn(conn, tenant, turn_uid) is None


def checked_turn(row: TurnRow) -> CheckedTurn:
    """A recorded turn as the extractor's input is built from it."""
    return CheckedTurn(row.tenant, row.session_id, row.turn_uid, row.speaker, row.text,
                       to_db(row.occurred_at), row.index)


def _recorded(conn: Connection, tenant: str, turn_uid: str) -> tuple[int, CheckedTurn]:
    row = get_turn(conn, tenant, turn_uid)
    if row is None:
        raise NotFoundError(f"turn {turn_uid!r} is not recorded in tenant {tenant!r}: record "
                            "it first (record_turn job)")
    return row.id, checked_turn(row)


def extract_and_apply(state_db: Database, index: VectorIndex, tenant: str, turn_uid: str,
                      extractor: Extractor | None = None) -> list[int]:
    """Extract beliefs from a recorded turn and apply them; returns the belief ids.

    Idempotent per (turn, extractor). Raises NotFoundError when the turn is not recorded.
    """
    conn = state_db.conn
    require_tenant(conn, tenant)
    if _was_deleted(conn, tenant, turn_uid):
        return []  # recorded, then deleted: nothing to extract, and nothing to retry
    turn_id, t = _recorded(conn, tenant, turn_uid)
    checked, rejected = candidates_for(extractor, t)
    # The episode was embedded when the turn was recorded: only the beliefs' texts (none,
    # for most turns: then nothing is embedded at all).
    embeds = _prepare(conn, index, [(t, checked)], with_episodes=False)
    with write_tx(conn, index, tenant, embeds) as tx:
        ids = _apply(tx, turn_id, t, checked, rejected,
                     extractor_name(extractor or default_extractor()))
    return ids


def _subjects_of_turn(conn: Connection, tenant: str, turn_uid: str) -> list[str]:
    rows = conn.execute("SELECT DISTINCT subject_id FROM beliefs WHERE tenant = ? AND "
                        "turn_uid = ?", (tenant, turn_uid)).fetchall()
    return sorted(r[0] for r in rows)


def anchor_turn(state_db: Database, index: VectorIndex, tenant: str, turn_uid: str,
                subject_ids: Sequence[str] | None = None) -> dict[str, int]:
    """Re-check the ego anchors of a turn's subjects; ``{"added": n, "removed": n, ...}``."""
    conn = state_db.conn
    require_tenant(conn, tenant)
    subjects = sorted(set(subject_ids) if subject_ids is not None
                      else _subjects_of_turn(conn, tenant, turn_uid))
    embeds = Embeds(index)
    known = {r[0] for r in conn.execute("SELECT entity_id FROM entities WHERE tenant = ?",
                                        (tenant,))}
    subjects = [s for s in subjects if s in known and s != HUB]
    # Only the anchors to add carry a new text (the extract step's write added them already,
    # so usually none): a stale guess is embedded when written.
    embeds.prepare(anchor_text(conn, tenant, s) for s in subjects
                   if anchor_action(conn, tenant, s) == "added")
    with write_tx(conn, index, tenant, embeds) as tx:
        actions = [sync_anchor(tx, s) for s in subjects]
        # Not an idempotency guard (the re-check is naturally idempotent): the record that
        # the turn's anchoring ran, which the completeness check looks for.
        _claim(tx.conn, _key(ANCHORED, tenant, turn_uid), tx.now)
    return {a: actions.count(a) for a in ("added", "removed", "moved")}


@dataclass(frozen=True)
class ConsolidationReport:
    tenant: str
    session_id: str
    episodes_merged: int
    slots_resolved: int
    beliefs_changed: int
    counts_fixed: int


def _slots(conn: Connection, tenant: str, subjects: Sequence[str]) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for subject in subjects:
        rows = conn.execute("SELECT DISTINCT predicate, object_norm FROM beliefs WHERE "
                            "tenant = ? AND subject_id = ? ORDER BY 1, 2", (tenant, subject))
        out.extend((subject, p, o) for p, o in rows)
    return out


def _turn_slots(conn: Connection, tenant: str, turn_uid: str) -> list[tuple[str, str, str]]:
    """The slots the turn's beliefs are in (not every slot of their subjects: the hub's
    grow with the whole history, and a turn only touched its own)."""
    rows = conn.execute("SELECT DISTINCT subject_id, predicate, object_norm FROM beliefs "
                        "WHERE tenant = ? AND turn_uid = ? ORDER BY 1, 2, 3",
                        (tenant, turn_uid)).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def _touched_entities(conn: Connection, tenant: str, slots: Sequence[tuple[str, str, str]],
                      turn_uid: str | None) -> set[str]:
    subjects = sorted({s for s, _, _ in slots})
    if turn_uid is not None:
        where, args = "turn_uid = ?", [turn_uid]
    else:
        where, args = f"subject_id IN ({','.join('?' * len(subjects))})", subjects
    objects = {r[0] for r in conn.execute(
        f"SELECT DISTINCT object_entity_id FROM beliefs WHERE tenant = ? AND {where} AND "
        "object_entity_id IS NOT NULL", (tenant, *args))}
    return set(subjects) | {HUB} | objects


def micro_consolidate(state_db: Database, index: VectorIndex, tenant: str, session_id: str,
                      subject_ids: Sequence[str] | None = None,
                      turn_uid: str | None = None) -> ConsolidationReport:
    """Fold near-duplicate working episodes of the session, re-resolve the touched belief
    slots and recount their entities. Naturally idempotent (a rerun finds nothing).

    Touched: with ``subject_ids``, every slot of those subjects; else with ``turn_uid``, the
    slots of that turn's beliefs (cost independent of history length); else none.
    """
    conn = state_db.conn
    require_tenant(conn, tenant)
    # explicit: the recount below must see the flushed count deltas
    with atomic(conn, tenants=(tenant,)):
        index.ensure(conn)
        tx = WriteTx(conn, index, tenant, to_db(utcnow()), Embeds(index))
        merged = episodes.merge_duplicates(tx, session_id)
        if subject_ids is not None:
            slots = _slots(conn, tenant, sorted(set(subject_ids)))
        else:
            slots = _turn_slots(conn, tenant, turn_uid) if turn_uid else []
        changed = sum(len(resolve(tx, subject, predicate, object_norm))
                      for subject, predicate, object_norm in slots)
        tx.flush()
        touched = _touched_entities(conn, tenant, slots,
                                    turn_uid if subject_ids is None else None)
        fixed = counts.recount(conn, tenant, touched)
        if turn_uid is not None:  # the record the completeness check looks for
            _claim(conn, _key(CONSOLIDATED, tenant, turn_uid), tx.now)
    return ConsolidationReport(tenant, session_id, merged, len(slots), changed, fixed)


def _check_batch(conn: Connection, turns: Sequence[TurnInput | Mapping[str, Any]],
                 max_turn_chars: int) -> list[CheckedTurn]:
    if isinstance(turns, str | bytes) or not isinstance(turns, Sequence):
        raise InvalidInputError("turns must be a list of TurnInput")
    checked = [check_turn(_as_turn(t), max_turn_chars) for t in turns]
    for tenant in sorted({t.tenant for t in checked}):
        require_tenant(conn, tenant)
    return checked


def process_turns(state_db: Database, index: VectorIndex,
                  turns: Sequence[TurnInput | Mapping[str, Any]], *,
                  extractor: Extractor | None = None,
                  max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> list[TurnOutcome]:
    """Record, extract and apply a batch of turns in one transaction (idempotent per turn).

    Every input is checked before anything is written: one bad turn refuses the batch.
    """
    conn = state_db.conn
    checked_turns = _check_batch(conn, turns, max_turn_chars)
    name = extractor_name(extractor or default_extractor())
    work = [(t, *candidates_for(extractor, t)) for t in checked_turns]
    embeds = _prepare(conn, index, [(t, c) for t, c, _ in work])
    outcomes: list[TurnOutcome] = []
    with atomic(conn, tenants={t.tenant for t, _, _ in work}):
        index.ensure(conn)
        now = to_db(utcnow())
        txs: dict[str, WriteTx] = {}
        for t, checked, rejected in work:
            tx = txs.setdefault(t.tenant, WriteTx(conn, index, t.tenant, now, embeds))
            before = dict(tx.actions)
            record = _record(tx, t)
            if record is None:
                outcomes.append(TurnOutcome(None, []))
                continue
            ids = _apply(tx, record.turn_id, t, checked, rejected, name)
            delta = {k: v - before.get(k, 0) for k, v in tx.actions.items() if v != before.get(k)}
            outcomes.append(TurnOutcome(record, ids, delta))
        for tx in txs.values():
            tx.flush()
    return outcomes


def process_turn(state_db: Database, index: VectorIndex, turn: TurnInput | Mapping[str, Any],
                 *, extractor: Extractor | None = None,
                 max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> TurnOutcome:
    """``process_turns`` for one turn."""
    return process_turns(state_db, index, [turn], extractor=extractor,
                         max_turn_chars=max_turn_chars)[0]

