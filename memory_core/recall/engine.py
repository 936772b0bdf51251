"""One recall: gather the lists, walk the ego graph, fuse, cut to budget, explain.

Reads the state db only. Degrades instead of failing: with the embedder mismatched, the
embedder broken or a vector table unreadable, recall is keyword-only and says why; an
unreadable keyword index drops that list and says so. Only bad input raises
(``InvalidInputError``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import structlog

from memory_core.clock import ensure_utc, from_db, parse_iso, to_db, utcnow
from memory_core.db.sqlite import sqlite_module
from memory_core.errors import EmbedderError, InvalidInputError
from memory_core.recall import context, feedback, graph, search
from memory_core.recall.candidates import Candidate, Scope, load, merge
from memory_core.recall.explain import build_explanation
from memory_core.recall.fusion import Budget, Scorer, apply_budget, diversify
from memory_core.recall.query import PreparedQuery, prepare_query
from memory_core.recall.result import RecallItem, RecallResult
from memory_core.recall.strategy import RecallStrategy
from memory_core.tenants import validate_tenant
from memory_core.vectors import VectorIndex

log = structlog.get_logger(__name__)
MAX_SESSION_ID_CHARS = 256
PPR_SEED_TOP = 5


@dataclass
class RecallRun:
    """Working state of one recall (not shared between calls)."""

    conn: Any
    index: VectorIndex
    strategy: RecallStrategy
    scope: Scope
    query: PreparedQuery
    session_id: str | None
    pool: dict[tuple[str, int], Candidate] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)
    keyword_only: bool = False
    used_turn_fallback: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    ppr: dict[Any, float] = field(default_factory=dict)
    stats: search.TermStats | None = None
    vector: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.scorer = Scorer(self.strategy, reference=from_db(self.scope.at),
                             session_id=self.session_id, time=self.query.time,
                             query_text=self.query.text)

    def rank(self, ppr: dict[Any, float] | None = None, *,
             explain: bool = False) -> list[Candidate]:
        """The pool scored and sorted, best first (``ppr``: the walk's scores, default the
        run's; ``explain``: set every candidate's components too)."""
        return self.scorer.rank(self.pool.values(), self.ppr if ppr is None else ppr,
                                explain=explain)

    def add(self, list_name: str, fetch: Callable[[], list[Candidate]], *,
            dense: bool = False) -> None:
        """Run one list; a database error drops the list (and dense search) with a reason."""
        try:
            merge(self.pool, list_name, fetch())
        except sqlite_module().Error as e:
            if dense:
                self.keyword_only = True
                self.degraded.append(f"vector index unreadable ({type(e).__name__}): run "
                                     "`mnemo memory reindex`")
            else:
                self.degraded.append(f"{list_name} unavailable ({type(e).__name__})")
            log.warning("recall_list_failed", list=list_name, error=type(e).__name__)


def resolve_as_of(as_of: datetime | str | None) -> str | None:
    if as_of is None:
        return None
    if isinstance(as_of, str):
        return to_db(parse_iso(as_of, "as_of"))
    return to_db(ensure_utc(as_of, "as_of"))


def resolve_session(session_id: object) -> str | None:
    if session_id is None:
        return None
    if not isinstance(session_id, str) or not 0 < len(session_id) <= MAX_SESSION_ID_CHARS:
        raise InvalidInputError(f"session_id must be a non-empty str of at most "
                                f"{MAX_SESSION_ID_CHARS} characters, or None")
    return session_id


def resolve_budget(budget: Budget | int | None, items: int, tokens: int) -> Budget:
    if budget is None:
        return Budget(items, tokens)
    if isinstance(budget, Budget):
        if budget.items < 1 or budget.tokens < 1:
            raise InvalidInputError("budget items and tokens must be at least 1")
        return budget
    if isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1:
        return Budget(budget, tokens)
    raise InvalidInputError("budget must be a Budget(items, tokens), a positive item count "
                            "or None")


def _query_vector(run: RecallRun) -> np.ndarray | None:
    """The query embedding, or None with keyword_only set and the reason recorded."""
    if not run.query.text:
        return None
    started = time.perf_counter()
    try:
        if not run.index.dense_enabled(run.conn):
            run.keyword_only = True
            run.degraded.append("embedder mismatch or no vector index: dense search is off "
                                "until `mnemo memory reindex`")
            return None
        if not run.index.embedder.semantic and not run.strategy.dense_with_keyword_embedder:
            return None  # a keyword-grade embedder's neighbours only repeat FTS, noisily
        vector = run.index.embedder.embed([run.query.text])[0]
    except EmbedderError as e:
        run.keyword_only = True
        run.degraded.append(f"embedder failed ({type(e).__name__})")
        return None
    except sqlite_module().Error as e:
        run.keyword_only = True
        run.degraded.append(f"vector index unreadable ({type(e).__name__})")
        return None
    finally:
        run.timings["embed_ms"] = (time.perf_counter() - started) * 1000
    return vector


def _gather(run: RecallRun) -> None:
    conn, scope, strat, terms = run.conn, run.scope, run.strategy, run.query.terms
    entities = search.query_entities(conn, scope.tenant, run.query.text)

    def fts(kind: str, list_name: str) -> list[Candidate]:
        return search.fts(conn, kind, scope, terms, strat.k_for(list_name), stats=run.stats,
                          common_df=strat.fts_common_df, rank_budget=strat.fts_rank_budget,
                          local_fraction=strat.fts_tenant_common_fraction)

    run.add("belief_entity",
            lambda: search.beliefs_about(conn, scope, entities, strat.k_for("belief_entity")))
    run.add("belief_fts", lambda: fts("belief", "belief_fts"))
    run.add("episode_fts", lambda: fts("episode", "episode_fts"))
    vector = _query_vector(run)
    if vector is not None:
        for kind in ("belief", "episode"):
            name = f"{kind}_dense"
            run.add(name, lambda k=kind, n=name: search.dense(
                conn, run.index, k, scope, vector, strat.k_for(n)), dense=True)
    run.vector = vector
    if len(run.pool) < strat.turn_fallback_below:
        run.used_turn_fallback = True
        run.add("turn_fts", lambda: fts("turn", "turn_fts"))
    if strat.ppr_enabled and strat.k_for("graph") > 0:
        _walk(run, entities)
    if strat.feedback_seeds > 0:
        _feedback(run)
    if strat.k_for("neighbour") > 0 and strat.weight_for("neighbour") > 0:
        _neighbours(run)


def _neighbours(run: RecallRun) -> None:
    ranked = run.rank()
    top = [c for c in ranked if c.kind in ("episode", "turn")][: run.strategy.k_for("neighbour")]
    run.add("neighbour", lambda: [run.pool.get(c.key, c) for c in context.neighbours(
        run.conn, run.scope, top, run.strategy.neighbour_span)])


def _feedback(run: RecallRun) -> None:
    """Second round seeded by the first round's best episodes (recall/feedback.py)."""
    strat = run.strategy
    want_fts = strat.k_for("feedback_fts") > 0 and strat.weight_for("feedback_fts") > 0
    want_dense = (run.vector is not None and strat.k_for("feedback_dense") > 0
                  and strat.weight_for("feedback_dense") > 0)
    if not (want_fts or want_dense):
        return
    started = time.perf_counter()
    ranked = run.rank()
    seeds = [c for c in ranked if c.kind == "episode"][: strat.feedback_seeds]
    if want_fts:
        terms = run.query.terms if strat.feedback_query_terms else ()
        run.add("feedback_fts", lambda: [run.pool.get(c.key, c) for c in feedback.fts(
            run.conn, run.scope, terms, seeds, strat.k_for("feedback_fts"),
            stats=run.stats, common_df=strat.feedback_common_df,
            rank_budget=strat.feedback_rank_budget, max_terms=strat.feedback_max_terms,
            local_fraction=strat.fts_tenant_common_fraction)])
    if want_dense and run.vector is not None:
        vector = run.vector
        run.add("feedback_dense", lambda: [run.pool.get(c.key, c) for c in feedback.dense(
            run.conn, run.index, run.scope, vector, seeds, strat.k_for("feedback_dense"),
            strat.feedback_beta)], dense=True)
    run.timings["feedback_ms"] = (time.perf_counter() - started) * 1000


