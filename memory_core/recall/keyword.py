"""Keyword search: bm25 over one tenant's rows, with that tenant's own statistics.

The FTS5 indexes hold every token in its tenant's namespace (``memory_core.db.fts``), so a
term's postings are the tenant's matches and nothing else: no other tenant's row is walked,
and none can change a tenant's ranking. bm25 is computed here, as FTS5 computes it (k1 1.2,
b 0.75, idf floored at 1e-6), but from the tenant's N, average length and document
frequencies: the postings and term frequencies come from the index's ``fts5vocab``
instance view, the lengths from its ``_docsize`` table, N and the total length from
``fts_stats``. FTS5's own ``bm25()`` would take N and the average length from the whole
index, that is from every tenant.

The work is bounded by ``plan_terms`` (at most about ``rank_budget`` rows ranked exactly; a
term in ``common_df`` rows or more, or in ``local_fraction`` of the tenant's rows, is left
out). Every statement is a fixed string with bound parameters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from memory_core.db import fts as fts_index
from memory_core.db import pg_fts
from memory_core.db.dialect import is_postgres
from memory_core.db.sqlite import Connection
from memory_core.recall.candidates import TABLES, Candidate, Scope, load

FTS_OVERSAMPLE = 3
# Rows matching only common terms are ranked among this many times ``k`` of their newest
# matches (they come after every row matching a rarer term).
FILL_WINDOW = 2
# Below this many rows a tenant has no tenant-local stopwords (every word is "frequent").
MIN_TENANT_ROWS_FOR_LOCAL = 100
K1, B = 1.2, 0.75  # FTS5's bm25 constants
MIN_IDF = 1e-6  # FTS5 floors idf here (a term in more than half the rows)
_LOAD_PAGE = 64  # ranked ids loaded per statement past the first ``k``


def in_order(found: dict[int, Candidate], ids: Sequence[int]) -> list[Candidate]:
    return [found[i] for i in dict.fromkeys(ids) if i in found]


def load_first(conn: Connection, kind: str, scope: Scope, ids: Sequence[int],
               k: int) -> list[Candidate]:
    """The first ``k`` visible rows of ``ids``, in order: loads ``k`` ids, then further
    pages only while some were hidden (other times, archived, superseded)."""
    found = in_order(load(conn, kind, scope, ids[:k]), ids[:k])
    start = k
    while len(found) < k and start < len(ids):
        page = ids[start:start + max(_LOAD_PAGE, k - len(found))]
        found += in_order(load(conn, kind, scope, page), page)
        start += len(page)
    return found[:k]


def word_tokens(tenant: str, words: Sequence[str]) -> dict[str, str]:
    """word -> the indexed token a search for it looks up (words with none are left out)."""
    prefix = fts_index.tenant_prefix(tenant)
    out: dict[str, str] = {}
    for w in words:
        toks = fts_index.tokens(w)
        if toks:
            out.setdefault(w, prefix + toks[0])
    return out


class TermStats:
    """Document frequencies of a tenant's tokens per FTS table, cached for ``ttl`` seconds
    (one per database: ``Memory`` owns one). A token names its tenant, so a cached count is
    that tenant's; it moves only with the tenant's own writes, and a stale one only shifts
    which terms count as common."""

    def __init__(self, ttl: float = 300.0, max_entries: int = 50_000) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._cache: dict[tuple[str, str], tuple[float, int]] = {}  # time, count
        self._lock = threading.Lock()

    def dfs(self, conn: Connection, table: str, tenant: str,
            words: Sequence[str]) -> dict[str, int]:
        """Rows of ``tenant`` in ``table`` matching each of ``words`` (exact)."""
        by_word = word_tokens(tenant, words)
        now = time.monotonic()
        counts: dict[str, int] = {}
        with self._lock:
            for token in by_word.values():
                hit = self._cache.get((table, token))
                if hit is not None and now - hit[0] < self.ttl:
                    counts[token] = hit[1]
        missing = [t for t in dict.fromkeys(by_word.values()) if t not in counts]
        if missing:
            marks = ",".join("?" * len(missing))
            found = dict(conn.execute(f"SELECT term, doc FROM {table}_fts_v WHERE term IN "
                                      f"({marks})", missing).fetchall())
            with self._lock:
                if len(self._cache) + len(missing) > self.max_entries:
                    self._cache.clear()
                for token in missing:
                    counts[token] = int(found.get(token, 0))
                    self._cache[(table, token)] = (now, counts[token])
        return {w: counts[t] for w, t in by_word.items()}

    def df(self, conn: Connection, table: str, tenant: str, word: str) -> int:
        return self.dfs(conn, table, tenant, (word,)).get(word, 0)

    @staticmethod
    def tenant_rows(conn: Connection, table: str, tenant: str) -> int:
        """Rows of ``tenant`` in ``table``'s index (``fts_stats``: exact, one lookup)."""
        return fts_index.tenant_stats(conn, table, tenant)[0]


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
    dfs = stats.dfs(conn, table, tenant, terms)
    rows = stats.tenant_rows(conn, table, tenant) if local_fraction > 0 else 0
    local_cap = (max(1, int(rows * local_fraction)) if rows >= MIN_TENANT_ROWS_FOR_LOCAL
                 else None)
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


