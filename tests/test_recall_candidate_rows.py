"""The candidate constructors pass ``Candidate``'s fields by position: each column of a
stored row lands in the field it names (a field added or moved in ``Candidate`` breaks this
test, not a recall's ranking in silence)."""

from __future__ import annotations

from memory_core.recall.candidates import BELIEF_COLUMNS, belief_candidate, episode_candidate


def test_a_belief_row_fills_the_fields_its_columns_name() -> None:
    columns = [c.strip().split(".")[1] for c in BELIEF_COLUMNS.split(",")]
    row = (7, "b_uid", "Maya lives in Denver", "2024-03-01T00:00:00.000000Z", 0.83, "active",
           "turn-9", "ent_maya", "ent_denver", "sess-2", "Maya", "lives_in", "Denver", 1,
           "user", "2025-01-01T00:00:00.000000Z")
    assert len(columns) == len(row)
    cand = belief_candidate(row)
    assert (cand.kind, cand.row_id, cand.uid, cand.text) == ("belief", 7, "b_uid",
                                                             "Maya lives in Denver")
    assert cand.occurred_at == "2024-03-01T00:00:00.000000Z"  # valid_from
    assert (cand.confidence, cand.status, cand.turn_uids) == (0.83, "active", ("turn-9",))
    assert (cand.subject_id, cand.object_entity_id) == ("ent_maya", "ent_denver")
    assert (cand.session_id, cand.speaker, cand.tier) == ("sess-2", "Maya", None)
    assert cand.claim == ("lives_in", "Denver", True, "user", "2025-01-01T00:00:00.000000Z")
    assert (cand.key, cand.ranks, cand.components, cand.score) == (("belief", 7), {}, {}, 0.0)
    assert belief_candidate((*row[:6], None, *row[7:])).turn_uids == ()


def test_an_episode_row_fills_the_fields_its_columns_name() -> None:
    # ``episode_rows`` values: id, uid, text, occurred_at, session, tier, importance, turn
    # uids, first speaker
    row = (3, "ep_uid", "[8 May 2023] Caroline: hi", "2023-05-08T13:56:00.000000Z", "sess-1",
           "recent", 1.7, ("t1", "t2"), "Caroline")
    cand = episode_candidate(row)
    assert (cand.kind, cand.row_id, cand.uid, cand.text) == ("episode", 3, "ep_uid",
                                                             "[8 May 2023] Caroline: hi")
    assert (cand.occurred_at, cand.session_id, cand.tier) == ("2023-05-08T13:56:00.000000Z",
                                                              "sess-1", "recent")
    assert cand.confidence == 1.0  # importance clamped to [0, 1]
    assert (cand.turn_uids, cand.speaker, cand.status, cand.claim) == (("t1", "t2"),
                                                                        "Caroline", None, None)
    assert (cand.subject_id, cand.object_entity_id, cand.key) == (None, None, ("episode", 3))
    assert episode_candidate((*row[:6], -0.2, *row[7:])).confidence == 0.0
