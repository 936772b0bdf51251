"""One recall: gather the lists, walk the ego graph, fuse, cut to budget, explain.

The beliefs found become the facts (``recall/facts.py``, under their own budget, handles
first); the episodes and turns, fused and cut to the item budget, are the evidence.

Reads the state db only. Degrades instead of failing: with the embedder mismatched, the
embedder broken or a vector table unreadable, recall is keyword-only and says why; an
unreadable keyword index drops that list and says so. Only bad input raises
(``InvalidInputError``, and ``UnknownTenantError`` for a tenant that does not exist).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

import numpy as np
import structlog

from memory_core.clock import ensure_utc, from_db, parse_iso, to_db, utcnow
from memory_core.db.dialect import driver_errors
from memory_core.db.sqlite import Connection, read_snapshot
from memory_core.errors import EmbedderError, InvalidInputError
from memory_core.model.tenants import HUB, require_tenant
from memory_core.recall import context, facts, feedback, graph, search
from memory_core.recall.candidates import Candidate, Scope, load_new, merge
from memory_core.recall.explain import build_explanation
from memory_core.recall.fusion import Budget, Scorer, apply_budget, direct_first, diversify
from memory_core.recall.intent import read_intent
from memory_core.recall.query import PreparedQuery, prepare_query
from memory_core.recall.resident import HeldTenant, Resident
from memory_core.recall.result import RecallItem, RecallResult
from memory_core.recall.strategy import DIRECT_LISTS, RecallStrategy
from memory_core.vectors import VectorIndex

log = structlog.get_logger(__name__)
T = TypeVar("T")
MAX_SESSION_ID_CHARS = 256
PPR_SEED_TOP = 5
# Where each list's time is counted in ``timings_ms`` (``<part>_ms``; the dense lists run
# beside the keyword ones on a helper thread when there is one).
LIST_PARTS = {"belief_fts": "keyword", "episode_fts": "keyword", "turn_fts": "keyword",
              "feedback_fts": "keyword", "belief_dense": "dense", "episode_dense": "dense",
              "feedback_dense": "dense", "belief_entity": "entity", "neighbour": "neighbour"}


@dataclass
class RecallRun:
    """Working state of one recall (not shared between calls)."""

    conn: Connection
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
    held: search.HeldPostings | None = None  # the tenant's rows held in this process
    vector: np.ndarray | None = None
    named: list[str] = field(default_factory=list)  # entities the query names, hub included

    def __post_init__(self) -> None:
        # What the query asks (read once: the facts channel and the speaker component).
        self.intent = read_intent(self.query.text)
        self.scorer = Scorer(self.strategy, reference=from_db(self.scope.at),
                             session_id=self.session_id, time=self.query.time,
                             query_text=self.query.text, whose=self.intent.whose)

    def rank(self, ppr: dict[Any, float] | None = None, *, explain: bool = False,
             evidence_only: bool = False) -> list[Candidate]:
        """The pool scored and sorted, best first (``ppr``: the walk's scores, default the
        run's; ``explain``: set every candidate's components too; ``evidence_only``: leave
        the beliefs out, which the facts channel scores on its own)."""
        pool: Iterable[Candidate] = self.pool.values()
        if evidence_only:
            pool = [c for c in pool if c.kind != "belief"]
        return self.scorer.rank(pool, self.ppr if ppr is None else ppr, explain=explain)

    def add(self, list_name: str, fn: Callable[[], list[Candidate]], *,
            dense: bool = False) -> None:
        """Run one list and merge it (see ``take``)."""
        self.take(fetch(list_name, fn, dense=dense))

    def take(self, fetched: Fetched) -> None:
        """Merge a fetched list; a database error drops the list (and for a dense list,
        dense search) with a reason."""
        part = f"{LIST_PARTS.get(fetched.name, fetched.name)}_ms"
        self.timings[part] = self.timings.get(part, 0.0) + fetched.ms
        if fetched.error is None:
            merge(self.pool, fetched.name, fetched.found)
            return
        if fetched.dense:
            self.keyword_only = True
            self.degraded.append(f"vector index unreadable ({fetched.error}): run "
                                 "`mnemo memory reindex`")
        else:
            self.degraded.append(f"{fetched.name} unavailable ({fetched.error})")
        log.warning("recall_list_failed", list=fetched.name, error=fetched.error)

    def note_vector(self, qv: QueryVector) -> None:
        self.timings["embed_ms"] = qv.ms
        if qv.degraded:
            self.keyword_only = True
            self.degraded.append(qv.degraded)
        self.vector = qv.vector


@dataclass
class Fetched:
    """One list's outcome: fetched (perhaps on a helper thread), merged by ``take``."""

    name: str
    found: list[Candidate] = field(default_factory=list)
    error: str | None = None  # the database error's class name
    dense: bool = False
    ms: float = 0.0


