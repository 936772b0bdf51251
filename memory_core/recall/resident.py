"""A tenant's keyword postings and stored vectors held in the recalling process, kept
current by the store's change log: recall's keyword and dense lists without statements.

On LoCoMo with fastembed the keyword lists, the feedback round's and the two dense searches
were about two thirds of recall's time after the query embedding (docs/benchmarks.md),
most of it statements and the Python around them. Held in the process, a tenant's rows
answer the same questions from dictionaries and one numpy matrix per table:
- ``Postings.ranked_ids`` is ``keyword.ranked_ids``: the same plan, the same bm25
  arithmetic (``keyword._bm25_order``), the same ids in the same order;
- ``Vectors.nearest`` is ``VectorIndex.search``: the same rows in the same order (BLAS
  finds them; rows within rounding of each other are ordered by the distance as
  sqlite-vec computes it).

They are kept current, not rebuilt. Every insert, text rewrite and delete of an episode or
belief (the FTS triggers) and every vector written or deleted for one (``VectorIndex``)
appends the row to ``recall_changes`` (``db.changes``) in the writer's transaction. Before
a recall uses a tenant, it reads the tenant's entries past the seq it holds (one indexed
statement: other tenants' writes cost nothing) and re-reads those rows: a row still there
is indexed again from its text and vector, a row gone is dropped. A forgotten row thus
leaves before the next recall can show it. Then the held rows and tokens are checked
against ``fts_stats``; any difference (a lost entry, a log pruned past them, a restored
file) rebuilds the tenant from the store rather than serving it. A new vector generation
(``mnemo memory reindex``) rebuilds it too. Visibility (time, tier, status) is not held:
the ids are loaded and filtered as before (``keyword.load_first``).

Bounded: a tenant with more than ``max_tenant_rows`` rows keeps the store's path (its
postings would cost more memory than they save time), and the tenants held add up to at
most ``max_rows`` rows, the least recently used evicted first. SQLite only: on the Postgres
primary recall reads the store as before.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog

from memory_core.db import changes
from memory_core.db import fts as fts_index
from memory_core.db.dialect import is_postgres
from memory_core.db.meta import get_meta
from memory_core.db.sqlite import Connection, read_snapshot
from memory_core.recall import keyword
from memory_core.recall.candidates import (
    BELIEF_COLUMNS,
    BELIEF_TURN_JOIN,
    EPISODE_COLUMNS,
    EPISODE_ORDER,
    EPISODE_TURNS_JOIN,
    Candidate,
    Scope,
    belief_candidate,
    belief_visible,
    episode_candidate,
    episode_rows,
    episode_visible,
)
from memory_core.vectors import VectorIndex, stored_vector

log = structlog.get_logger(__name__)
# A tenant with more memories than this is read from the store; the tenants held add up to
# at most ``MAX_ROWS`` (``MNEMO_RECALL_RESIDENT_ROWS``).
MAX_TENANT_ROWS = 50_000
MAX_ROWS = 200_000
# More changed rows than this since a tenant was last brought up to date: rebuild it (one
# statement) rather than re-read them by id.
MAX_CATCH_UP = 2_000
# A tenant is built when it is recalled again within this many seconds (one in a
# conversation); the last recall of this many tenants is remembered.
AGAIN_S = 600.0
RECALLED_KEPT = 100_000
# How far BLAS's float32 cosine distance can be from sqlite-vec's for a 384-dim vector (its
# error is ~1e-6; the bound is generous, it only widens the rows ordered exactly).
ROUNDING = 5e-5


@dataclass
class Postings:
    """One tenant's rows of one table as its FTS index holds them: per token {row: tf}, each
    row's length and distinct tokens (to drop it again)."""

    terms: dict[str, dict[int, int]] = field(default_factory=dict)
    lengths: dict[int, int] = field(default_factory=dict)
    row_terms: dict[int, tuple[str, ...]] = field(default_factory=dict)
    total: int = 0

    def add(self, row_id: int, text: str) -> None:
        self.drop(row_id)
        toks = fts_index.tokens(text)
        counts: dict[str, int] = {}
        for t in toks:
            counts[t] = counts.get(t, 0) + 1
        for t, n in counts.items():
            self.terms.setdefault(t, {})[row_id] = n
        self.lengths[row_id] = len(toks)
        self.row_terms[row_id] = tuple(counts)
        self.total += len(toks)

    def drop(self, row_id: int) -> None:
        length = self.lengths.pop(row_id, None)
        if length is None:
            return
        self.total -= length
        for t in self.row_terms.pop(row_id):
            rows = self.terms[t]
            del rows[row_id]
            if not rows:
                del self.terms[t]

    @property
    def rows(self) -> int:
        return len(self.lengths)

    def dfs(self, words: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for w in words:
            t = keyword.word_token(w)
            if t is not None:
                out[w] = len(self.terms.get(t, ()))
        return out

    def ranked_ids(self, plan: keyword.TermPlan, window: int) -> list[int]:
        """``keyword.ranked_ids`` from the held postings: the same rows in the same order."""
        by_word = {w: t for w in (*plan.essential, *plan.other) if (t := keyword.word_token(w))}
        essential = list(dict.fromkeys(by_word[w] for w in plan.essential if w in by_word))
        others = [t for t in dict.fromkeys(by_word.values()) if t not in essential]
        if not (essential or others) or self.rows <= 0:
            return []
        empty: dict[int, int] = {}
        found: list[tuple[int, dict[int, int]]] = []
        first: set[int] = set()
        for t in essential:
            rows = self.terms.get(t, empty)
            found.append((len(rows), rows))
            first.update(rows)
        ranked = set(first)
        if others and window > 0:  # the newest rows of the other tokens alone
            alone = {r for t in others for r in self.terms.get(t, empty) if r not in first}
            ranked.update(heapq.nlargest(window, alone))
        if others and ranked:
            for t in others:
                rows = self.terms.get(t, empty)
                found.append((len(rows), {r: n for r, n in rows.items() if r in ranked}))
        sizes = {r: self.lengths[r] for r in ranked}
        return keyword._bm25_order(found, sizes, first, self.rows, self.total, int)


def _magnitudes(rows: np.ndarray) -> np.ndarray:
    """Each row's sum of squares as sqlite-vec adds it: in float32, one element at a time."""
    return np.cumsum(rows * rows, axis=-1, dtype=np.float32)[..., -1]


@dataclass
class Vectors:
    """One tenant's stored vectors of one table, as stored, from the vector table ``table``
    (a new generation rebuilds the tenant)."""

    table: str
    at: dict[int, int] = field(default_factory=dict)  # row id -> its row in ``matrix``
    # Row i of ``matrix`` (the first ``len(at)`` rows are in use) is the vector of row id
    # ``ids[i]``; ``roots[i]`` is the square root, in double, of its sum of squares as
    # sqlite-vec adds it (float32): a search converts neither (~20 us of ~180 at 700 rows).
    matrix: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))
    ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    roots: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))

    def put(self, row_id: int, vector: np.ndarray) -> None:
        self.drop(row_id)
        vector = np.asarray(vector, np.float32)
        n = len(self.at)
        if n == len(self.matrix):  # grow by doubling: a put costs O(1) amortised
            size = max(64, 2 * n)
            grown = np.zeros((size, len(vector)), np.float32)
            ids, roots = np.zeros(size, np.int64), np.zeros(size, np.float64)
            if n:
                grown[:n], ids[:n], roots[:n] = self.matrix[:n], self.ids[:n], self.roots[:n]
            self.matrix, self.ids, self.roots = grown, ids, roots
        self.matrix[n] = vector
        self.ids[n] = row_id
        self.roots[n] = np.sqrt(np.float64(_magnitudes(vector)))
        self.at[row_id] = n

    def drop(self, row_id: int) -> None:
        """Remove ``row_id`` (the last row moves into its place)."""
        i = self.at.pop(row_id, None)
        if i is None:
            return
        last = len(self.at)  # the row count before the pop
        if i != last:
            moved = int(self.ids[last])
            self.matrix[i], self.ids[i], self.roots[i] = (self.matrix[last], moved,
                                                          self.roots[last])
            self.at[moved] = i

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest rows by cosine distance, nearest first, in the order sqlite-vec's
        exact search gives them (``VectorIndex.search``). BLAS computes every distance to
        within ``ROUNDING``; rows closer than that to each other (or to the k-th) are
        ordered by the distance as sqlite-vec computes it (float32 sums in element order,
        ``1 - dot / (sqrt(|a|) * sqrt(|b|))`` in double), equal ones newest row first."""
        n = len(self.at)
        q = np.asarray(vector, np.float32)
        q_mag = float(_magnitudes(q))
        if n == 0 or k <= 0 or q_mag == 0:
            return []
        norms = self.roots[:n] * np.sqrt(q_mag)
        with np.errstate(divide="ignore", invalid="ignore"):
            rough = 1.0 - (self.matrix[:n] @ q) / norms
        if not np.isfinite(rough).all():  # a zero vector's row: last, as sqlite-vec puts it
            rough = np.nan_to_num(rough, nan=2.0)
        if k < n:  # every row within rounding of the k-th is a candidate
            cand = np.flatnonzero(rough <= np.partition(rough, k - 1)[k - 1] + ROUNDING)
        else:
            cand = np.arange(n)
        cand = cand[np.argsort(rough[cand], kind="stable")]
        near = np.diff(rough[cand]) < ROUNDING  # a row closer than rounding to the next
        group = np.concatenate(([0], np.cumsum(~near)))  # runs of such rows
        dist = rough[cand].astype(np.float32)
        tied = np.zeros(len(cand), bool)
        tied[:-1] |= near
        tied[1:] |= near
        if tied.any():
            rows = cand[tied]
            dots = np.cumsum(self.matrix[rows] * q, axis=1, dtype=np.float32)[:, -1]
            with np.errstate(divide="ignore", invalid="ignore"):
                dist[tied] = (1.0 - dots.astype(np.float64) / norms[rows]).astype(np.float32)
        ids = self.ids[cand]
        order = np.lexsort((-ids, dist, group))[:k]
        return list(zip(ids[order].tolist(), dist[order].tolist(), strict=True))


@dataclass
class HeldTenant:
    """A tenant's postings, vectors and rows of every logged table, current as of ``seq``."""

    tenant: str
    seq: int
    tables: dict[str, Postings]
    vectors: dict[str, Vectors]
    # The rows ``candidates.load`` reads: ``episode_rows`` values plus ``expires_at``, and
    # ``BELIEF_COLUMNS`` plus ``expires_at``.
    rows: dict[str, dict[int, tuple[Any, ...]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Lookups over ``rows`` (kept by ``put_row``/``drop_row``): entity -> the beliefs whose
    # subject or object it is; turn uid -> the beliefs drawn from it, the episodes holding it.
    by_entity: dict[str, set[int]] = field(default_factory=dict)
    beliefs_by_turn: dict[str, set[int]] = field(default_factory=dict)
    episodes_by_turn: dict[str, set[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for base, rows in self.rows.items():
            for row in rows.values():
                self._index(base, row, add=True)

    def _keys(self, base: str, row: tuple[Any, ...]) -> list[tuple[dict[str, set[int]], str]]:
        if base == "beliefs":
            return [(self.by_entity, e) for e in {row[7], row[8]} if e] + (
                [(self.beliefs_by_turn, row[6])] if row[6] else [])
        return [(self.episodes_by_turn, uid) for uid in row[7]]

    def _index(self, base: str, row: tuple[Any, ...], *, add: bool) -> None:
        for lookup, key in self._keys(base, row):
            if add:
                lookup.setdefault(key, set()).add(row[0])
            else:
                ids = lookup.get(key)
                if ids is not None:
                    ids.discard(row[0])
                    if not ids:
                        del lookup[key]

    def drop_row(self, base: str, row_id: int) -> None:
        row = self.rows[base].pop(row_id, None)
        if row is not None:
            self._index(base, row, add=False)

    def put_row(self, base: str, row: tuple[Any, ...]) -> None:
        self.drop_row(base, row[0])
        self.rows[base][row[0]] = row
        self._index(base, row, add=True)

    @property
    def size(self) -> int:
        return sum(p.rows for p in self.tables.values())

    def holds(self, table: str) -> bool:
        return table in self.tables

    # ``keyword.plan_terms`` reads a tenant's counts through these (as from ``TermStats``).
    def dfs(self, conn: Connection, table: str, tenant: str, words: Sequence[str],
            cap: int = 0) -> dict[str, int]:
        with self.lock:
            return self.tables[table].dfs(words)

    def tenant_rows(self, conn: Connection, table: str, tenant: str) -> int:
        with self.lock:
            return self.tables[table].rows

    def ranked_ids(self, table: str, plan: keyword.TermPlan, window: int) -> list[int]:
        with self.lock:
            return self.tables[table].ranked_ids(plan, window)

    def holds_vectors(self, table: str) -> bool:
        return table in self.vectors

    def nearest(self, table: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        with self.lock:
            return self.vectors[table].nearest(vector, k)

    def stored_vectors(self, table: str, ids: Sequence[int]) -> list[np.ndarray]:
        """``feedback.stored_vectors``: the stored vectors of ``ids``, in row id order."""
        with self.lock:
            vectors = self.vectors[table]
            return [vectors.matrix[vectors.at[i]].copy() for i in sorted(set(ids))
                    if i in vectors.at]

    # ``candidates.load`` reads a tenant's rows through these (``candidates.HeldRows``).
    def beliefs(self, scope: Scope, ids: Sequence[int]) -> dict[int, Candidate]:
        return self._candidates("beliefs", scope, ids)

    def episodes(self, scope: Scope, ids: Sequence[int]) -> dict[int, Candidate]:
        return self._candidates("episodes", scope, ids)

    def _candidates(self, base: str, scope: Scope, ids: Sequence[int]
                    ) -> dict[int, Candidate]:
        make = belief_candidate if base == "beliefs" else episode_candidate
        with self.lock:
            held = self.rows[base]
            return {i: make(r) for i in ids
                    if (r := held.get(i)) is not None and _visible(base, scope, r)}

    # The graph walk's and the entity bridge's statements (``candidates.beliefs_touching*``,
    # ``graph._link_*``), answered with the same rows in the same order.
    def _visible_beliefs(self, scope: Scope, ids: Iterable[int]) -> list[tuple[Any, ...]]:
        """Rows of ``ids`` visible in ``scope``, most confident, then most recent, first
        (ties by id), as ``beliefs_touching`` orders them."""
        held = self.rows["beliefs"]
        found = sorted((r for i in ids if (r := held.get(i)) is not None
                        and _visible("beliefs", scope, r)), key=lambda r: r[0])
        found.sort(key=lambda r: r[3], reverse=True)  # stable: ties keep the id order
        found.sort(key=lambda r: r[4], reverse=True)
        return found

    def touching(self, scope: Scope, entity_ids: Sequence[str], limit: int) -> list[int]:
        with self.lock:
            ids = {i for e in entity_ids for i in self.by_entity.get(e, ())}
            return [r[0] for r in self._visible_beliefs(scope, ids)[:max(limit, 0)]]

    def touching_each(self, scope: Scope, entity_ids: Sequence[str], per_entity: int
                      ) -> dict[str, list[tuple[Any, ...]]]:
        out: dict[str, list[tuple[Any, ...]]] = {}
        with self.lock:
            for e in dict.fromkeys(entity_ids):
                found = self._visible_beliefs(scope, self.by_entity.get(e, ()))[:per_entity]
                if found:
                    out[e] = [(r[0], r[7], r[8], r[6]) for r in found]
        return out

    def episodes_of_turns(self, scope: Scope, turn_uids: Sequence[str]
                          ) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        with self.lock:
            held = self.rows["episodes"]
            for uid in sorted(set(turn_uids)):
                for i in sorted(self.episodes_by_turn.get(uid, ())):
                    if _visible("episodes", scope, held[i]):
                        out.append((i, uid))
        return out

    def beliefs_of_turns(self, scope: Scope, turn_uids: Sequence[str]
                         ) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        with self.lock:
            held = self.rows["beliefs"]
            for uid in sorted(set(turn_uids)):
                for i in sorted(self.beliefs_by_turn.get(uid, ())):
                    r = held[i]
                    if _visible("beliefs", scope, r):
                        out.append((i, r[7], r[8], uid))
        return out


def _visible(base: str, scope: Scope, r: tuple[Any, ...]) -> bool:
    """Whether a held row (``HeldTenant.rows``) is visible in ``scope``."""
    if base == "beliefs":
        return belief_visible(scope, r[5], r[3], r[15], r[16])
    return episode_visible(scope, r[5], r[3], r[9])


_CHANGES = f"SELECT seq, tbl, row_id FROM {changes.TABLE} WHERE tenant = ? AND seq > ? ORDER BY seq"
# The last seq given (AUTOINCREMENT's record: the log may have been pruned empty).
_TOP = f"SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{changes.TABLE}'), 0)"
_STATS = "SELECT tbl, rows, tokens FROM fts_stats WHERE tenant = ?"


class _Stopped(Exception):
    """A build given up: the process is closing."""


class Resident:
    """The postings, vectors and rows of the tenants this process recalls for (``Memory``
    owns one). Thread-safe: a tenant is brought up to date and read under its own lock.

    ``connect``: the builder's connection (per thread, as ``Database.conn`` gives them).
    With it a tenant is built on one background thread when it is recalled a second time
    within ``AGAIN_S`` (a conversation; a one-off recall is not worth it), and recall reads
    the store until it is ready, so no recall waits for a build (a 50,000-row tenant takes
    about a second); without it (tests) the first recall builds it itself. A tenant evicted
    while still in a conversation is counted (``thrashed``) and logged
    (``resident_thrashing``, at most every 10 minutes, naming the setting to raise).
    """

    def __init__(self, max_tenant_rows: int = MAX_TENANT_ROWS, max_rows: int = MAX_ROWS,
                 connect: Callable[[], Connection] | None = None) -> None:
        self.max_tenant_rows = max_tenant_rows
        self.max_rows = max_rows
        self._tenants: OrderedDict[str, HeldTenant] = OrderedDict()
        # tenant -> when it was found over the bound, or its build failed: the store's
        # path for a minute
        self._too_big: dict[str, float] = {}
        self._lock = threading.Lock()
        self.builds = 0  # tenants built from the store (a rebuild counts again)
        self._connect = connect
        self._queue: queue.SimpleQueue[tuple[str, VectorIndex | None] | None] = \
            queue.SimpleQueue()
        self._building: set[str] = set()
        self._recalled: OrderedDict[str, float] = OrderedDict()  # tenant -> its last recall
        self.thrashed = 0  # tenants evicted while still in a conversation
        self._warned = -1e9
        self._builder: threading.Thread | None = None
        self._closed = False

    def tenant(self, conn: Connection, tenant: str, index: VectorIndex | None = None
               ) -> HeldTenant | None:
        """``tenant``'s postings and rows (and, with ``index``, the vectors dense search
        reads), current as of ``conn``'s snapshot; None: read the store (the Postgres
        primary, a tenant over ``max_tenant_rows``, or one being built in the background).
        Call it inside the recall's read snapshot."""
        if is_postgres(conn):
            return None
        again = self._again(tenant)
        tables = _vector_tables(conn, index)
        with self._lock:
            held = self._tenants.get(tenant)
            if held is not None:
                self._tenants.move_to_end(tenant)
            elif time.monotonic() - self._too_big.get(tenant, -1e9) < 60.0:
                return None  # checked within the last minute: still the store's
        if held is not None and {b: v.table for b, v in held.vectors.items()} == tables:
            with held.lock:
                try:
                    current = _catch_up(conn, held)
                except BaseException:  # half caught up: never served again
                    self._drop(tenant, held)
                    raise
                if current:
                    return held
        if held is not None:
            self._drop(tenant, held)  # stale: never served again
        if self._connect is None:
            return self._install(tenant, self._build(conn, tenant, tables))
        if held is not None or again:  # a tenant in a conversation
            self._build_later(tenant, index)
        return None

    def _again(self, tenant: str) -> bool:
        """Whether ``tenant`` was recalled within ``AGAIN_S`` before (this recall is noted):
        a one-off recall is not worth a build, the second of a conversation is."""
        now = time.monotonic()
        with self._lock:
            last = self._recalled.pop(tenant, None)
            self._recalled[tenant] = now
            while len(self._recalled) > RECALLED_KEPT:
                self._recalled.popitem(last=False)
        return last is not None and now - last < AGAIN_S

    def _drop(self, tenant: str, held: HeldTenant) -> None:
        with self._lock:
            if self._tenants.get(tenant) is held:
                del self._tenants[tenant]

    def _install(self, tenant: str, fresh: HeldTenant | None) -> HeldTenant | None:
        with self._lock:
            if fresh is None:
                self._tenants.pop(tenant, None)
                self._too_big[tenant] = time.monotonic()
                return None
            self._too_big.pop(tenant, None)
            self._tenants[tenant] = fresh
            self._tenants.move_to_end(tenant)
            self._evict()
        return fresh

    def _build_later(self, tenant: str, index: VectorIndex | None) -> None:
        with self._lock:
            if self._closed or tenant in self._building:
                return
            self._building.add(tenant)
            if self._builder is None:
                self._builder = threading.Thread(target=self._run, name="mnemo-resident",
                                                 daemon=True)
                self._builder.start()
        self._queue.put((tenant, index))

    def _run(self) -> None:
        assert self._connect is not None
        while (item := self._queue.get()) is not None:
            tenant, index = item
            try:
                if self._closed:
                    continue
                conn = self._connect()
                with read_snapshot(conn):
                    fresh = self._build(conn, tenant, _vector_tables(conn, index))
                if not self._closed:
                    self._install(tenant, fresh)
            except _Stopped:
                pass
            except Exception as e:  # the store's path serves the tenant meanwhile
                if not self._closed:
                    log.warning("resident_build_failed", tenant=tenant,
                                error=type(e).__name__)
                    with self._lock:
                        self._too_big[tenant] = time.monotonic()
            finally:
                with self._lock:
                    self._building.discard(tenant)

    def wait(self, timeout: float = 30.0) -> bool:
        """Wait until no build is pending (tests, benchmarks); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._building:
                    return True
            time.sleep(0.005)
        return False

    def close(self, timeout: float = 5.0) -> None:
        """Stop the builder (a build under way stops within 1,000 rows)."""
        with self._lock:
            self._closed = True
            builder = self._builder
        if builder is not None:
            self._queue.put(None)
            builder.join(timeout)

    def _evict(self) -> None:
        total = sum(t.size for t in self._tenants.values())
        now = time.monotonic()
        while total > self.max_rows and len(self._tenants) > 1:
            tenant, gone = self._tenants.popitem(last=False)
            total -= gone.size
            if now - self._recalled.get(tenant, -1e9) < AGAIN_S:
                self.thrashed += 1  # still in a conversation: it will be built again
                if now - self._warned >= 600.0:
                    self._warned = now
                    log.warning("resident_thrashing", held=len(self._tenants),
                                max_rows=self.max_rows,
                                hint="tenants in conversations do not fit: raise "
                                     "MNEMO_RECALL_RESIDENT_ROWS (~2 KB a memory)")

    def _build(self, conn: Connection, tenant: str, vector_tables: dict[str, str]
               ) -> HeldTenant | None:
        stats = {tbl: int(rows) for tbl, rows, _ in conn.execute(_STATS, (tenant,))}
        if sum(stats.get(b, 0) for b in changes.LOGGED) > self.max_tenant_rows:
            return None
        seq = int(conn.execute(_TOP).fetchone()[0])  # the same snapshot as the rows below
        rows = {base: _rows(conn, base, tenant) for base in changes.LOGGED}
        tables: dict[str, Postings] = {}
        for base, held_rows in rows.items():  # indexed from the rows' text (column 2)
            postings = tables[base] = Postings()
            for n, (row_id, row) in enumerate(held_rows.items()):
                if n % 1000 == 999 and self._closed:
                    raise _Stopped
                postings.add(row_id, row[2] or "")
        vectors: dict[str, Vectors] = {}
        for base, table in vector_tables.items():
            held = vectors[base] = Vectors(table)
            for n, (row_id, blob) in enumerate(conn.execute(
                    f"SELECT rowid, embedding FROM {table} WHERE tenant = ?", (tenant,))):
                if n % 1000 == 999 and self._closed:
                    raise _Stopped
                held.put(int(row_id), stored_vector(blob))
        self.builds += 1
        return HeldTenant(tenant, seq, tables, vectors, rows)

    def held(self) -> list[str]:
        with self._lock:
            return list(self._tenants)


def _vector_tables(conn: Connection, index: VectorIndex | None) -> dict[str, str]:
    """base -> the vector table dense search reads now (none while dense is off)."""
    if index is None:
        return {}
    return {b: t for b, t in index.active_tables(conn).items() if b in changes.LOGGED}


_ROWS = {
    "episodes": (f"SELECT {EPISODE_COLUMNS}, e.expires_at FROM episodes e "
                 f"{EPISODE_TURNS_JOIN} WHERE e.tenant = ?{{ids}} {EPISODE_ORDER}"),
    "beliefs": (f"SELECT {BELIEF_COLUMNS}, b.expires_at FROM beliefs b {BELIEF_TURN_JOIN} "
                "WHERE b.tenant = ?{ids}"),
}
_IDS = {"episodes": " AND e.id IN ({marks})", "beliefs": " AND b.id IN ({marks})"}


def _rows(conn: Connection, base: str, tenant: str, ids: Sequence[int] = ()
          ) -> dict[int, tuple[Any, ...]]:
    """The tenant's rows of ``base`` as ``HeldTenant.rows`` holds them (``ids``: only
    those)."""
    where = _IDS[base].format(marks=",".join("?" * len(ids))) if ids else ""
    found = conn.execute(_ROWS[base].format(ids=where), [tenant, *ids]).fetchall()
    if base == "episodes":
        return episode_rows(found)
    return {r[0]: tuple(r) for r in found}


def _catch_up(conn: Connection, held: HeldTenant) -> bool:
    """Apply the tenant's changes past ``held.seq``; False: rebuild instead (the log was
    pruned past it, too much changed, or the held counts disagree with ``fts_stats``).

    A snapshot that has seen no change since ``held.seq`` (nothing written, or another
    thread's newer snapshot caught the copy up further) leaves it as it is: its counts
    would be older than the copy's, not different from them."""
    if int(conn.execute(_TOP).fetchone()[0]) <= held.seq:
        return True
    pruned = int(get_meta(conn, changes.PRUNED_KEY) or 0)
    if held.seq < pruned:
        return False
    changed: dict[str, set[int]] = {}
    seq = held.seq
    for at, tbl, row_id in conn.execute(_CHANGES, (held.tenant, held.seq)):
        changed.setdefault(tbl, set()).add(int(row_id))
        seq = int(at)
    if sum(len(ids) for ids in changed.values()) > MAX_CATCH_UP:
        return False
    for base, ids in changed.items():
        postings = held.tables.get(base)
        if postings is None:
            return False
        for row_id in ids:
            postings.drop(row_id)
            held.drop_row(base, row_id)
        for row in _rows(conn, base, held.tenant, sorted(ids)).values():  # gone: left out
            postings.add(row[0], row[2] or "")
            held.put_row(base, row)
        vectors = held.vectors.get(base)
        if vectors is not None:
            sql = f"SELECT embedding FROM {vectors.table} WHERE rowid = ?"
            for row_id in ids:  # point lookups: vec0 scans the table for IN
                vectors.drop(row_id)
                found = conn.execute(sql, (row_id,)).fetchone()
                if found is not None:
                    vectors.put(row_id, stored_vector(found[0]))
    held.seq = seq
    stats = {tbl: (int(rows), int(tokens))
             for tbl, rows, tokens in conn.execute(_STATS, (held.tenant,))}
    return all(stats.get(base, (0, 0)) == (p.rows, p.total) for base, p in held.tables.items())
