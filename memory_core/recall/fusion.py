"""Fusion: reciprocal rank fusion of the lists plus named components, then the budget.

``score = rrf + sum(weight[c] * component[c])`` where ``rrf = sum over the lists that found
the candidate of list_weight * (rrf_k + 1) / (rrf_k + rank)`` and every component is in
[0, 1]: ``ppr`` (ego-graph PageRank, scaled to the best node), ``recency`` (half-life decay
of the age at the reference time), ``confidence`` (a belief's confidence, an episode's
importance), ``tier`` (episodes: working > recent > long_term > archive), ``session``
(1 for the caller's chat session), ``time`` (1 when the memory's date falls in the month
and year the query names) and ``speaker`` (1 when the query names whoever said the turn the
memory comes from: a question about a participant is mostly answered by what they said; in a
chat of the user and the assistant "I" names the user, and "the trail you recommended" the
assistant: ``intent.whose_words``, given as ``whose``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from memory_core.model.hygiene import speaker_role
from memory_core.recall.candidates import Candidate
from memory_core.recall.ppr import Node
from memory_core.recall.query import TimeCue, names
from memory_core.recall.strategy import DIRECT_LISTS, FEEDBACK_LISTS, RecallStrategy

NO_TIME = TimeCue()
# The components that depend on the candidate alone, in the order the explanation lists them.
FIXED = ("recency", "confidence", "tier", "session", "time", "speaker")
CAP_STEP = 1e-9  # how far below a session's weakest direct hit an expansion-only one lands
DIVERSIFY_TOP = 60  # greedy re-ranking is quadratic; below this rank the order is kept
# Per item, besides its text: the handle, kind and date the prompt line carries.
ITEM_OVERHEAD_TOKENS = 6


@dataclass(frozen=True)
class Budget:
    """How much a recall may return: items and (estimated) tokens."""

    items: int
    tokens: int

    def to_dict(self) -> dict[str, int]:
        return {"items": self.items, "tokens": self.tokens}


def estimate_tokens(text: str) -> int:
    """About four characters per token, plus the line's overhead."""
    return math.ceil(len(text) / 4) + ITEM_OVERHEAD_TOKENS


def _recency(occurred_at: str | None, reference: datetime, half_life_days: float) -> float:
    if not occurred_at:
        return 0.0
    try:  # fromisoformat reads the storage encoding ~10x faster than strptime
        age = (reference - datetime.fromisoformat(occurred_at)).total_seconds() / 86_400
    except (ValueError, TypeError):
        return 0.0
    return 0.5 ** (max(age, 0.0) / half_life_days) if half_life_days > 0 else 0.0


class Scorer:
    """Scores the candidates of one recall, as often as lists are added to its pool.

    The components that depend on the candidate alone (recency, confidence, tier, session,
    time, speaker) are computed once per candidate, and the RRF term again only when a list
    has added a rank; ``ppr`` is read on every ``rank``. The caches live on the candidates,
    which belong to one recall (one scorer).
    """

    def __init__(self, strategy: RecallStrategy, *, reference: datetime,
                 session_id: str | None, time: TimeCue = NO_TIME, query_text: str = "",
                 whose: frozenset[str] = frozenset()) -> None:
        """``whose``: the chat parties whose turns answer the query (``Intent.whose``)."""
        self.strategy = strategy
        self.reference = reference
        self.session_id = session_id
        self.time = time
        self.query_text = query_text
        k = strategy.rrf_k
        self._rrf = {name: strategy.weight_for(name) * (k + 1) for name in strategy.list_weights}
        self._k = k
        self._ppr_weight = strategy.component_weights.get("ppr", 0.0)
        self._new_only = strategy.feedback_new_only
        self._named: dict[str, bool] = {}
        self._whose = whose
        self._has_time = bool(time)
        weights = strategy.component_weights
        (self._w_recency, self._w_confidence, self._w_tier, self._w_session, self._w_time,
         self._w_speaker) = (weights.get(name, 0.0) for name in FIXED)

    def _speaker_named(self, speaker: str | None) -> bool:
        if speaker is None:
            return False
        named = self._named.get(speaker)
        if named is None:
            role = speaker_role(speaker)
            named = role in self._whose if role is not None \
                else bool(names(self.query_text, (speaker,)))
            self._named[speaker] = named
        return named

    def _fix(self, cand: Candidate) -> None:
        """Compute the candidate's fixed components and their weighted sum (once)."""
        strat = self.strategy
        recency = _recency(cand.occurred_at, self.reference, strat.recency_half_life_days)
        confidence = float(cand.confidence or 0.0)
        tier = float(strat.tier_values.get(cand.tier or "", 0.0))
        session = 1.0 if self.session_id is not None and cand.session_id == self.session_id \
            else 0.0
        time = self.time.matches(cand.occurred_at) if self._has_time else 0.0
        speaker = 1.0 if self._speaker_named(cand.speaker) else 0.0
        cand.fixed = {"recency": recency, "confidence": confidence, "tier": tier,
                      "session": session, "time": time, "speaker": speaker}
        # Summed in FIXED order by sum(), as ever: a float sum depends on its order (and
        # sum() adds floats differently from ``+`` on Python 3.12).
        cand.fixed_sum = sum([self._w_recency * recency, self._w_confidence * confidence,
                              self._w_tier * tier, self._w_session * session,
                              self._w_time * time, self._w_speaker * speaker])

    def rank(self, pool: Iterable[Candidate], ppr_scores: Mapping[Node, float], *,
             explain: bool = True) -> list[Candidate]:
        """Set each candidate's score (and with ``explain`` its components); return them
        best first (ties by kind and id)."""
        top_ppr = max(ppr_scores.values(), default=0.0)
        ppr_weight, rrf_weights, k = self._ppr_weight, self._rrf, self._k
        new_only = self._new_only
        ppr_get = ppr_scores.get if top_ppr > 0 else None
        out = list(pool)
        for cand in out:
            if cand.fixed is None:
                self._fix(cand)
            ranks = cand.ranks
            if cand.rrf_ranks != len(ranks):
                n_ranks = len(ranks)
                if new_only and not FEEDBACK_LISTS.isdisjoint(ranks) \
                        and not DIRECT_LISTS.isdisjoint(ranks):
                    ranks = {n: r for n, r in ranks.items() if n not in FEEDBACK_LISTS}
                cand.rrf = sum([rrf_weights.get(name, 0.0) / (k + rank)
                                for name, rank in ranks.items()])
                cand.rrf_ranks = n_ranks
            ppr = ppr_get(cand.key, 0.0) / top_ppr if ppr_get is not None else 0.0
            cand.score = cand.rrf + ppr_weight * ppr + cand.fixed_sum
            if explain:
                cand.components = {"rrf": cand.rrf, "ppr": ppr, **(cand.fixed or {})}
        out.sort(key=lambda c: (-c.score, c.kind, c.row_id))
        return out