# A row's length in tokens, from its FTS5 ``_docsize`` value (one column: one SQLite
# varint, read from its hex digits; a row of 2 million tokens or more would need a 4th byte).
_HEX = "'0123456789ABCDEF'"
_BYTE = ("((instr({h}, substr(hex(z.sz), {i}, 1)) - 1) * 16 + "
         "instr({h}, substr(hex(z.sz), {j}, 1)) - 1)")
_B0, _B1, _B2 = (_BYTE.format(h=_HEX, i=2 * n + 1, j=2 * n + 2) for n in range(3))
_LENGTH = (f"(CASE length(z.sz) WHEN 1 THEN {_B0} WHEN 2 THEN (({_B0} & 127) << 7) | {_B1} "
           f"ELSE (({_B0} & 127) << 14) | (({_B1} & 127) << 7) | {_B2} END)")

# bm25 of every row of the tenant holding one of the searched tokens (``q``: token, whether
# it is essential): term frequencies from the tokens' instances (``_i``), document counts
# from those, lengths from ``_docsize``; N (?1) and the average length (?2) are parameters.
_SCORED = """
WITH q(tok, ess) AS (VALUES {values}),
p AS MATERIALIZED (SELECT q.tok AS tok, q.ess AS ess, i.doc AS doc, count(*) AS tf
  FROM q CROSS JOIN {t}_fts_i i ON i.term = q.tok GROUP BY q.tok, i.doc),
w AS MATERIALIZED (SELECT tok, max(ln((?1 - count(*) + 0.5) / (count(*) + 0.5)), {min_idf})
  AS idf FROM p GROUP BY tok),
s AS MATERIALIZED (SELECT p.doc AS doc, max(p.ess) AS ess,
    sum(w.idf * p.tf * ({k1} + 1) / (p.tf + {k1} * (1 - {b} + {b} * {length} / ?2))) AS score
  FROM p JOIN w ON w.tok = p.tok JOIN {t}_fts_docsize z ON z.id = p.doc GROUP BY p.doc)
"""
# Every row matching an essential token, by score; ties newest first (FTS5 would put the
# oldest first; for a memory the newer of two equal matches is the likelier answer).
_RANKED = "SELECT doc FROM s ORDER BY score DESC, doc DESC"
# The same, then the newest ?3 rows matching only other tokens, by score.
_RANKED_AND_FILL = """SELECT doc FROM (
  SELECT doc, score, 0 AS part FROM s WHERE ess
  UNION ALL SELECT doc, score, 1 FROM (
    SELECT doc, score FROM s WHERE NOT ess ORDER BY doc DESC LIMIT ?3))
ORDER BY part, score DESC, doc DESC"""


def ranked_ids(conn: Connection, table: str, tenant: str, plan: TermPlan,
               window: int) -> list[int]:
    """The tenant's rows matching ``plan``, best first: every row matching an essential term
    by bm25 over all the plan's terms, then (the best of) the newest ``window`` rows matching
    only other terms, by bm25 over those."""
    by_word = word_tokens(tenant, (*plan.essential, *plan.other))
    essential = {by_word[w] for w in plan.essential if w in by_word}
    searched = list(dict.fromkeys(by_word.values()))
    if not searched:
        return []
    rows, total = fts_index.tenant_stats(conn, table, tenant)
    if rows <= 0:
        return []
    if is_postgres(conn):  # the same bm25 over the Postgres primary's postings
        return pg_fts.ranked_ids(conn, table, searched, essential, rows, total, window,
                                 k1=K1, b=B, min_idf=MIN_IDF)
    fill = window > 0 and len(essential) < len(searched)
    values = ",".join(f"(?{4 + 2 * i}, ?{5 + 2 * i})" for i in range(len(searched)))
    sql = _SCORED.format(values=values, t=table, k1=K1, b=B, min_idf=MIN_IDF,
                         length=_LENGTH) + (_RANKED_AND_FILL if fill else _RANKED)
    params = [rows, total / rows if total > 0 else 1.0, max(0, window),
              *(p for t in searched for p in (t, int(t in essential)))]
    return [r[0] for r in conn.execute(sql, params)]


def fts(conn: Connection, kind: str, scope: Scope, terms: tuple[str, ...], k: int, *,
        stats: TermStats | None = None, common_df: int = 0, rank_budget: int = 0,
        local_fraction: float = 0.0, rare_only: bool = False) -> list[Candidate]:
    """Visible rows of ``kind`` of the scope's tenant matching any of ``terms``, best first
    by the tenant's bm25, with the ranking work bounded by ``plan_terms``: every row matching
    a rare (``essential``) term is ranked over all kept terms; rows matching only the more
    common terms follow, the best of the newest of their matches. ``rare_only``: the
    essential terms alone (for many broad terms, such as a feedback round's).
    """
    if not terms or k <= 0:
        return []
    table = TABLES[kind]
    plan = plan_terms(conn, stats, table, terms, common_df, rank_budget, scope.tenant,
                      local_fraction)
    if rare_only:
        plan = TermPlan(plan.essential)
    window = min(rank_budget or common_df, FILL_WINDOW * k) if plan.other else 0
    ids = ranked_ids(conn, table, scope.tenant, plan, window)
    return load_first(conn, kind, scope, ids, k)
