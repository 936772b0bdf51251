"""Pseudo-relevance feedback: a second search seeded by the best hits of the first.

A question joining several memories ("what do X's kids like?") matches one of them well and
the others only through what they share with it (a name, a place, a rare word), not with the
question. So the best ``seeds`` episodes of the first round seed two more lists:

- ``feedback_fts``: bm25 over the seeds' own words: the rarest of them, within the round's
  ranking budget (tenant stopwords and common terms are left out as for any FTS search;
  the question's terms count like the seeds', so the second round still leans towards the
  question);
- ``feedback_dense``: the nearest episodes to the query vector plus ``beta`` times the mean
  of the seeds' stored vectors (Rocchio), normalised.

The seeds themselves are left out of both lists (they are ranked already). Both lists weigh
less than the first round's in fusion. Only the ``multi_hop`` preset runs the round
(``RecallStrategy.feedback_seeds``): with its ranks counting only for what no direct list
found, it changed no question's top-10 evidence on either benchmark and cost a sixth of a
recall.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memory_core.db.sqlite import Connection
from memory_core.recall import search
from memory_core.recall.candidates import Candidate, Scope
from memory_core.recall.query import MAX_TERMS, query_terms
from memory_core.vectors import stored_vector


def seed_terms(query: tuple[str, ...], seeds: Sequence[Candidate]) -> tuple[str, ...]:
    """The query's terms, then the seeds' words (best seed first), at most ``MAX_TERMS``."""
    words: dict[str, None] = dict.fromkeys(query)
    for cand in seeds:
        for w in _seed_words(cand.text):
            words.setdefault(w, None)
    return tuple(words)[:MAX_TERMS]


@functools.lru_cache(maxsize=4096)
def _seed_words(text: str) -> tuple[str, ...]:
    """A seed's words without numbers (days and years of the "[8 May 2023]" prefix, counts);
    cached: the best episodes of a tenant seed many of its recalls."""
    return tuple(w for w in query_terms(text) if not w.isdigit())


def fts(conn: Connection, scope: Scope, query: tuple[str, ...], seeds: Sequence[Candidate], k: int,
        *, stats: search.TermStats | None, common_df: int, rank_budget: int,
        local_fraction: float,
        pool: Mapping[tuple[str, int], Candidate] | None = None,
        held: search.HeldPostings | None = None) -> list[Candidate]:
    if not seeds or k <= 0:
        return []
    exclude = {c.key for c in seeds}
    found = search.fts(conn, "episode", scope, seed_terms(query, seeds), k + len(exclude),
                       stats=stats, common_df=common_df, rank_budget=rank_budget,
                       local_fraction=local_fraction, rare_only=True, pool=pool, held=held)
    return [c for c in found if c.key not in exclude][:k]


def stored_vectors(conn: Connection, table: str | None, ids: Sequence[int]) -> list[np.ndarray]:
    if table is None or not ids:
        return []
    rows = conn.execute(f"SELECT rowid, embedding FROM {table} WHERE rowid IN "
                        f"({','.join('?' * len(ids))})", [int(i) for i in ids]).fetchall()
    # In row id order (as sqlite-vec gives them, and as held vectors are read): the seeds'
    # mean is a float sum, and its value depends on the order.
    return [stored_vector(r[1]) for r in sorted(rows) if r[1] is not None]


def dense(conn: Connection, index: Any, scope: Scope, vector: np.ndarray,
          seeds: Sequence[Candidate], k: int, beta: float,
          pool: Mapping[tuple[str, int], Candidate] | None = None,
          held: search.HeldPostings | None = None) -> list[Candidate]:
    if not seeds or k <= 0:
        return []
    ids = [c.row_id for c in seeds if c.kind == "episode"]
    if held is not None and held.holds_vectors("episodes"):  # the generation it holds
        seen = held.stored_vectors("episodes", ids)
    else:
        seen = stored_vectors(conn, index._active_table(conn, "episodes"), ids)
    if not seen:
        return []
    q = np.asarray(vector, dtype=np.float32)
    q = q / (np.linalg.norm(q) or 1.0)
    mean = np.mean(np.stack(seen), axis=0)
    mixed = q + beta * mean / (np.linalg.norm(mean) or 1.0)
    mixed = (mixed / (np.linalg.norm(mixed) or 1.0)).astype(np.float32)
    exclude = {c.key for c in seeds}
    found = search.dense(conn, index, "episode", scope, mixed, k + len(exclude), pool, held)
    return [c for c in found if c.key not in exclude][:k]
