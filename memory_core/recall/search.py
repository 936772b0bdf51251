"""The ranked lists: FTS5 (bm25), dense (sqlite-vec) and the entity bridge.

Every statement is a fixed string with bound parameters; the FTS5 expression comes from
``query.fts_expression`` (quoted word tokens only). Each function returns visible rows of one
kind, best first.
"""

from __future__ import annotations

import re
import threading
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memory_core.db.sqlite import Connection
from memory_core.model.tenants import HUB
from memory_core.recall.candidates import (
    ALIASES,
    FILTERS,
    TABLES,
    Candidate,
    Scope,
    beliefs_touching,
    load,
)
from memory_core.recall.query import fts_expression
from memory_core.vectors import VectorIndex

_EDGE = " \t.,;:!?\"'`()[]{}<>"
_LOOSE_EDGE = ",;:!?\"`()[]{}<>"
_POSSESSIVE_RE = re.compile(r"['’]s$")
MAX_BRIDGE_WORDS = 120
MAX_NGRAM = 3
# Dense search asks for more than it needs: some neighbours are filtered out afterwards
# (superseded beliefs, archived episodes, other times).
DENSE_OVERSAMPLE = 2
FTS_OVERSAMPLE = 3
# Rows matching only common terms are ranked among this many times ``k`` of their newest
# matches (they come after every row matching a rarer term).
FILL_WINDOW = 2
# Below this many rows a tenant has no tenant-local stopwords (every word is "frequent").
MIN_TENANT_ROWS_FOR_LOCAL = 100


def _in_order(found: dict[int, Candidate], ids: Sequence[int]) -> list[Candidate]:
    return [found[i] for i in dict.fromkeys(ids) if i in found]


class TermStats:
    """Document frequencies of query terms per FTS table, capped and cached for ``ttl``
    seconds (one per database: ``Memory`` owns one). Frequencies move slowly, and a stale
    one only shifts which terms count as common."""

    def __init__(self, ttl: float = 300.0, max_entries: int = 50_000) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._cache: dict[tuple[str, str], tuple[float, int, int]] = {}  # time, count, cap
        self._lock = threading.Lock()

    def df(self, conn: Connection, table: str, term: str, cap: int) -> int:
        """Matches of ``term`` in ``table``'s FTS index, counted up to ``cap``."""
        return self.dfs(conn, table, (term,), cap)[term]

    def dfs(self, conn: Connection, table: str, terms: Sequence[str], cap: int) -> dict[str, int]:
        """``df`` of each of ``terms``; the ones not cached are counted in one statement."""
        now = time.monotonic()
        out: dict[str, int] = {}
        with self._lock:
            for term in terms:
                hit = self._cache.get((table, term))
                # A count below its cap is exact; one that reached it answers smaller caps.
                if hit is not None and now - hit[0] < self.ttl and (hit[1] < hit[2]
                                                                    or hit[2] >= cap):
                    out[term] = min(hit[1], cap)
        missing = [t for t in dict.fromkeys(terms) if t not in out]
        if missing:
            one = (f"SELECT count(*) FROM (SELECT 1 FROM {table}_fts WHERE {table}_fts MATCH ? "
                   "LIMIT ?)")
            row = conn.execute("SELECT " + ", ".join(f"({one})" for _ in missing), [
                p for t in missing for p in (fts_expression((t,)), int(cap))]).fetchone()
            with self._lock:
                if len(self._cache) + len(missing) > self.max_entries:
                    self._cache.clear()
                for term, count in zip(missing, row, strict=True):
                    self._cache[(table, term)] = (now, int(count), int(cap))
                    out[term] = int(count)
        return out

    def tenant_rows(self, conn: Connection, table: str, tenant: str) -> int:
        """Rows of ``tenant`` in ``table`` (cached like the frequencies)."""
        key = (table, "\x00rows\x00" + tenant)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        count = int(conn.execute(f"SELECT count(*) FROM {table} WHERE tenant = ?",
                                 (tenant,)).fetchone()[0])
        with self._lock:
            self._cache[key] = (now, count, count + 1)  # exact
        return count

    def tenant_df(self, conn: Connection, table: str, tenant: str, term: str, cap: int) -> int:
        """Matches of ``term`` among ``tenant``'s rows, counted up to ``cap`` (not cached:
        only asked for terms frequent in the whole index and small tenants)."""
        return int(conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {table}_fts CROSS JOIN {table} x ON x.id = "
            f"{table}_fts.rowid WHERE {table}_fts MATCH ? AND x.tenant = ? LIMIT ?)",
            (fts_expression((term,)), tenant, int(cap))).fetchone()[0])


def _locally_common(conn: Connection, stats: TermStats, table: str, tenant: str, term: str,
                    global_df: int, fraction: float) -> bool:
    """True when ``term`` is in at least ``fraction`` of the tenant's rows (a stopword for
    this tenant, such as the name of whoever speaks in every turn). bm25's idf comes from
    the whole index, shared by every tenant, so it cannot see that."""
    rows = stats.tenant_rows(conn, table, tenant)
    if fraction <= 0 or rows < MIN_TENANT_ROWS_FOR_LOCAL:
        return False
    cap = max(1, int(rows * fraction))
    return global_df >= cap and stats.tenant_df(conn, table, tenant, term, cap) >= cap