def fetch(name: str, fn: Callable[[], list[Candidate]], *, dense: bool = False) -> Fetched:
    started = time.perf_counter()
    try:
        found = Fetched(name, fn(), dense=dense)
    except driver_errors() as e:
        found = Fetched(name, error=type(e).__name__, dense=dense)
    found.ms = (time.perf_counter() - started) * 1000
    return found


@dataclass(frozen=True)
class QueryVector:
    """The query embedding, or None with why dense search is off (``degraded``)."""

    vector: np.ndarray | None
    degraded: str | None = None
    ms: float = 0.0


class Helper(Protocol):
    """Runs work on another thread with that thread's own state-db connection (``Memory``
    has one when MNEMO_RECALL_HELPER_THREADS > 0): the query embedding and dense search,
    which release the GIL, beside the caller's keyword search."""

    def submit(self, fn: Callable[[Any], T]) -> Future[T]: ...


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


def resolve_fact_budget(fact_budget: object, default: int) -> int:
    if fact_budget is None:
        return default
    if isinstance(fact_budget, int) and not isinstance(fact_budget, bool) and fact_budget >= 0:
        return fact_budget
    raise InvalidInputError("fact_budget must be a count of facts, 0 or more (0: no facts), "
                            "or None for MNEMO_RECALL_FACT_BUDGET")


def query_vector(conn: Connection, index: VectorIndex, strategy: RecallStrategy,
                 text: str) -> QueryVector:
    """Embed the query for dense search, unless dense search is off (and then why)."""
    if not text:
        return QueryVector(None)
    started = time.perf_counter()

    def off(reason: str | None) -> QueryVector:
        return QueryVector(None, reason, (time.perf_counter() - started) * 1000)

    try:
        if not index.dense_enabled(conn):
            return off("embedder mismatch or no vector index: dense search is off until "
                       "`mnemo memory reindex`")
        if not index.embedder.semantic and not strategy.dense_with_keyword_embedder:
            return off(None)  # a keyword-grade embedder's neighbours only repeat FTS, noisily
        vector = index.embedder.embed([text])[0]
    except EmbedderError as e:
        return off(f"embedder failed ({type(e).__name__})")
    except driver_errors() as e:
        return off(f"vector index unreadable ({type(e).__name__})")
    return QueryVector(vector, None, (time.perf_counter() - started) * 1000)


def _gather(run: RecallRun, helper: Helper | None = None) -> None:
    strat = run.strategy
    run.named = _first_round(run, helper)
    entities = [e for e in run.named if e != HUB]
    if len(run.pool) < strat.turn_fallback_below:
        run.used_turn_fallback = True
        run.add("turn_fts", lambda: _fts(run, "turn", "turn_fts"))
    _second_round(run, entities)
    if strat.k_for("neighbour") > 0 and strat.weight_for("neighbour") > 0:
        _neighbours(run)


def _fts(run: RecallRun, kind: str, list_name: str) -> list[Candidate]:
    strat = run.strategy
    return search.fts(run.conn, kind, run.scope, run.query.terms, strat.k_for(list_name),
                      stats=run.stats, common_df=strat.fts_common_df,
                      rank_budget=strat.fts_rank_budget,
                      local_fraction=strat.fts_tenant_common_fraction, pool=run.pool,
                      held=run.held)


def _first_round(run: RecallRun, helper: Helper | None) -> list[str]:
    """The lists straight from the query. With a semantic embedder, a helper thread (its own
    connection) embeds the query and runs the dense lists while the caller's thread runs the
    entity bridge and the keyword lists: the embedder and SQLite release the GIL, so on two
    cores they overlap. Lists are merged in one fixed order. Returns the entities the query
    names (the hub among them when the query names the user)."""
    strat, scope = run.strategy, run.scope

    def dense_lane(conn: Connection, pool: dict[tuple[str, int], Candidate] | None = None
                   ) -> tuple[QueryVector, list[Fetched]]:
        """``pool``: on the caller's thread the keyword lists are merged by now and their
        rows are not read again; a helper thread runs beside them and reads its own."""
        qv = query_vector(conn, run.index, strat, run.query.text)
        if qv.vector is None:
            return qv, []
        vector = qv.vector

        def dense(kind: str) -> Callable[[], list[Candidate]]:
            return lambda: search.dense(conn, run.index, kind, scope, vector,
                                        strat.k_for(f"{kind}_dense"), pool, run.held)

        return qv, [fetch(f"{kind}_dense", dense(kind), dense=True)
                    for kind in ("belief", "episode")]

    # With a keyword-grade embedder the dense lane does next to nothing: no thread for it
    # (a helper running Python beside the caller only adds waits for the GIL).
    semantic = run.index.embedder.semantic or strat.dense_with_keyword_embedder
    pending = helper.submit(dense_lane) if helper is not None and semantic else None
    conn = run.conn
    named = search.query_entities(conn, scope.tenant, run.query.text, include_hub=True)
    entities = [e for e in named if e != HUB]
    run.add("belief_entity", lambda: search.beliefs_about(conn, scope, entities,
                                                          strat.k_for("belief_entity")))
    run.add("belief_fts", lambda: _fts(run, "belief", "belief_fts"))
    run.add("episode_fts", lambda: _fts(run, "episode", "episode_fts"))
    qv, dense = pending.result() if pending is not None else dense_lane(conn, run.pool)
    run.note_vector(qv)
    for fetched in dense:
        run.take(fetched)
    return named