def diversify(ranked: list[Candidate], penalty: float) -> list[Candidate]:
    """Re-rank so one chat session does not fill the top: each further candidate of a
    session already placed loses ``penalty`` of its score per candidate before it (greedy).
    The ``diversity`` component records the factor applied."""
    if penalty <= 0 or len(ranked) < 2:
        return ranked
    placed: dict[str | None, int] = {}
    out: list[Candidate] = []
    pool = list(ranked)
    while pool:
        best = max(pool, key=lambda c: c.score * (1 - penalty) ** placed.get(c.session_id, 0))
        factor = (1 - penalty) ** placed.get(best.session_id, 0)
        best.components["diversity"] = factor
        best.score *= factor
        placed[best.session_id] = placed.get(best.session_id, 0) + 1
        pool.remove(best)
        out.append(best)
        if len(out) >= DIVERSIFY_TOP:
            out.extend(sorted(pool, key=lambda c: (-c.score, c.kind, c.row_id)))
            break
    return out


def direct_first(ranked: list[Candidate], direct: frozenset[str]) -> list[Candidate]:
    """Re-rank so that no candidate found only by expansion lists (neighbours, the graph
    walk, the feedback round: none of ``direct``) stands above a direct hit of its own chat
    session: within a session, what matches the query comes before what merely sits next to
    it or shares words with what matched (LongMemEval: the evidence turn fell below its
    session-mates). Such a candidate's score is lowered just below the session's weakest
    direct hit (the ``direct_cap`` component records the factor); the order among the
    lowered ones is kept."""
    floor: dict[str, float] = {}
    for cand in ranked:
        if cand.session_id is not None and not direct.isdisjoint(cand.ranks):
            floor[cand.session_id] = min(cand.score, floor.get(cand.session_id, cand.score))
    moved = False
    for i, cand in enumerate(ranked):
        limit = floor.get(cand.session_id) if cand.session_id is not None else None
        if limit is None or cand.score < limit or not direct.isdisjoint(cand.ranks):
            continue
        # Strictly below the floor, and in the order they had (ranked is best first).
        new = limit - CAP_STEP * (1 + i)
        cand.components["direct_cap"] = new / cand.score if cand.score else 0.0
        cand.score = new
        moved = True
    if not moved:
        return ranked
    return sorted(ranked, key=lambda c: -c.score)  # stable: ties keep their order


def apply_budget(ranked: list[Candidate], budget: Budget) -> tuple[list[Candidate],
                                                                  dict[tuple[str, int], str]]:
    """Keep candidates in order while the item and token budgets allow.

    A candidate too large for the tokens left is skipped (a smaller later one may still fit).
    Returns the kept candidates and, for every candidate, why it was kept or dropped.
    """
    kept: list[Candidate] = []
    reasons: dict[tuple[str, int], str] = {}
    tokens_left = budget.tokens
    for cand in ranked:
        if len(kept) >= budget.items:
            reasons[cand.key] = "dropped: over the item budget"
            continue
        cost = estimate_tokens(cand.text)
        if cost > tokens_left:
            reasons[cand.key] = "dropped: over the token budget"
        else:
            kept.append(cand)
            tokens_left -= cost
            reasons[cand.key] = f"kept: rank {len(kept)}"
    return kept, reasons
