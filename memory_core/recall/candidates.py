"""Candidates: the rows recall can return, loaded by id with the visibility rules applied.

Visibility (every query is scoped by tenant as well):
- beliefs: currently valid, i.e. status active or conflict and ``valid_from <= now <
  valid_to``; with ``as_of`` the ones valid at that world time, superseded and expired
  ones included (what was true then: an expired commitment keeps its world time, an
  expired pending-review item has none); never invalidated or pending_review, never past
  ``expires_at``;
- episodes: not archived (unless asked), not expired, and with ``as_of`` not after it;
- turns: not covered by an archived episode (unless asked), with ``as_of`` not after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory_core.db.sqlite import Connection
from memory_core.model.belief_rules import COUNTED
from memory_core.vocabulary import ARCHIVE, EXPIRED, SUPERSEDED, sql_list

# What recall shows now is what entity counts count; under ``as_of`` history joins it.
_CURRENT = frozenset(COUNTED)
_AS_OF = frozenset((*COUNTED, SUPERSEDED, EXPIRED))
_CURRENT_STATUSES = sql_list(COUNTED)
_AS_OF_STATUSES = sql_list((*COUNTED, SUPERSEDED, EXPIRED))

KINDS = ("belief", "episode", "turn")


@dataclass(slots=True)
class Candidate:
    """One row under consideration, with its rank in each list that found it."""

    kind: str
    row_id: int
    uid: str
    text: str
    occurred_at: str | None
    session_id: str | None = None
    tier: str | None = None
    confidence: float | None = None
    status: str | None = None
    turn_uids: tuple[str, ...] = ()
    subject_id: str | None = None
    object_entity_id: str | None = None
    speaker: str | None = None  # who said the (first) turn it comes from
    # A belief's statement, loaded with it (the facts channel reads them, never again):
    # (predicate, object_text, negated, source, valid_to).
    claim: tuple[str, str, bool, str, str | None] | None = None
    ranks: dict[str, int] = field(default_factory=dict)
    components: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    key: tuple[str, int] = field(init=False, repr=False, compare=False)  # (kind, row_id)
    # Scoring caches (fusion.Scorer): the fixed components and their weighted sum, and the
    # RRF term with the number of ranks it was computed from (lists only add ranks).
    fixed: dict[str, float] | None = field(default=None, repr=False, compare=False)
    fixed_sum: float = field(default=0.0, repr=False, compare=False)
    rrf: float = field(default=0.0, repr=False, compare=False)
    rrf_ranks: int = field(default=0, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = (self.kind, self.row_id)

    @property
    def item_id(self) -> str:
        return f"{self.kind}:{self.uid}"


@dataclass(frozen=True)
class Scope:
    """Who and when: the tenant, the reference time, ``as_of`` and the archive switch."""

    tenant: str
    now: str  # stored-time text (memory_core.clock.to_db)
    as_of: str | None = None
    include_archive: bool = False
    # The tenant's rows held in the process (``recall.resident``): loads read them instead
    # of the store, with the same visibility rules.
    held: HeldRows | None = field(default=None, compare=False, repr=False)

    @property
    def at(self) -> str:
        return self.as_of or self.now


class HeldRows(Protocol):
    """Rows of one tenant held in the process, loaded as ``load`` loads them."""

    def beliefs(self, scope: Scope, ids: Sequence[int]) -> dict[int, Candidate]: ...

    def episodes(self, scope: Scope, ids: Sequence[int]) -> dict[int, Candidate]: ...

    def touching(self, scope: Scope, entity_ids: Sequence[str], limit: int) -> list[int]: ...

    def touching_each(self, scope: Scope, entity_ids: Sequence[str], per_entity: int
                      ) -> dict[str, list[tuple[Any, ...]]]: ...

    def episodes_of_turns(self, scope: Scope, turn_uids: Sequence[str]
                          ) -> list[tuple[int, str]]: ...

    def beliefs_of_turns(self, scope: Scope, turn_uids: Sequence[str]
                         ) -> list[tuple[Any, ...]]: ...


def belief_filter(scope: Scope, alias: str = "b") -> tuple[str, list[Any]]:
    """SQL condition (and its parameters) for a belief visible in ``scope``."""
    statuses = _AS_OF_STATUSES if scope.as_of else _CURRENT_STATUSES
    sql = (f"{alias}.tenant = ? AND {alias}.status IN ({statuses}) AND {alias}.valid_from <= ? "
           f"AND ({alias}.valid_to IS NULL OR {alias}.valid_to > ?) "
           f"AND ({alias}.expires_at IS NULL OR {alias}.expires_at > ?)")
    return sql, [scope.tenant, scope.at, scope.at, scope.now]


def episode_filter(scope: Scope, alias: str = "e") -> tuple[str, list[Any]]:
    """SQL condition (and its parameters) for an episode visible in ``scope``."""
    sql = f"{alias}.tenant = ? AND ({alias}.expires_at IS NULL OR {alias}.expires_at > ?)"
    params: list[Any] = [scope.tenant, scope.now]
    if not scope.include_archive:
        sql += f" AND {alias}.tier != '{ARCHIVE}'"
    if scope.as_of:
        sql += f" AND {alias}.occurred_at <= ?"
        params.append(scope.as_of)
    return sql, params


def belief_visible(scope: Scope, status: Any, valid_from: Any, valid_to: Any,
                   expires_at: Any) -> bool:
    """``belief_filter`` for a row held in the process (the same comparisons: stored times
    are text, compared as SQLite compares them; a NULL compares false)."""
    at = scope.at
    return (status in (_AS_OF if scope.as_of else _CURRENT)
            and valid_from is not None and valid_from <= at
            and (valid_to is None or valid_to > at)
            and (expires_at is None or expires_at > scope.now))


def episode_visible(scope: Scope, tier: Any, occurred_at: Any, expires_at: Any) -> bool:
    """``episode_filter`` for a row held in the process."""
    return ((expires_at is None or expires_at > scope.now)
            and (scope.include_archive or (tier is not None and tier != ARCHIVE))
            and (not scope.as_of or (occurred_at is not None and occurred_at <= scope.as_of)))


def turn_filter(scope: Scope, alias: str = "t") -> tuple[str, list[Any]]:
    """SQL condition (and its parameters) for a raw turn visible in ``scope``."""
    sql = f"{alias}.tenant = ?"
    params: list[Any] = [scope.tenant]
    if not scope.include_archive:  # an archived episode's turns stay out of recall too
        sql += (f" AND NOT EXISTS (SELECT 1 FROM episode_turns et JOIN episodes ae ON "
                f"ae.id = et.episode_id WHERE et.turn_id = {alias}.id AND ae.tier = '{ARCHIVE}')")
    if scope.as_of:
        sql += f" AND {alias}.occurred_at <= ?"
        params.append(scope.as_of)
    return sql, params


def beliefs_touching(conn: Connection, scope: Scope, entity_ids: Sequence[str], columns: str,
                     limit: int) -> list[tuple[Any, ...]]:
    """``columns`` (of ``b``) of the visible beliefs whose subject or object is one of
    ``entity_ids``, most confident and most recent first (ties by id), at most ``limit``.

    One indexed search per column, then their union: with ``subject OR object`` the
    planner walked every belief of the tenant (320 ms per entity at 200k beliefs).
    """
    if not entity_ids or limit <= 0:
        return []
    cond, params = belief_filter(scope)
    marks = param_marks(len(entity_ids))
    return conn.execute(
        f"SELECT {columns} FROM beliefs b WHERE b.id IN ("
        f"SELECT b.id FROM beliefs b INDEXED BY ix_beliefs_subject WHERE {cond} AND "
        f"b.subject_id IN ({marks}) UNION "
        f"SELECT b.id FROM beliefs b INDEXED BY ix_beliefs_object WHERE {cond} AND "
        f"b.object_entity_id IN ({marks})) "
        "ORDER BY b.confidence DESC, b.valid_from DESC, b.id LIMIT ?",
        [*params, *entity_ids, *params, *entity_ids, int(limit)]).fetchall()


def beliefs_touching_each(conn: Connection, scope: Scope, entity_ids: Sequence[str],
                          per_entity: int) -> dict[str, list[tuple[Any, ...]]]:
    """For each of ``entity_ids``, ``(id, subject_id, object_entity_id, turn_uid)`` of at
    most ``per_entity`` visible beliefs touching it, ordered as ``beliefs_touching`` orders
    them (ties by id). One statement for all the entities (the graph walk asked once per
    entity: ~15 statements a recall)."""
    if not entity_ids or per_entity <= 0:
        return {}
    if scope.held is not None:
        return scope.held.touching_each(scope, entity_ids, per_entity)
    cond, params = belief_filter(scope)
    marks = param_marks(len(entity_ids))
    rows = conn.execute(
        "WITH hits AS (SELECT b.id, b.subject_id AS ent FROM beliefs b INDEXED BY "
        f"ix_beliefs_subject WHERE {cond} AND b.subject_id IN ({marks}) UNION "
        "SELECT b.id, b.object_entity_id AS ent FROM beliefs b INDEXED BY ix_beliefs_object "
        f"WHERE {cond} AND b.object_entity_id IN ({marks})) "
        "SELECT ent, id, subject_id, object_entity_id, turn_uid FROM (SELECT h.ent, b.id, "
        "b.subject_id, b.object_entity_id, b.turn_uid, row_number() OVER (PARTITION BY h.ent "
        "ORDER BY b.confidence DESC, b.valid_from DESC, b.id) AS rn FROM hits h CROSS JOIN "
        "beliefs b ON b.id = h.id) WHERE rn <= ? ORDER BY ent, rn",
        [*params, *entity_ids, *params, *entity_ids, int(per_entity)]).fetchall()
    out: dict[str, list[tuple[Any, ...]]] = {}
    for ent, *row in rows:
        out.setdefault(ent, []).append(tuple(row))
    return out


FILTERS = {"belief": belief_filter, "episode": episode_filter, "turn": turn_filter}
TABLES = {"belief": "beliefs", "episode": "episodes", "turn": "turns"}
ALIASES = {"belief": "b", "episode": "e", "turn": "t"}


def param_marks(n: int) -> str:
    """``n`` SQL parameter marks: ``?,?,?``."""
    return ",".join("?" * n)


def load(conn: Connection, kind: str, scope: Scope, ids: Sequence[int]) -> dict[int, Candidate]:
    """Visible rows of ``kind`` among ``ids`` (others are silently absent).

    ``NOT INDEXED`` keeps the lookup on the primary key: otherwise the planner may prefer the
    tenant index and scan every row of the tenant.
    """
    ids = list(dict.fromkeys(int(i) for i in ids))
    if not ids:
        return {}
    if kind == "belief":  # from the rows held in the process when the scope has them
        return (scope.held.beliefs(scope, ids) if scope.held is not None
                else _load_beliefs(conn, scope, ids))
    if kind == "episode":
        return (scope.held.episodes(scope, ids) if scope.held is not None
                else _load_episodes(conn, scope, ids))
    return _load_turns(conn, scope, ids)


def load_new(conn: Connection, kind: str, scope: Scope, ids: Sequence[int],
             pool: Mapping[tuple[str, int], Candidate]) -> dict[int, Candidate]:
    """``load``, reading only the rows ``pool`` does not hold already (its candidates are
    returned as they are, so ranks from every list land on one object)."""
    known = {i: pool[(kind, i)] for i in ids if (kind, i) in pool}
    found = load(conn, kind, scope, [i for i in ids if i not in known])
    return {i: known[i] if i in known else found[i] for i in ids if i in known or i in found}


# What a belief candidate is made of (``belief_candidate``), in this order; held rows
# (``recall.resident``) add ``expires_at`` at the end for the visibility check.
BELIEF_COLUMNS = ("b.id, b.belief_uid, b.text, b.valid_from, b.confidence, b.status, "
                  "b.turn_uid, b.subject_id, b.object_entity_id, t.session_id, t.speaker, "
                  "b.predicate, b.object_text, b.negated, b.source, b.valid_to")
BELIEF_TURN_JOIN = "LEFT JOIN turns t ON t.tenant = b.tenant AND t.turn_uid = b.turn_uid"


# The two constructors below pass ``Candidate``'s fields by position, in its field order
# (tests/test_recall_candidate_rows.py): a recall builds ~160 candidates, and keywords cost
# ~2 us of each ~2.5 us construction.
def belief_candidate(r: Sequence[Any]) -> Candidate:
    # kind, row_id, uid, text, occurred_at, session_id, tier, confidence, status, turn_uids,
    # subject_id, object_entity_id, speaker, claim
    return Candidate("belief", r[0], r[1], r[2], r[3], r[9], None, r[4], r[5],
                     (r[6],) if r[6] else (), r[7], r[8], r[10],
                     (r[11], r[12], bool(r[13]), r[14], r[15]))


def _load_beliefs(conn: Connection, scope: Scope, ids: list[int]) -> dict[int, Candidate]:
    cond, params = belief_filter(scope)
    rows = conn.execute(
        f"SELECT {BELIEF_COLUMNS} FROM beliefs b NOT INDEXED {BELIEF_TURN_JOIN} "
        f"WHERE b.id IN ({param_marks(len(ids))}) AND {cond}", [*ids, *params]).fetchall()
    return {r[0]: belief_candidate(r) for r in rows}


# An episode's row, then one of its turns per result row, in turn order (``episode_rows``).
EPISODE_COLUMNS = ("e.id, e.episode_uid, e.text, e.occurred_at, e.session_id, e.tier, "
                   "e.importance, t.turn_uid, t.speaker")
EPISODE_TURNS_JOIN = ("LEFT JOIN episode_turns et ON et.episode_id = e.id "
                      "LEFT JOIN turns t ON t.id = et.turn_id")
EPISODE_ORDER = "ORDER BY e.id, t.session_id, t.idx"


def episode_rows(rows: Iterable[Sequence[Any]]) -> dict[int, tuple[Any, ...]]:
    """Rows of ``EPISODE_COLUMNS`` (plus any columns after them), grouped: episode id ->
    its columns before the turn's, its turn uids, its first turn's speaker, the extras."""
    out: dict[int, tuple[Any, ...]] = {}
    turns: dict[int, list[str]] = {}
    for r in rows:
        if r[0] not in out:
            out[r[0]] = (*r[:7], (), r[8], *r[9:])
            turns[r[0]] = []
        if r[7] is not None:
            turns[r[0]].append(r[7])
    return {i: (*row[:7], tuple(turns[i]), *row[8:]) for i, row in out.items()}


def episode_candidate(row: Sequence[Any]) -> Candidate:
    """A candidate from one of ``episode_rows``' values."""
    # kind, row_id, uid, text, occurred_at, session_id, tier, confidence, status, turn_uids,
    # subject_id, object_entity_id, speaker
    return Candidate("episode", row[0], row[1], row[2], row[3], row[4], row[5],
                     min(1.0, max(0.0, float(row[6]))), None, row[7], None, None, row[8])