def _neighbours(run: RecallRun) -> None:
    ranked = run.rank(evidence_only=True)
    top = [c for c in ranked if c.kind in ("episode", "turn")][: run.strategy.k_for("neighbour")]
    run.add("neighbour", lambda: context.neighbours(run.conn, run.scope, top,
                                                    run.strategy.neighbour_span, run.pool))


def _second_round(run: RecallRun, entities: list[str]) -> None:
    """The graph walk and the feedback round, both seeded by the first round's ranking
    (LoCoMo, fastembed: multi-hop R@10 0.455 -> 0.460 against seeding the feedback round
    after the walk)."""
    strat = run.strategy
    walk = strat.ppr_enabled and strat.k_for("graph") > 0
    want_fts = strat.k_for("feedback_fts") > 0 and strat.weight_for("feedback_fts") > 0
    want_dense = (run.vector is not None and strat.k_for("feedback_dense") > 0
                  and strat.weight_for("feedback_dense") > 0)
    feedback_on = strat.feedback_seeds > 0 and (want_fts or want_dense)
    if not (walk or feedback_on):
        return
    ranked = run.rank(ppr={})
    if walk:
        _walk(run, entities, ranked)
    if feedback_on:
        seeds = [c for c in ranked if c.kind == "episode"][: strat.feedback_seeds]
        _feedback(run, seeds, want_fts=want_fts, want_dense=want_dense)


def _feedback(run: RecallRun, seeds: list[Candidate], *, want_fts: bool,
              want_dense: bool) -> None:
    """The second round's searches (recall/feedback.py). Pool objects are reused so ranks
    from every list land on one candidate."""
    started = time.perf_counter()
    strat, scope, conn = run.strategy, run.scope, run.conn
    if want_fts:
        terms = run.query.terms if strat.feedback_query_terms else ()
        run.add("feedback_fts", lambda: feedback.fts(
            conn, scope, terms, seeds, strat.k_for("feedback_fts"), stats=run.stats,
            common_df=strat.feedback_common_df, rank_budget=strat.feedback_rank_budget,
            local_fraction=strat.fts_tenant_common_fraction, pool=run.pool, held=run.held))
    if want_dense and run.vector is not None:
        vector = run.vector
        run.add("feedback_dense", lambda: feedback.dense(
            conn, run.index, scope, vector, seeds, strat.k_for("feedback_dense"),
            strat.feedback_beta, pool=run.pool, held=run.held), dense=True)
    run.timings["feedback_ms"] = (time.perf_counter() - started) * 1000


def _walk(run: RecallRun, entities: list[str], ranked: list[Candidate]) -> None:
    """Personalised PageRank around the seeds; its best nodes become the ``graph`` list."""
    started = time.perf_counter()
    try:
        scores = graph.ego_pagerank(run.conn, run.scope, run.strategy, entities,
                                    ranked[:PPR_SEED_TOP])
    except driver_errors() as e:
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
    # Pool objects are reused (not read again) so ranks from every list land on one candidate.
    return load_new(run.conn, kind, run.scope, ids, run.pool)