@dataclass(frozen=True)
class TermPlan:
    """How one FTS search spends its ranking budget (see ``plan_terms``).

    ``essential``: the rarest terms; every row matching one of them is ranked by bm25 over
    all of ``essential + other``. ``other``: the rest; they raise the rows that also match an
    essential term, and their newest matches fill the list when the essential terms match
    too few rows. Both empty: nothing to search.
    """

    essential: tuple[str, ...]
    other: tuple[str, ...] = ()


def plan_terms(conn: Connection, stats: TermStats | None, table: str, terms: tuple[str, ...],
               common_df: int, rank_budget: int = 0, tenant: str = "",
               local_fraction: float = 0.0) -> TermPlan:
    """Split ``terms`` into the ones ranked exactly and the rest (``TermPlan``).

    bm25 costs about a microsecond per matching row, so the rows it ranks are bounded:

    - a term matching ``common_df`` rows or more, or ``local_fraction`` of the tenant's
      rows (its own stopwords), is left out: it barely moves bm25, and the entity bridge
      and dense search still see it; when every term is like that, they are all ``other``
      (only their newest matches are ranked);
    - of the rest, the rarest are ``essential`` while their matches add up to at most
      ``rank_budget`` rows (at least one term); the others are ``other``.

    ``common_df`` or ``rank_budget`` of 0 turns that bound off.
    """
    if stats is None or common_df <= 0 or not terms:
        return TermPlan(terms)
    dfs = stats.dfs(conn, table, terms, common_df)
    kept = sorted((t for t in terms if dfs[t] < common_df and not _locally_common(
        conn, stats, table, tenant, t, dfs[t], local_fraction)), key=lambda t: dfs[t])
    if not kept:
        return TermPlan((), terms)
    chosen: list[str] = []
    rows = 0
    for t in kept:
        if chosen and rank_budget > 0 and rows + dfs[t] > rank_budget:
            break
        chosen.append(t)
        rows += dfs[t]
    return TermPlan(tuple(t for t in terms if t in chosen),
                    tuple(t for t in terms if t in kept and t not in chosen))


def fts(conn: Connection, kind: str, scope: Scope, terms: tuple[str, ...], k: int, *,
        stats: TermStats | None = None, common_df: int = 0, rank_budget: int = 0,
        local_fraction: float = 0.0, rare_only: bool = False) -> list[Candidate]:
    """Rows of ``kind`` matching any of ``terms`` by bm25, best first, with the ranking
    work bounded by ``plan_terms``: every row matching a rare (``essential``) term is
    ranked by bm25 over all kept terms (exact for those rows); rows matching only the
    more common terms follow, the best of the newest of their matches. ``rare_only``: the
    essential terms alone (for many broad terms, such as a feedback round's).
    """
    if not terms or k <= 0:
        return []
    table = TABLES[kind]
    plan = plan_terms(conn, stats, table, terms, common_df, rank_budget, scope.tenant,
                      local_fraction)
    if rare_only:
        plan = TermPlan(plan.essential)
    # Fast path: the best matches of the whole index, filtered to the caller's scope. It
    # is enough unless other tenants (or hidden rows) crowd the top.
    limit = k * FTS_OVERSAMPLE
    ids = _ranked_ids(conn, table, plan, limit)
    found = _load_first(conn, kind, scope, ids, k)
    if len(found) < k and len(ids) < limit and plan.other:
        # The rarer terms' matches are all in: rows matching only common terms come next,
        # the best of their newest matches.
        seen = set(ids)
        other = fts_expression(plan.other)
        assert other is not None  # plan.other holds terms
        fill = [r for r, _ in _best(conn, table, other, limit - len(ids),
                                    window=min(rank_budget or common_df, FILL_WINDOW * k))
                if r not in seen]
        found += _load_first(conn, kind, scope, fill, k - len(found))
        ids += fill
    if len(found) >= k or len(ids) < limit:
        return found[:k]
    return _fts_scoped(conn, kind, scope, plan, k)


def _load_first(conn: Connection, kind: str, scope: Scope, ids: Sequence[int],
                k: int) -> list[Candidate]:
    """The first ``k`` visible rows of ``ids``, in order: loads ``k`` ids, and the rest only
    when some of those are hidden (other tenants, other times)."""
    found = _in_order(load(conn, kind, scope, ids[:k]), ids[:k])
    if len(found) < k and len(ids) > k:
        found += _in_order(load(conn, kind, scope, ids[k:]), ids[k:])
    return found