def _load_episodes(conn: Connection, scope: Scope, ids: list[int]) -> dict[int, Candidate]:
    cond, params = episode_filter(scope)
    # One row per turn of each episode, in turn order: its pointers and first speaker come
    # with it (two correlated subqueries per episode cost twice as much).
    rows = conn.execute(
        f"SELECT {EPISODE_COLUMNS} FROM episodes e NOT INDEXED {EPISODE_TURNS_JOIN} "
        f"WHERE e.id IN ({param_marks(len(ids))}) AND {cond} {EPISODE_ORDER}",
        [*ids, *params]).fetchall()
    return {i: episode_candidate(row) for i, row in episode_rows(rows).items()}


def _load_turns(conn: Connection, scope: Scope, ids: list[int]) -> dict[int, Candidate]:
    cond, params = turn_filter(scope)
    rows = conn.execute(
        "SELECT t.id, t.turn_uid, t.speaker, t.text, t.occurred_at, t.session_id FROM turns t "
        f"NOT INDEXED WHERE t.id IN ({param_marks(len(ids))}) AND {cond}",
        [*ids, *params]).fetchall()
    return {r[0]: Candidate(
        kind="turn", row_id=r[0], uid=r[1], text=f"{r[2]}: {r[3]}", occurred_at=r[4],
        session_id=r[5], turn_uids=(r[1],), speaker=r[2]) for r in rows}


def merge(pool: dict[tuple[str, int], Candidate], list_name: str,
          ranked: Iterable[Candidate]) -> None:
    """Add a ranked list to the pool: rank 1 is the best of the list."""
    for rank, cand in enumerate(ranked, start=1):
        existing = pool.setdefault(cand.key, cand)
        existing.ranks.setdefault(list_name, rank)