def recall(conn: Connection, index: VectorIndex, *, query: object, tenant: object,
           strategy: RecallStrategy, max_query_chars: int, budget: Budget,
           session_id: object = None, as_of: datetime | str | None = None,
           now: datetime | None = None, stats: search.TermStats | None = None,
           helper: Helper | None = None, fact_budget: int = 8,
           resident: Resident | None = None) -> tuple[RecallResult, Callable[[], str]]:
    """Run one recall; returns the result and a function building its explanation's JSON
    for the recall log (``explain.build_explanation``; ``Memory.recall`` calls it, and the
    log writer writes it in the background). ``fact_budget``: facts at most (0: no facts
    channel). ``resident``: tenants' postings, vectors and rows held in the process (the
    lists, the walk and the row loads read them: the same rows in the same order as from
    the store; ``recall.resident``)."""
    started = time.perf_counter()
    prepared = prepare_query(query, max_chars=max_query_chars)
    # Every list reads the same state of the store (a helper thread's dense lane, when
    # MNEMO_RECALL_HELPER_THREADS gives one, reads on its own connection).
    with read_snapshot(conn):
        tenant_id = require_tenant(conn, tenant)
        held_at = time.perf_counter()
        dense = index.embedder.semantic or strategy.dense_with_keyword_embedder
        held = _held(resident, conn, tenant_id, index if dense else None)
        held_ms = (time.perf_counter() - held_at) * 1000
        scope = Scope(tenant=tenant_id, now=to_db(now or utcnow()),
                      as_of=resolve_as_of(as_of), include_archive=strategy.include_archive,
                      held=held)
        run = RecallRun(conn, index, strategy, scope, prepared, resolve_session(session_id),
                        stats=stats, held=held)
        if resident is not None:
            run.timings["resident_ms"] = held_ms
        _gather(run, helper)
        # Beliefs are scored once, by the facts channel; the fusion ranks the evidence.
        beliefs = [c for c in run.pool.values() if c.kind == "belief"]
        ranked = diversify(run.rank(explain=True, evidence_only=True),
                           strategy.session_diversity)
        if strategy.direct_first:
            ranked = direct_first(ranked, DIRECT_LISTS)
        kept, reasons = apply_budget(ranked, budget)
        # The turns of the best evidence the query matched itself (not a neighbour's, nor
        # the feedback round's): they corroborate a fact drawn from them.
        top = frozenset(u for c in kept[:facts.CORROBORATING_ITEMS]
                        if not DIRECT_LISTS.isdisjoint(c.ranks) for u in c.turn_uids)
        found = _facts(run, beliefs, fact_budget, top)
    items = tuple(_item(i, c) for i, c in enumerate(kept, start=len(found.facts) + 1))
    reasons.update(found.reasons)
    run.timings["total_ms"] = (time.perf_counter() - started) * 1000
    result = RecallResult(
        tenant=scope.tenant, items=items, query_digest=prepared.digest, strategy=strategy.name,
        keyword_only=run.keyword_only, degraded_reason="; ".join(run.degraded) or None,
        as_of=scope.as_of, used_turn_fallback=run.used_turn_fallback,
        budget={**budget.to_dict(), "facts": fact_budget}, timings_ms=dict(run.timings),
        facts=found.facts)
    every, chosen = [*found.ranked, *ranked], [*found.kept, *kept]
    return result, lambda: _explanation(run, every, reasons, chosen, budget, fact_budget)


def _held(resident: Resident | None, conn: Connection, tenant: str,
          index: VectorIndex | None) -> HeldTenant | None:
    """The tenant's rows held in the process, or None: the store (also when the store cannot
    be read for them: the lists then degrade as they do without them)."""
    if resident is None:
        return None
    try:
        return resident.tenant(conn, tenant, index)
    except driver_errors() as e:
        log.warning("resident_unavailable", tenant=tenant, error=type(e).__name__)
        return None


def _facts(run: RecallRun, beliefs: list[Candidate], budget: int,
           evidence_turns: frozenset[str]) -> facts.FactsOutcome:
    """The facts channel (``recall/facts.py``) over the beliefs recall found; a database
    error leaves the facts out with a reason."""
    if budget <= 0:
        return facts.FactsOutcome((), [], {}, [])
    started = time.perf_counter()
    try:
        found = facts.select(run.conn, run.scope, run.intent, run.named,
                             beliefs, run.ppr, budget, evidence_turns)
    except driver_errors() as e:
        run.degraded.append(f"facts unavailable ({type(e).__name__})")
        log.warning("recall_list_failed", list="facts", error=type(e).__name__)
        return facts.FactsOutcome((), [], {}, [])
    run.timings["facts_ms"] = (time.perf_counter() - started) * 1000
    return found


def _explanation(run: RecallRun, ranked: list[Candidate], reasons: dict[tuple[str, int], str],
                 kept: list[Candidate], budget: Budget, fact_budget: int) -> str:
    return build_explanation(
        ranked, reasons, kept, as_of=run.scope.as_of, keyword_only=run.keyword_only,
        degraded=run.degraded, budget={**budget.to_dict(), "facts": fact_budget},
        session=run.session_id is not None,
        used_turn_fallback=run.used_turn_fallback, terms=len(run.query.terms),
        strategy=run.strategy.to_dict())


def _item(handle: int, cand: Candidate) -> RecallItem:
    return RecallItem(
        handle=handle, item_id=cand.item_id, kind=cand.kind, text=cand.text, score=cand.score,
        components=dict(cand.components), turn_uids=cand.turn_uids,
        occurred_at=cand.occurred_at, session_id=cand.session_id, status=cand.status)
