"""The feedback round adds what the query missed and may reorder what ranks below its seeds,
but never lifts anything above the seeds it was searched from (fusion.below_seeds)."""

from __future__ import annotations

from memory_core.recall.candidates import Candidate
from memory_core.recall.fusion import below_seeds
from memory_core.recall.strategy import DEFAULT

pytest_plugins = ("tests.helpers.recall_fixtures",)


def _cand(row_id: int, score: float, feedback: float = 0.0) -> Candidate:
    cand = Candidate(kind="episode", row_id=row_id, uid=f"e{row_id}", text="x",
                     occurred_at=None, session_id="s1", score=score)
    cand.rrf_feedback = feedback
    return cand


def test_feedback_lifts_nothing_above_the_weakest_seed() -> None:
    ranked = [
        _cand(1, 3.0, feedback=2.5),  # above every seed only through feedback
        _cand(2, 2.8),  # seed
        _cand(3, 2.6, feedback=0.1),  # above the weakest seed on its own: keeps 2.5
        _cand(4, 2.4, feedback=1.0),  # feedback again: just below the floor
        _cand(5, 2.0),  # seed (the weakest)
        _cand(6, 1.5, feedback=1.0),  # below the seeds already: untouched
        _cand(7, 1.0),
    ]
    out = below_seeds(ranked, frozenset({("episode", 2), ("episode", 5)}))
    assert [c.row_id for c in out] == [2, 3, 5, 1, 4, 6, 7]
    assert out[1].score == 2.5
    assert 2.0 > out[3].score > out[4].score > 1.5
    assert out[3].components["below_seeds"] < 1
    assert "below_seeds" not in out[0].components and "below_seeds" not in out[5].components


def test_without_seeds_nothing_moves() -> None:
    ranked = [_cand(1, 3.0, feedback=2.0), _cand(2, 1.0)]
    assert below_seeds(ranked, frozenset()) == ranked


def test_a_heavy_feedback_list_never_outranks_the_seeds(seeded, mem) -> None:
    seeder, _ = seeded
    hit = seeder.turn("acme", "Juniper the greyhound won the Harbourview cup", session="s1")
    for i in range(3):  # session-mates matching the query weakly, and the seed's rare word
        seeder.turn("acme", f"a race at the Harbourview marina, number {i}", session="s1")
    for i in range(8):
        seeder.turn("acme", f"filler {i} about weather and traffic", session="s2")
    # Feedback weighs five times a direct list; the mates are direct hits too (so
    # direct_first does not hold them) and share "Harbourview" with the seed, the hit.
    strategy = DEFAULT.with_(list_weights={"feedback_fts": 5.0}, feedback_seeds=1)
    result = mem.recall("Which race did Juniper win?", tenant="acme", budget=10,
                        strategy=strategy)
    order = [u for item in result.items for u in item.turn_uids]
    assert order[0] == hit, order
    assert any(i.components.get("below_seeds") for i in result.items)
