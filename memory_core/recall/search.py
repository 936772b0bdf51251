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
from typing import Any

import numpy as np

from memory_core.recall.candidates import (
    ALIASES,
    FILTERS,
    TABLES,
    Candidate,
    Scope,
    belief_filter,
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
        self._cache: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def df(self, conn: Any, table: str, term: str, cap: int) -> int:
        """Matches of ``term`` in ``table``'s FTS index, counted up to ``cap``."""
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get((table, term))
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        count = conn.execute(
            f"SELECT count(*) FROM (SELECT rowid FROM {table}_fts WHERE {table}_fts MATCH ? "
            "LIMIT ?)", (fts_expression((term,)), int(cap))).fetchone()[0]
        with self._lock:
            if len(self._cache) >= self.max_entries:
                self._cache.clear()
            self._cache[(table, term)] = (now, int(count))
        return int(count)


    def tenant_rows(self, conn: Any, table: str, tenant: str) -> int:
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
            self._cache[key] = (now, count)
        return count

    def tenant_df(self, conn: Any, table: str, tenant: str, term: str, cap: int) -> int:
        """Matches of ``term`` among ``tenant``'s rows, counted up to ``cap`` (not cached:
        only asked for terms frequent in the whole index and small tenants)."""
        return int(conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {table}_fts CROSS JOIN {table} x ON x.id = "
            f"{table}_fts.rowid WHERE {table}_fts MATCH ? AND x.tenant = ? LIMIT ?)",
            (fts_expression((term,)), tenant, int(cap))).fetchone()[0])


def _locally_common(conn: Any, stats: TermStats, table: str, tenant: str, term: str,
                    global_df: int, fraction: float) -> bool:
    """True when ``term`` is in at least ``fraction`` of the tenant's rows (a stopword for
    this tenant, such as the name of whoever speaks in every turn). bm25's idf comes from
    the whole index, shared by every tenant, so it cannot see that."""
    rows = stats.tenant_rows(conn, table, tenant)
    if fraction <= 0 or rows < MIN_TENANT_ROWS_FOR_LOCAL:
        return False
    cap = max(1, int(rows * fraction))
    return global_df >= cap and stats.tenant_df(conn, table, tenant, term, cap) >= cap


def selective_terms(conn: Any, stats: TermStats | None, table: str, terms: tuple[str, ...],
                    common_df: int, tenant: str = "", local_fraction: float = 0.0,
                    ) -> tuple[tuple[str, ...], bool]:
    """The terms worth ranking by, and whether none was (all common).

    A term matching ``common_df`` rows or more is left out: ranking cost grows with every
    row a term matches, and such a term barely moves bm25 (the entity bridge and dense
    search still see it). So is a term in ``local_fraction`` of the tenant's rows.
    """
    if stats is None or common_df <= 0 or not terms:
        return terms, False
    dfs = {t: stats.df(conn, table, t, common_df) for t in terms}
    kept = sorted((t for t in terms if dfs[t] < common_df and not _locally_common(
        conn, stats, table, tenant, t, dfs[t], local_fraction)), key=lambda t: dfs[t])
    if not kept:
        return terms, True
    # Rarest first, while the rows to rank stay within about two common terms' worth.
    chosen, rows = [], 0
    for t in kept:
        if chosen and rows + dfs[t] > 2 * common_df:
            break
        chosen.append(t)
        rows += dfs[t]
    return tuple(t for t in terms if t in chosen), False