def _walk(run: RecallRun, entities: list[str]) -> None:
    """Personalised PageRank around the seeds; its best nodes become the ``graph`` list."""
    started = time.perf_counter()
    ranked = run.rank(ppr={})
    try:
        scores = graph.ego_pagerank(run.conn, run.scope, run.strategy, entities,
                                    ranked[:PPR_SEED_TOP])
    except sqlite_module().Error as e:
        run.degraded.append(f"graph walk unavailable ({type(e).__name__})")
        return
    run.ppr = scores
    best = sorted(scores.items(), key=lambda kv: -kv[1])[: run.strategy.k_for("graph")]
    lists: dict[str, list[int]] = {"belief": [], "episode": []}
    for (kind, row_id), _ in best:
        lists[kind].append(row_id)
    loaded = {kind: _load(run, kind, ids) for kind, ids in lists.items()}
    merge(run.pool, "graph", [loaded[k][i] for (k, i), _ in best if i in loaded[k]])
    run.timings["graph_ms"] = (time.perf_counter() - started) * 1000


def _load(run: RecallRun, kind: str, ids: list[int]) -> dict[int, Candidate]:
    found = load(run.conn, kind, run.scope, ids)
    # Reuse pool objects so ranks from every list land on one candidate.
    return {i: run.pool.get((kind, i), c) for i, c in found.items()}


