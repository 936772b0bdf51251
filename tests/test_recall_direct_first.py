"""A memory that matches the query directly is never ranked below its unmatched neighbours
or session-mates (the lists that expand from hits - neighbour, graph walk, feedback - may
order them after the session's direct hits, never before)."""

from __future__ import annotations

from memory_core.recall.candidates import Candidate
from memory_core.recall.fusion import direct_first
from memory_core.recall.strategy import DEFAULT, DIRECT_LISTS

pytest_plugins = ("tests.helpers.recall_fixtures",)


def _cand(row_id: int, session: str | None, score: float, *lists: str) -> Candidate:
    cand = Candidate(kind="episode", row_id=row_id, uid=f"e{row_id}", text="x",
                     occurred_at=None, session_id=session, score=score)
    cand.ranks = {name: 1 for name in lists}
    return cand


def test_expansion_only_candidates_fall_below_their_sessions_direct_hits() -> None:
    ranked = [
        _cand(1, "s1", 3.0, "neighbour"),  # unmatched session-mate, best score
        _cand(2, "s1", 2.5, "feedback_fts", "graph"),
        _cand(3, "s2", 2.2, "neighbour"),  # no direct hit in s2: stays where it is
        _cand(4, "s1", 2.0, "episode_fts"),
        _cand(5, "s1", 1.0, "episode_dense", "neighbour"),  # direct (and expanded)
        _cand(6, None, 0.9, "graph"),  # no session: untouched
        _cand(7, "s1", 0.5, "neighbour"),  # already below: untouched
    ]
    out = direct_first(ranked, DIRECT_LISTS)
    assert [c.row_id for c in out] == [3, 4, 5, 1, 2, 6, 7]
    assert out[2].score > out[3].score > out[4].score > out[5].score
    assert 0 < out[3].components["direct_cap"] < 1
    assert "direct_cap" not in out[0].components


def test_nothing_moves_when_direct_hits_lead() -> None:
    ranked = [_cand(1, "s1", 2.0, "episode_fts"), _cand(2, "s1", 1.0, "neighbour")]
    assert direct_first(ranked, DIRECT_LISTS) == ranked


def test_a_heavy_neighbour_list_never_lifts_a_neighbour_above_the_hits(seeded, mem) -> None:
    seeder, _ = seeded
    before = seeder.turn("acme", "hello, how was your week", session="s1")
    hit = seeder.turn("acme", "I adopted a greyhound named Juniper", session="s1")
    after = seeder.turn("acme", "that sounds lovely, tell me more", session="s1")
    second = seeder.turn("acme", "Juniper sleeps on the sofa all day", session="s1")
    last = seeder.turn("acme", "ok, see you tomorrow then", session="s1")
    for i in range(8):
        seeder.turn("acme", f"filler {i} about weather and traffic", session="s2")
    # Neighbours weigh five times a direct list: without the rule they would lead.
    strategy = DEFAULT.with_(list_weights={"neighbour": 5.0})
    result = mem.recall("Which greyhound is Juniper?", tenant="acme", budget=10,
                        strategy=strategy)
    order = [u for item in result.items for u in item.turn_uids]
    assert {hit, second} <= set(order) and {before, after} & set(order)
    direct = [order.index(u) for u in (hit, second)]
    unmatched = [order.index(u) for u in (before, after, last) if u in order]
    assert max(direct) < min(unmatched), order
    capped = [i for i in result.items if i.components.get("direct_cap")]
    assert capped and all(set(i.turn_uids) & {before, after, last} for i in capped)