def fts(conn: Any, kind: str, scope: Scope, terms: tuple[str, ...], k: int, *,
        stats: TermStats | None = None, common_df: int = 0,
        local_fraction: float = 0.0) -> list[Candidate]:
    """Rows of ``kind`` matching any of ``terms`` by bm25, best first.

    Terms matching ``common_df`` rows or more are left out, and the rarest terms are kept
    while the rows to rank stay under ``2 * common_df``; when every term is that common,
    bm25 ranks only the newest ``common_df`` matches. So ranking cost is bounded.
    """
    if not terms or k <= 0:
        return []
    table = TABLES[kind]
    terms, all_common = selective_terms(conn, stats, table, terms, common_df, scope.tenant,
                                        local_fraction)
    expression = fts_expression(terms)
    order = "rowid DESC" if all_common else "rank"
    # Fast path: the best matches of the whole index, filtered to the caller's scope. It
    # is enough unless other tenants (or hidden rows) crowd the top. With only common terms,
    # bm25 ranks the newest ``common_df`` matches rather than all of them.
    limit = k * FTS_OVERSAMPLE
    source = (f"(SELECT rowid, rank FROM {table}_fts WHERE {table}_fts MATCH ? ORDER BY "
              f"rowid DESC LIMIT {int(common_df)})" if all_common else
              f"{table}_fts WHERE {table}_fts MATCH ?")
    ids = [r[0] for r in conn.execute(
        f"SELECT rowid FROM {source} ORDER BY rank LIMIT ?", (expression, limit))]
    found = _in_order(load(conn, kind, scope, ids), ids)
    if len(found) >= k or len(ids) < limit:
        return found[:k]
    return _fts_scoped(conn, kind, scope, expression, k, order)


def _fts_scoped(conn: Any, kind: str, scope: Scope, expression: str, k: int,
                order: str) -> list[Candidate]:
    table, alias = TABLES[kind], ALIASES[kind]
    cond, params = FILTERS[kind](scope, alias)
    # The matches are materialised first and drive the join (CROSS JOIN fixes the order):
    # left to itself the planner scans the tenant's rows and probes FTS for each one.
    ids = [r[0] for r in conn.execute(
        f"WITH m AS MATERIALIZED (SELECT rowid AS id, {order.split()[0]} AS o FROM {table}_fts "
        f"WHERE {table}_fts MATCH ?) SELECT {alias}.id FROM m CROSS JOIN {table} {alias} "
        f"ON {alias}.id = m.id WHERE {cond} ORDER BY m.o{' DESC' if 'DESC' in order else ''} "
        "LIMIT ?", [expression, *params, int(k)])]
    return _in_order(load(conn, kind, scope, ids), ids)


def dense(conn: Any, index: VectorIndex, kind: str, scope: Scope, vector: np.ndarray,
          k: int) -> list[Candidate]:
    """Nearest visible rows of ``kind`` by cosine distance, best first. May raise the
    driver's error for a broken vector table (the caller degrades to keyword-only)."""
    if k <= 0:
        return []
    hits = index.search(conn, TABLES[kind], scope.tenant, vector, k * DENSE_OVERSAMPLE)
    ids = [rowid for rowid, _ in hits]
    return _in_order(load(conn, kind, scope, ids), ids)[:k]


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


def query_entities(conn: Any, tenant: str, text: str) -> list[str]:
    """Entity ids of the tenant named in ``text`` by a name, an alias or the id itself."""
    grams = _ngrams(text)
    if not grams:
        return []
    variants = list(dict.fromkeys([*grams, *(g.replace(" ", "_") for g in grams)]))
    marks = ",".join("?" * len(variants))
    rows = conn.execute(
        f"SELECT entity_id FROM entity_aliases WHERE tenant = ? AND alias_norm IN ({marks}) "
        f"UNION SELECT entity_id FROM entities WHERE tenant = ? AND entity_id IN ({marks})",
        [tenant, *variants, tenant, *variants]).fetchall()
    return sorted({r[0] for r in rows if r[0] != "user"})


def beliefs_about(conn: Any, scope: Scope, entity_ids: Sequence[str],
                  k: int) -> list[Candidate]:
    """Visible beliefs whose subject or object is one of ``entity_ids``: most confident and
    most recent first."""
    if not entity_ids or k <= 0:
        return []
    cond, params = belief_filter(scope)
    marks = ",".join("?" * len(entity_ids))
    ids = [r[0] for r in conn.execute(
        f"SELECT b.id FROM beliefs b WHERE {cond} AND (b.subject_id IN ({marks}) "
        f"OR b.object_entity_id IN ({marks})) "
        "ORDER BY b.confidence DESC, b.valid_from DESC LIMIT ?",
        [*params, *entity_ids, *entity_ids, int(k)])]
    return _in_order(load(conn, "belief", scope, ids), ids)
