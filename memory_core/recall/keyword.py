"""Keyword search: bm25 over one tenant's rows, with that tenant's own statistics.

The FTS5 indexes hold every token in its tenant's namespace (``memory_core.db.fts``), so a
term's postings are the tenant's matches and nothing else: no other tenant's row is walked,
and none can change a tenant's ranking. bm25 is computed here as FTS5 computes it (k1 1.2,
b 0.75, idf floored at 1e-6, the same arithmetic) but from the tenant's N, average length
(``fts_stats``) and document frequencies; FTS5's own ``bm25()`` would take N and the
average length from the whole index, that is from every tenant.

The work is bounded by ``plan_terms`` (at most about ``rank_budget`` rows ranked exactly; a
term in ``common_df`` rows or more, or in ``local_fraction`` of the tenant's rows, is left
out). On SQLite with mnemo's extension loaded (``db/bm25.c``, built at install time when a
C compiler was there; ``MNEMO_SQLITE_BM25``) FTS5 ranks the rows in C with the tenant's
statistics and only their ids reach Python (``_ranked_in_c``); otherwise only the ranked
rows reach Python (``_fts5_postings``): the rare terms' instances with their lengths, and
the newest rows matching only the common terms, which FTS5 finds in C; a common term's
other matches are walked in C and counted there. Both ways give the same ids in the same
order (the same arithmetic, tests/test_keyword_c.py). Every statement is
a fixed string with bound parameters (an FTS5 expression is bound too, made of the
tenant's tokens, which are letters and digits only).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from memory_core.db import fts as fts_index
from memory_core.db import pg_fts
from memory_core.db.dialect import is_postgres
from memory_core.db.sqlite import BM25_LOADED, Connection
from memory_core.recall.candidates import TABLES, Candidate, Scope, load_new

FTS_OVERSAMPLE = 3
# Rows matching only common terms are ranked among this many times ``k`` of their newest
# matches (they come after every row matching a rarer term).
FILL_WINDOW = 2
# Below this many rows a tenant has no tenant-local stopwords (every word is "frequent").
MIN_TENANT_ROWS_FOR_LOCAL = 100
K1, B = 1.2, 0.75  # FTS5's bm25 constants
K1_PLUS_1 = K1 + 1
MIN_IDF = 1e-6  # FTS5 floors idf here (a term in more than half the rows)
_LOAD_PAGE = 64  # ranked ids loaded per statement past the first ``k``
S = TypeVar("S")  # how an engine gives a row's length (FTS5: _docsize bytes)


def in_order(found: dict[int, Candidate], ids: Sequence[int]) -> list[Candidate]:
    return [found[i] for i in dict.fromkeys(ids) if i in found]


def load_first(conn: Connection, kind: str, scope: Scope, ids: Sequence[int], k: int,
               pool: Mapping[tuple[str, int], Candidate] | None = None) -> list[Candidate]:
    """The first ``k`` visible rows of ``ids``, in order: loads ``k`` ids, then further
    pages only while some were hidden (other times, archived, superseded). Rows ``pool``
    holds (this recall's candidates: visible in the same scope) are its own objects, not
    read again: the lists of one recall overlap (LoCoMo, fastembed: row reads 4.7 -> 3.3 ms
    of CPU per recall)."""
    known = pool or {}
    found = in_order(load_new(conn, kind, scope, ids[:k], known), ids[:k])
    start = k
    while len(found) < k and start < len(ids):
        page = ids[start:start + max(_LOAD_PAGE, k - len(found))]
        found += in_order(load_new(conn, kind, scope, page, known), page)
        start += len(page)
    return found[:k]


def word_token(word: str) -> str | None:
    """The token a search for ``word`` looks up, without the tenant's prefix (None: none)."""
    toks = fts_index.tokens(word)
    return toks[0] if toks else None


def word_tokens(tenant: str, words: Sequence[str]) -> dict[str, str]:
    """word -> the indexed token a search for it looks up (words with none are left out)."""
    prefix = fts_index.tenant_prefix(tenant)
    out: dict[str, str] = {}
    for w in words:
        tok = word_token(w)
        if tok is not None:
            out.setdefault(w, prefix + tok)
    return out


class TermStats:
    """Document frequencies of a tenant's tokens, and its row count, per FTS table, cached
    for ``ttl`` seconds (one per database: ``Memory`` owns one). A token names its tenant,
    so a cached count is that tenant's; it moves only with the tenant's own writes, and a
    stale one only shifts which terms count as common."""

    def __init__(self, ttl: float = 300.0, max_entries: int = 50_000) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        # (table, token) -> (time, count, the cap it was counted up to; 0: exact)
        self._cache: dict[tuple[str, str], tuple[float, int, int]] = {}
        self._lock = threading.Lock()

    def _cached(self, key: tuple[str, str], now: float, cap: int) -> int | None:
        hit = self._cache.get(key)
        if hit is None or now - hit[0] >= self.ttl:
            return None
        _, count, bound = hit
        # exact, or counted to a cap it did not reach, or reached one at least this high
        return count if bound == 0 or count < bound or 0 < cap <= count else None

    def dfs(self, conn: Connection, table: str, tenant: str, words: Sequence[str],
            cap: int = 0) -> dict[str, int]:
        """Rows of ``tenant`` in ``table`` matching each of ``words``: exact below ``cap``;
        a word in ``cap`` rows or more may count as ``cap`` (``cap`` 0: always exact). On
        the Postgres primary a common word's postings are then counted only up to ``cap``
        (``pg_fts.doc_counts``); FTS5 counts a doclist in C either way."""
        by_word = word_tokens(tenant, words)
        now = time.monotonic()
        counts: dict[str, int] = {}
        with self._lock:
            for token in by_word.values():
                hit = self._cached((table, token), now, cap)
                if hit is not None:
                    counts[token] = hit
        missing = [t for t in dict.fromkeys(by_word.values()) if t not in counts]
        if missing:
            bound = cap if is_postgres(conn) else 0
            if is_postgres(conn):
                found = pg_fts.doc_counts(conn, table, missing, bound)
            else:
                marks = ",".join("?" * len(missing))
                found = dict(conn.execute(f"SELECT term, doc FROM {table}_fts_v WHERE term "
                                          f"IN ({marks})", missing).fetchall())
            with self._lock:
                if len(self._cache) + len(missing) > self.max_entries:
                    self._cache.clear()
                for token in missing:
                    counts[token] = int(found.get(token, 0))
                    self._cache[(table, token)] = (now, counts[token], bound)
        return {w: counts[t] for w, t in by_word.items()}

    def df(self, conn: Connection, table: str, tenant: str, word: str) -> int:
        return self.dfs(conn, table, tenant, (word,)).get(word, 0)

    def tenant_rows(self, conn: Connection, table: str, tenant: str) -> int:
        """Rows of ``tenant`` in ``table``'s index (``fts_stats``), cached as the frequencies
        it is compared with are (a search's bm25 reads its own, exact: ``ranked_ids``); on
        the Postgres primary each lookup is a round trip."""
        key = (table, f"rows {tenant}")  # a token has no space: no clash with one
        now = time.monotonic()
        with self._lock:
            hit = self._cached(key, now, 0)
        if hit is not None:
            return hit
        rows = fts_index.tenant_stats(conn, table, tenant)[0]
        with self._lock:
            self._cache[key] = (now, rows, 0)
        return rows


class TermCounts(Protocol):
    """Where ``plan_terms`` reads a tenant's counts: ``TermStats`` (the store's, cached) or
    a tenant's held postings (``recall.resident``, exact)."""

    def dfs(self, conn: Connection, table: str, tenant: str, words: Sequence[str],
            cap: int = 0) -> dict[str, int]: ...

    def tenant_rows(self, conn: Connection, table: str, tenant: str) -> int: ...


class HeldPostings(TermCounts, Protocol):
    """A tenant's postings and vectors held in the process (``recall.resident.HeldTenant``).
    """

    def holds(self, table: str) -> bool: ...

    def ranked_ids(self, table: str, plan: TermPlan, window: int) -> list[int]: ...

    def holds_vectors(self, table: str) -> bool: ...

    def nearest(self, table: str, vector: Any, k: int) -> list[tuple[int, float]]: ...

    def stored_vectors(self, table: str, ids: Sequence[int]) -> list[Any]: ...


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


def plan_terms(conn: Connection, stats: TermCounts | None, table: str, terms: tuple[str, ...],
               common_df: int, rank_budget: int = 0, tenant: str = "",
               local_fraction: float = 0.0) -> TermPlan:
    """Split ``terms`` into the ones ranked exactly and the rest (``TermPlan``), by their
    frequencies among ``tenant``'s rows:

    - a term in ``common_df`` rows or more, or in ``local_fraction`` of the tenant's rows
      (its own stopwords, such as the name of whoever speaks in every turn), is left out:
      it barely moves bm25, and the entity bridge and dense search still see it; when every
      term is like that, they are all ``other`` (only their newest matches are ranked);
    - of the rest, the rarest are ``essential`` while their matches add up to at most
      ``rank_budget`` rows (at least one term); the others are ``other``.

    ``common_df`` or ``rank_budget`` of 0 turns that bound off.
    """
    if stats is None or common_df <= 0 or not terms:
        return TermPlan(terms)
    rows = stats.tenant_rows(conn, table, tenant) if local_fraction > 0 else 0
    local_cap = (max(1, int(rows * local_fraction)) if rows >= MIN_TENANT_ROWS_FOR_LOCAL
                 else None)
    # A term this common is left out whatever its exact count: it is counted no further.
    dfs = stats.dfs(conn, table, tenant, terms, min(common_df, local_cap or common_df))
    kept = sorted((t for t in terms if t in dfs and dfs[t] < common_df
                   and (local_cap is None or dfs[t] < local_cap)), key=lambda t: dfs[t])
    if not kept:
        return TermPlan((), tuple(t for t in terms if t in dfs))
    chosen: list[str] = []
    total = 0
    for t in kept:
        if chosen and rank_budget > 0 and total + dfs[t] > rank_budget:
            break
        chosen.append(t)
        total += dfs[t]
    return TermPlan(tuple(t for t in terms if t in chosen),
                    tuple(t for t in terms if t in kept and t not in chosen))


# What a search reads, each statement only the tenant's tokens (``json_each(?)``: the rows
# being ranked, as a JSON array). A token's instances come in row order, one per occurrence.
_POSTINGS = ("WITH q(n, tok) AS (VALUES {values}) SELECT q.n, i.doc, z.sz FROM q "
             "CROSS JOIN {t}_fts_i i ON i.term = q.tok "
             "CROSS JOIN {t}_fts_docsize z ON z.id = i.doc")
# Rows holding one of the other tokens and no essential one, newest first: FTS5 walks the
# doclists from their ends in C and stops after ``LIMIT`` rows.
_NEWEST = ("SELECT f.rowid, z.sz FROM (SELECT rowid FROM {t}_fts WHERE {t}_fts MATCH ? "
           "ORDER BY rowid DESC LIMIT ?) f CROSS JOIN {t}_fts_docsize z ON z.id = f.rowid")
# An other token's instances in the ranked rows only (its doclist is walked in C; no row
# outside the ranked ones comes back to Python), and its document frequency.
_POSTINGS_IN = ("SELECT doc FROM {t}_fts_i WHERE term = ? "
                "AND doc IN (SELECT value FROM json_each(?))")
_DF = "SELECT doc FROM {t}_fts_v WHERE term = ?"
# The same two lists ranked in C (``db/bm25.c``: ``mnemo_bm25`` scores a row over the first
# ``n`` phrases of the MATCH expression with the tenant's N and average length): the rows
# of an essential token, then the newest ``window`` rows of the other tokens alone.
_RANK_C = ("SELECT rowid FROM {t}_fts WHERE {t}_fts MATCH :match "
           "ORDER BY mnemo_bm25({t}_fts, :rows, :avgdl, :n) DESC, rowid DESC")
_FILL_C = ("SELECT rowid FROM (SELECT rowid, mnemo_bm25({t}_fts, :rows, :avgdl, :n) AS s "
           "FROM {t}_fts WHERE {t}_fts MATCH :match ORDER BY rowid DESC LIMIT :window) "
           "ORDER BY s DESC, rowid DESC")


def _phrases(tokens: Sequence[str]) -> str:
    """An FTS5 expression for any of ``tokens`` (letters and digits only: quoting is
    enough)."""
    return "(" + " OR ".join(f'"{t}"' for t in tokens) + ")"


def _idf(rows: int, df: int) -> float:
    idf = math.log((rows - df + 0.5) / (df + 0.5))
    return idf if idf > 0 else MIN_IDF  # as FTS5 floors it


def ranked_ids(conn: Connection, table: str, tenant: str, plan: TermPlan,
               window: int) -> list[int]:
    """The tenant's rows matching ``plan``, best first: every row matching an essential term
    by bm25 over all the plan's terms, then (the best of) the newest ``window`` rows matching
    only other terms, by bm25 over those. Ties: newest first (FTS5 would put the oldest
    first; for a memory the newer of two equal matches is the likelier answer).

    bm25 is computed as FTS5 computes it (k1 1.2, b 0.75, idf floored at 1e-6, the same
    arithmetic) but with the tenant's N and average length (``fts_stats``) and the tenant's
    document frequencies (a token is the tenant's own): an essential token's from its
    instances, an other token's from its whole doclist. Only the ranked rows come back to
    Python, from FTS5 or, on the Postgres primary, from its postings (``pg_fts.postings``):
    the same rows, frequencies and lengths, so the same scores and order; or, on SQLite
    with mnemo's extension loaded, ranked in C (``_ranked_in_c``), the same order again."""
    by_word = word_tokens(tenant, (*plan.essential, *plan.other))
    essential = list(dict.fromkeys(by_word[w] for w in plan.essential if w in by_word))
    others = [t for t in dict.fromkeys(by_word.values()) if t not in essential]
    if not (essential or others):
        return []
    if is_postgres(conn):  # one statement, the tenant's statistics included
        found, lengths, first, (rows, total) = pg_fts.postings(conn, table, tenant, essential,
                                                               others, window)
        return _bm25_order(found, lengths, first, rows, total, int)
    rows, total = fts_index.tenant_stats(conn, table, tenant)
    if rows <= 0:
        return []
    if getattr(conn, BM25_LOADED, False):
        return _ranked_in_c(conn, table, essential, others, window, rows, total)
    found_s, sizes, first = _fts5_postings(conn, table, essential, others, window)
    return _bm25_order(found_s, sizes, first, rows, total, fts_index.doc_length)


def _fts5_postings(conn: Connection, table: str, essential: list[str], others: list[str],
                   window: int) -> tuple[list[tuple[int, dict[int, int]]], dict[int, bytes],
                                         set[int]]:
    """``pg_fts.postings`` from FTS5: per token its document frequency and {row: tf} in the
    ranked rows, the ranked rows' ``_docsize`` values, the rows holding an essential token."""
    size: dict[int, bytes] = {}  # ranked row -> its _docsize value
    found: list[tuple[int, dict[int, int]]] = []  # per token: df, {row: tf}
    if essential:  # one statement: a feedback round searches tens of tokens
        per_token: list[dict[int, int]] = [{} for _ in essential]
        values = ",".join(f"({i}, ?)" for i in range(len(essential)))
        for n, doc, sz in conn.execute(_POSTINGS.format(t=table, values=values), essential):
            tfs = per_token[n]
            tfs[doc] = tfs.get(doc, 0) + 1
            size[doc] = sz
        found += [(len(tfs), tfs) for tfs in per_token]
    first = set(size)
    if others and window > 0:
        match = _phrases(others) + (f" NOT {_phrases(essential)}" if essential else "")
        size.update(conn.execute(_NEWEST.format(t=table), (match, window)))
    if others and size:
        docs = json.dumps(list(size))
        for token in others:
            in_ranked: dict[int, int] = {}
            for (doc,) in conn.execute(_POSTINGS_IN.format(t=table), (token, docs)):
                in_ranked[doc] = in_ranked.get(doc, 0) + 1
            df = conn.execute(_DF.format(t=table), (token,)).fetchone()
            found.append((int(df[0]) if df else 0, in_ranked))
    return found, size, first


def _ranked_in_c(conn: Connection, table: str, essential: list[str], others: list[str],
                 window: int, rows: int, total: int) -> list[int]:
    """``ranked_ids`` on SQLite, ranked by FTS5 in C (``_RANK_C``, ``_FILL_C``): the same
    rows, scores and order as ``_fts5_postings`` and ``_bm25_order`` give, only the ids
    come back. The first statement matches the rows of an essential token; the other
    tokens are phrases of its expression that match only where an essential one does, so
    they add to those rows' scores and bring in no row. A token's document frequency is
    its doclist's (FTS5's phrase query), as ``_fts5_postings`` counts an essential
    token's from its instances and an other token's from ``fts5vocab``."""
    avgdl = total / rows if total > 0 else 1.0
    out: list[int] = []
    if essential:
        rare = _phrases(essential)
        match = f"{rare} OR ({_phrases(others)} AND {rare})" if others else rare
        out += [r[0] for r in conn.execute(_RANK_C.format(t=table), {
            "match": match, "rows": rows, "avgdl": avgdl, "n": len(essential) + len(others)})]
    if others and window > 0:
        match = _phrases(others) + (f" NOT {_phrases(essential)}" if essential else "")
        out += [r[0] for r in conn.execute(_FILL_C.format(t=table), {
            "match": match, "rows": rows, "avgdl": avgdl, "n": len(others), "window": window})]
    return out


def _bm25_order(found: list[tuple[int, dict[int, int]]], sizes: Mapping[int, S],
                first: set[int], rows: int, total: int, length: Callable[[S], int]
                ) -> list[int]:
    """The ranked rows by bm25 (``found``: per token its df and {row: tf}; ``sizes``: a
    row's length as ``length`` reads it), the rows of ``first`` first, ties newest first."""
    if not sizes or rows <= 0:
        return []
    avgdl = total / rows if total > 0 else 1.0
    norms: dict[S, float] = {}  # size value -> its length term (few distinct)
    for sz in set(sizes.values()):
        norms[sz] = K1 * (1 - B + B * length(sz) / avgdl)
    norm = {doc: norms[sz] for doc, sz in sizes.items()}
    score: dict[int, float] = {}
    get = score.get
    for df, tfs in found:
        idf = _idf(rows, df)
        for doc, n in tfs.items():
            score[doc] = get(doc, 0.0) + idf * (n * K1_PLUS_1 / (n + norm[doc]))
    # Sorted as tuples (compared in C, no key function per row): the rows of ``first``
    # first, then by score, ties newest first.
    head = sorted([(-s, -doc) for doc, s in score.items() if doc in first])
    tail = sorted([(-s, -doc) for doc, s in score.items() if doc not in first])
    return [-doc for _, doc in head] + [-doc for _, doc in tail]


def fts(conn: Connection, kind: str, scope: Scope, terms: tuple[str, ...], k: int, *,
        stats: TermStats | None = None, common_df: int = 0, rank_budget: int = 0,
        local_fraction: float = 0.0, rare_only: bool = False,
        pool: Mapping[tuple[str, int], Candidate] | None = None,
        held: HeldPostings | None = None) -> list[Candidate]:
    """Visible rows of ``kind`` of the scope's tenant matching any of ``terms``, best first
    by the tenant's bm25, with the ranking work bounded by ``plan_terms``: every row matching
    a rare (``essential``) term is ranked over all kept terms; rows matching only the more
    common terms follow, the best of the newest of their matches. ``rare_only``: the
    essential terms alone (for many broad terms, such as a feedback round's). ``pool``: rows
    loaded already (``load_first``). ``held``: the tenant's postings held in the process
    (``recall.resident``): the same plan and ids from them, without FTS5 statements (its
    counts are exact, as ``stats`` gives them when its cache is fresh).
    """
    if not terms or k <= 0:
        return []
    table = TABLES[kind]
    held = held if held is not None and held.holds(table) else None
    plan = plan_terms(conn, held or stats, table, terms, common_df, rank_budget,
                      scope.tenant, local_fraction)
    if rare_only:
        plan = TermPlan(plan.essential)
    window = min(rank_budget or common_df, FILL_WINDOW * k) if plan.other else 0
    ids = (held.ranked_ids(table, plan, window) if held is not None
           else ranked_ids(conn, table, scope.tenant, plan, window))
    return load_first(conn, kind, scope, ids, k, pool)
