"""Fusion's scorer caches per candidate (the fixed components, the RRF term) and is called
three times a recall as lists add ranks: every score must be the documented formula's,
to the bit, whatever was cached before."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_core.recall.candidates import Candidate
from memory_core.recall.fusion import Scorer
from memory_core.recall.query import time_cue
from memory_core.recall.strategy import DEFAULT, DIRECT_LISTS, FEEDBACK_LISTS, RecallStrategy

REFERENCE = datetime(2023, 6, 1, tzinfo=UTC)
QUERY = "What did Caroline say in May 2023?"


def _formula(strat: RecallStrategy, cand: Candidate, ppr: float) -> dict[str, float]:
    """The module docstring's score, written out plainly: components, then their sum."""
    ranks = cand.ranks
    if strat.feedback_new_only and not DIRECT_LISTS.isdisjoint(ranks):
        ranks = {n: r for n, r in ranks.items() if n not in FEEDBACK_LISTS}
    k = strat.rrf_k
    rrf = sum([strat.weight_for(n) * (k + 1) / (k + r) for n, r in ranks.items()])
    age = (REFERENCE - datetime.fromisoformat(cand.occurred_at or "")).total_seconds() / 86_400
    fixed = {
        "recency": 0.5 ** (max(age, 0.0) / strat.recency_half_life_days),
        "confidence": float(cand.confidence or 0.0),
        "tier": float(strat.tier_values.get(cand.tier or "", 0.0)),
        "session": 1.0 if cand.session_id == "s1" else 0.0,
        "time": 1.0 if (cand.occurred_at or "").startswith("2023-05") else 0.0,
        # The query names "Caroline Smith" by her first name.
        "speaker": 1.0 if (cand.speaker or "").split()[0] == "Caroline" else 0.0,
    }
    weights = strat.component_weights
    score = rrf + weights.get("ppr", 0.0) * ppr + sum(
        [weights.get(n, 0.0) * v for n, v in fixed.items()])
    return {"score": score, "rrf": rrf, "ppr": ppr, **fixed}


def _cand(row_id: int, when: str, speaker: str, session: str, **ranks: int) -> Candidate:
    cand = Candidate(kind="episode", row_id=row_id, uid=f"e{row_id}", text="x",
                     occurred_at=when, session_id=session, tier="recent",
                     confidence=0.1 * row_id, speaker=speaker)
    cand.ranks.update(ranks)
    return cand


def test_scores_follow_the_formula_as_lists_add_ranks() -> None:
    strat = DEFAULT.with_(component_weights={  # distinct: a weight on the wrong component shows
        "ppr": 0.07, "recency": 0.05, "confidence": 0.03, "tier": 0.02, "session": 0.1,
        "time": 1.0, "speaker": 0.9})
    pool = [
        _cand(1, "2023-05-08T13:56:01.000000Z", "Caroline", "s1", episode_fts=1),
        _cand(2, "2023-04-30T10:00:00.000000Z", "Melanie", "s2", episode_dense=3),
        _cand(3, "2023-05-20T09:00:00.000000Z", "Caroline Smith", "s2", neighbour=2),
        _cand(4, "2022-05-01T00:00:00.000000Z", "Mel", "s1", episode_fts=7),
    ]
    scorer = Scorer(strat, reference=REFERENCE, session_id="s1", time=time_cue(QUERY),
                    query_text=QUERY)
    rounds = [
        ({}, {}),
        # The feedback round and the walk add ranks; a direct hit keeps only its first-round
        # ranks (feedback_new_only), an expansion-only one counts its feedback rank.
        ({1: {"feedback_fts": 2}, 3: {"feedback_fts": 1, "graph": 4}, 2: {"graph": 1}},
         {("episode", 2): 0.4, ("episode", 3): 0.1}),
        ({4: {"neighbour": 1, "feedback_fts": 3}}, {("episode", 4): 0.2}),
    ]
    for added, ppr_scores in rounds:
        by_id = {c.row_id: c for c in pool}
        for row_id, ranks in added.items():
            by_id[row_id].ranks.update(ranks)
        ranked = scorer.rank(pool, ppr_scores, explain=True)
        top = max(ppr_scores.values(), default=0.0)
        for cand in ranked:
            want = _formula(strat, cand, ppr_scores.get(cand.key, 0.0) / top if top else 0.0)
            assert {"score": cand.score, **cand.components} == want  # bit for bit
        assert [c.score for c in ranked] == sorted((c.score for c in ranked), reverse=True)
