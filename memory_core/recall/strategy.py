"""Recall strategies are data: frozen dataclasses, and presets that are just instances.

A strategy says how many candidates each list contributes, how lists are fused (reciprocal
rank fusion with per-list weights), how strongly each named component (personalised PageRank,
recency, confidence, tier, same-session, time, speaker) moves the fused score, how the
second (feedback) round is seeded, and how the ego graph is bounded. Nothing here touches a
database.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from memory_core.errors import InvalidInputError

# The ranked candidate lists recall can build; a fused score sums a weighted RRF term per list.
LISTS = ("belief_entity", "belief_fts", "belief_dense", "episode_fts", "episode_dense",
         "turn_fts", "graph", "neighbour", "feedback_fts", "feedback_dense")
# The lists that match the query itself; the others (neighbour, graph, feedback_*) expand
# from what these found.
DIRECT_LISTS = frozenset(("belief_entity", "belief_fts", "belief_dense", "episode_fts",
                          "episode_dense", "turn_fts"))
FEEDBACK_LISTS = frozenset(("feedback_fts", "feedback_dense"))


def _frozen(mapping: dict[str, float]) -> MappingProxyType[str, float]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class RecallStrategy:
    """How one recall searches, fuses and ranks. Immutable; derive variants with ``with_``."""

    name: str = "default"
    # Candidates taken from each list (before fusion).
    k: MappingProxyType[str, int] = field(default_factory=lambda: MappingProxyType({
        "belief_entity": 30, "belief_fts": 30, "belief_dense": 30,
        "episode_fts": 60, "episode_dense": 60, "turn_fts": 40, "graph": 30, "neighbour": 10,
        "feedback_fts": 30, "feedback_dense": 30,
    }))
    # Reciprocal rank fusion: each list adds weight * (rrf_k + 1) / (rrf_k + rank), so the
    # first item of a list with weight 1 adds exactly 1.0.
    rrf_k: int = 10  # LoCoMo: 60 -> 0.566, 20 -> 0.616, 10 -> 0.640 R@10 (fastembed)
    list_weights: MappingProxyType[str, float] = field(default_factory=lambda: _frozen({
        # Beliefs are found by up to four lists and episodes by two or three; with equal
        # weights a belief merely about an entity named in the query outranks the episode
        # that answers it (measured on LoCoMo: R@10 0.15 instead of 0.56). Tuned on LoCoMo
        # categories with all-MiniLM-L6-v2, never on single questions.
        "belief_entity": 0.08, "belief_fts": 0.2, "belief_dense": 0.15,
        "episode_fts": 1.0, "episode_dense": 0.9, "turn_fts": 1.0, "graph": 0.1,
        "neighbour": 0.15,
        # Second round (pseudo-relevance feedback, see ``feedback_seeds``). LoCoMo, fastembed:
        # feedback_fts 0.3 -> 0.7 moved multi-hop R@10 0.43 -> 0.45; feedback_dense at 0.3
        # cost 0.005-0.01 overall on top of it, so it is off by default.
        "feedback_fts": 0.7, "feedback_dense": 0.0,
    }))
    # Named components, each in [0, 1], added with these weights after fusion.
    component_weights: MappingProxyType[str, float] = field(default_factory=lambda: _frozen({
        "ppr": 0.05, "recency": 0.05, "confidence": 0.05, "tier": 0.05, "session": 0.1,
        "time": 1.0,
        # A query naming a participant is mostly answered by what that participant said
        # (LoCoMo: 96% of the evidence turns of questions naming one speaker are theirs).
        # 0 -> 1.0: multi-hop R@10 0.39 -> 0.43 (with feedback), overall +0.01.
        "speaker": 1.0,
    }))
    recency_half_life_days: float = 30.0
    tier_values: MappingProxyType[str, float] = field(default_factory=lambda: _frozen({
        "working": 1.0, "recent": 0.6, "long_term": 0.3, "archive": 0.0,
    }))
    # Dense search with a keyword-grade (hash) embedder mostly repeats FTS; it can be skipped.
    dense_with_keyword_embedder: bool = False
    # A query term matching this many rows of an FTS index or more is left out of that
    # search (bounded ranking cost at scale; such a term barely moves bm25). 0: keep all.
    fts_common_df: int = 5_000
    # bm25 ranks at most about this many rows per list: the matches of the rarest terms
    # (ranked over every kept term), then the newest matches of the rest (search.plan_terms).
    # 0: rank every match.
    fts_rank_budget: int = 1_000
    # ... and so is a term in this fraction of the tenant's rows (its own stopwords, such as
    # a speaker's name in every turn of theirs; set when bm25's idf came from the index all
    # tenants shared). LoCoMo: 0.672 -> 0.69 R@10. 0.2 -> 0.25 since bm25 has the tenant's
    # own idf: in long chats 0.2 left out words that carry the question ("think", in 22% of
    # a LongMemEval tenant's rows: its evidence fell from ranks 3 and 7 to 10 and 12);
    # LongMemEval hash R@5 0.758 -> 0.769, LoCoMo unchanged within 0.002. 0: off.
    fts_tenant_common_fraction: float = 0.25
    # Raw-turn FTS runs when beliefs and episodes together give fewer candidates than this.
    turn_fallback_below: int = 1
    # Personalised PageRank over the local ego graph.
    ppr_enabled: bool = True
    ppr_damping: float = 0.85
    ppr_iterations: int = 30
    ppr_max_nodes: int = 400
    ppr_edges_per_entity: int = 40
    ppr_hub_weight: float = 0.1
    # Episodes of the turns next to the best ``k["neighbour"]`` hits (same session, up to
    # ``neighbour_span`` turns away) form the ``neighbour`` list.
    neighbour_span: int = 1
    # Pseudo-relevance feedback (recall/feedback.py): the best ``feedback_seeds`` episodes
    # of the first round seed the ``feedback_fts`` and ``feedback_dense`` lists; the dense
    # one searches with query + ``feedback_beta`` * mean(seed vectors). Off by default, on
    # in the ``multi_hop`` preset: with every other list as it is now (direct hits first,
    # ``feedback_new_only``) the round changed no question's evidence in the top 10 of
    # LoCoMo (883, fastembed) or LongMemEval (48, hash and fastembed), and cost a sixth of a
    # recall's CPU (docs/benchmarks.md, session 18).
    feedback_seeds: int = 0
    feedback_beta: float = 1.0
    feedback_query_terms: bool = True  # feedback_fts searches the query's terms too
    # The feedback lists add to a candidate's score only when no direct list found it: they
    # bring in what the query missed, without reordering what it found (long seeds share
    # many words with their session-mates). Hash: LongMemEval R@5 0.473 -> 0.765, R@10
    # 0.804 -> 0.876; LoCoMo R@5 0.566 -> 0.583, R@10 0.672 -> 0.656.
    feedback_new_only: bool = True
    # The second round ranks fewer rows than the first (its terms are many and broad): the
    # ``fts_common_df`` budget of the first round, for the second. Binds only on large
    # tenants (a LoCoMo conversation has ~600 turns), where it keeps recall within budget.
    feedback_common_df: int = 1_000
    feedback_rank_budget: int = 500
    # A memory matching the query directly is never ranked below its unmatched neighbours
    # or session-mates (fusion.direct_first). Every preset keeps it; off only to measure it.
    direct_first: bool = True
    # Each further item of an already placed chat session loses this share of its score.
    session_diversity: float = 0.0
    include_archive: bool = False

    def __post_init__(self) -> None:
        for name in (*self.k, *self.list_weights):
            if name not in LISTS:
                raise InvalidInputError(f"strategy {self.name}: unknown list {name!r}; "
                                        f"valid lists: {', '.join(LISTS)}")
        if self.rrf_k < 0 or not 0 < self.ppr_damping < 1:
            raise InvalidInputError(f"strategy {self.name}: rrf_k must be >= 0 and "
                                    "ppr_damping between 0 and 1")

    def with_(self, **changes: Any) -> RecallStrategy:
        """A copy with ``changes``; dict values are merged into the mapping they replace."""
        for key in ("k", "list_weights", "component_weights", "tier_values"):
            if key in changes and isinstance(changes[key], dict):
                merged = {**getattr(self, key), **changes[key]}
                changes[key] = MappingProxyType(merged)
        return replace(self, **changes)

    def k_for(self, list_name: str) -> int:
        return int(self.k.get(list_name, 0))

    def weight_for(self, list_name: str) -> float:
        return float(self.list_weights.get(list_name, 0.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "k": dict(self.k), "rrf_k": self.rrf_k,
            "list_weights": dict(self.list_weights),
            "component_weights": dict(self.component_weights),
            "recency_half_life_days": self.recency_half_life_days,
            "ppr": {"enabled": self.ppr_enabled, "damping": self.ppr_damping,
                    "max_nodes": self.ppr_max_nodes},
            "feedback": {"seeds": self.feedback_seeds, "beta": self.feedback_beta,
                         "query_terms": self.feedback_query_terms,
                         "new_only": self.feedback_new_only},
            "direct_first": self.direct_first,
        }


DEFAULT = RecallStrategy()
PRESETS: MappingProxyType[str, RecallStrategy] = MappingProxyType({
    "default": DEFAULT,
    # Keyword only: what recall degrades to when dense search is off.
    "keyword": DEFAULT.with_(name="keyword", list_weights={
        "belief_dense": 0.0, "episode_dense": 0.0}),
    # No graph work: the cheapest useful recall.
    "fast": DEFAULT.with_(name="fast", ppr_enabled=False,
                          list_weights={"graph": 0.0},
                          k={"episode_fts": 20, "episode_dense": 20, "belief_fts": 15,
                             "belief_dense": 15}),
    # Archived episodes too (kept but not recalled by default).
    "archive": DEFAULT.with_(name="archive", include_archive=True),
    # Reach further through the graph for questions that join several memories.
    # And the feedback round: what shares words with the best hits.
    "multi_hop": DEFAULT.with_(name="multi_hop", ppr_max_nodes=800, list_weights={"graph": 0.9},
                               component_weights={"ppr": 0.5}, feedback_seeds=4),
})


def get_strategy(name_or_strategy: str | RecallStrategy | None) -> RecallStrategy:
    """A preset by name, a strategy as is, or the default for None."""
    if name_or_strategy is None:
        return DEFAULT
    if isinstance(name_or_strategy, RecallStrategy):
        return name_or_strategy
    try:
        return PRESETS[name_or_strategy]
    except (KeyError, TypeError):
        raise InvalidInputError(f"unknown recall strategy {name_or_strategy!r}: use one of "
                                f"{', '.join(PRESETS)}") from None