def _best(conn: Connection, table: str, expression: str, limit: int,
          window: int = 0) -> list[tuple[int, float]]:
    """(rowid, bm25 rank) of the best ``limit`` matches, best first; with ``window``, of
    the newest ``window`` matches only."""
    source = (f"(SELECT rowid, rank FROM {table}_fts WHERE {table}_fts MATCH ? ORDER BY "
              f"rowid DESC LIMIT {int(window)})" if window > 0 else
              f"{table}_fts WHERE {table}_fts MATCH ?")
    return conn.execute(f"SELECT rowid, rank FROM {source} ORDER BY rank LIMIT ?",
                        (expression, int(limit))).fetchall()


def _ranked_ids(conn: Connection, table: str, plan: TermPlan, limit: int) -> list[int]:
    """The best ``limit`` rows matching an essential term, by bm25 over every term."""
    essential = fts_expression(plan.essential)
    if not essential:
        return []
    scores = dict(_best(conn, table, essential, limit))
    other = fts_expression(plan.other)
    if other:
        # Rows matching both: their bm25 counts every term (each phrase once), so it
        # replaces the essential-only score. A row past this limit scores below every
        # row kept here, so the top ``limit`` stays exact.
        scores.update(_best(conn, table, f"({essential}) AND ({other})", limit))
    return sorted(scores, key=scores.__getitem__)[:limit]


def _fts_scoped(conn: Connection, kind: str, scope: Scope, plan: TermPlan,
                k: int) -> list[Candidate]:
    table, alias = TABLES[kind], ALIASES[kind]
    cond, params = FILTERS[kind](scope, alias)
    # Rank the essential terms' matches; with none (every term common), the newest matches.
    expression = fts_expression(plan.essential or plan.other)
    column, direction = ("rank", "") if plan.essential else ("rowid", " DESC")
    # The matches are materialised first and drive the join (CROSS JOIN fixes the order):
    # left to itself the planner scans the tenant's rows and probes FTS for each one.
    ids = [r[0] for r in conn.execute(
        f"WITH m AS MATERIALIZED (SELECT rowid AS id, {column} AS o FROM {table}_fts "
        f"WHERE {table}_fts MATCH ?) SELECT {alias}.id FROM m CROSS JOIN {table} {alias} "
        f"ON {alias}.id = m.id WHERE {cond} ORDER BY m.o{direction} LIMIT ?",
        [expression, *params, int(k)])]
    return _in_order(load(conn, kind, scope, ids), ids)


def dense(conn: Connection, index: VectorIndex, kind: str, scope: Scope, vector: np.ndarray,
          k: int) -> list[Candidate]:
    """Nearest visible rows of ``kind`` by cosine distance, best first. May raise the
    driver's error for a broken vector table (the caller degrades to keyword-only)."""
    if k <= 0:
        return []
    hits = index.search(conn, TABLES[kind], scope.tenant, vector, k * DENSE_OVERSAMPLE)
    return _load_first(conn, kind, scope, [rowid for rowid, _ in hits], k)[:k]


def _words(text: str) -> list[list[str]]:
    """Word sequences of ``text`` in the alias form (NFKC, case-folded): one with edge
    punctuation stripped and possessives cut, one keeping inner punctuation ("dr. smith")."""
    raw = unicodedata.normalize("NFKC", text).casefold().split()[:MAX_BRIDGE_WORDS]
    plain = [_POSSESSIVE_RE.sub("", w.strip(_EDGE)) for w in raw]
    loose = [w.strip(_LOOSE_EDGE) for w in raw]
    return [[w for w in plain if w], [w for w in loose if w]]


def _ngrams(text: str) -> list[str]:
    grams: dict[str, None] = {}
    for words in _words(text):
        for n in range(1, MAX_NGRAM + 1):
            for i in range(len(words) - n + 1):
                grams.setdefault(" ".join(words[i:i + n]), None)
    return list(grams)


def query_entities(conn: Connection, tenant: str, text: str, *,
                   include_hub: bool = False) -> list[str]:
    """Entity ids of the tenant named in ``text`` by a name, an alias or the id itself
    (the hub ``user`` only with ``include_hub``)."""
    grams = _ngrams(text)
    if not grams:
        return []
    variants = list(dict.fromkeys([*grams, *(g.replace(" ", "_") for g in grams)]))
    marks = ",".join("?" * len(variants))
    rows = conn.execute(
        f"SELECT entity_id FROM entity_aliases WHERE tenant = ? AND alias_norm IN ({marks}) "
        f"UNION SELECT entity_id FROM entities WHERE tenant = ? AND entity_id IN ({marks})",
        [tenant, *variants, tenant, *variants]).fetchall()
    return sorted({r[0] for r in rows if include_hub or r[0] != HUB})


def beliefs_about(conn: Connection, scope: Scope, entity_ids: Sequence[str],
                  k: int) -> list[Candidate]:
    """Visible beliefs whose subject or object is one of ``entity_ids``: most confident and
    most recent first."""
    ids = [r[0] for r in beliefs_touching(conn, scope, entity_ids, "b.id", k)]
    return _in_order(load(conn, "belief", scope, ids), ids)