def recall(conn: Any, index: VectorIndex, *, query: object, tenant: object,
           strategy: RecallStrategy, max_query_chars: int, budget: Budget,
           session_id: object = None, as_of: datetime | str | None = None,
           now: datetime | None = None, stats: search.TermStats | None = None,
           ) -> tuple[RecallResult, dict[str, Any]]:
    """Run one recall; returns the result and its explanation (for the recall log)."""
    started = time.perf_counter()
    prepared = prepare_query(query, max_chars=max_query_chars)
    scope = Scope(tenant=validate_tenant(tenant), now=to_db(now or utcnow()),
                  as_of=resolve_as_of(as_of), include_archive=strategy.include_archive)
    run = RecallRun(conn, index, strategy, scope, prepared, resolve_session(session_id),
                    stats=stats)
    _gather(run)
    ranked = run.rank(explain=True)
    ranked = diversify(ranked, strategy.session_diversity)
    kept, reasons = apply_budget(ranked, budget)
    items = tuple(_item(i, c) for i, c in enumerate(kept, start=1))
    run.timings["total_ms"] = (time.perf_counter() - started) * 1000
    result = RecallResult(
        tenant=scope.tenant, items=items, query_digest=prepared.digest, strategy=strategy.name,
        keyword_only=run.keyword_only, degraded_reason="; ".join(run.degraded) or None,
        as_of=scope.as_of, used_turn_fallback=run.used_turn_fallback,
        budget=budget.to_dict(), timings_ms=dict(run.timings))
    explanation = _explanation(run, ranked, reasons, kept, budget)
    return result, explanation


def _explanation(run: RecallRun, ranked: list[Candidate], reasons: dict[tuple[str, int], str],
                 kept: list[Candidate], budget: Budget) -> dict[str, Any]:
    return build_explanation(
        ranked, reasons, kept, as_of=run.scope.as_of, keyword_only=run.keyword_only,
        degraded=run.degraded, budget=budget.to_dict(), session=run.session_id is not None,
        used_turn_fallback=run.used_turn_fallback, terms=len(run.query.terms),
        strategy=run.strategy.to_dict())


def _item(handle: int, cand: Candidate) -> RecallItem:
    return RecallItem(
        handle=handle, item_id=cand.item_id, kind=cand.kind, text=cand.text, score=cand.score,
        components=dict(cand.components), turn_uids=cand.turn_uids,
        occurred_at=cand.occurred_at, session_id=cand.session_id, status=cand.status)
