"""The write API on real database files: every rule of the memory model."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import pytest

from memory_core.model import counts
from memory_core.model.beliefs import BeliefInput, invalidate_belief, mutate_belief
from memory_core.model.ego_anchor import backfill_ego_anchors
from memory_core.model.episodes import episode_text
from memory_core.model.turns import TurnInput, recollect_turn, record_turn
from memory_core.write.pipeline import (
    anchor_turn,
    extract_and_apply,
    micro_consolidate,
    process_turn,
    process_turns,
    record_turn_and_episode,
)
from tests.helpers.memory import belief_table, day, make_store


@pytest.fixture
def store(tmp_path: Path):
    s = make_store(tmp_path / "data", ("t1", "t2"))
    yield s
    s.db.close()


def put(store, subject, predicate, obj, when, source="user_explicit", tenant="t1", **kw):
    return mutate_belief(store.conn, store.index, tenant,
                         BeliefInput(subject, predicate, obj, day(when), source=source, **kw))


def rows(store, predicate, tenant="t1"):
    return {r[0]: (r[1], r[2]) for r in store.conn.execute(
        "SELECT object_text, status, valid_to IS NULL FROM beliefs WHERE tenant = ? AND "
        "predicate = ?", (tenant, predicate))}


def test_functional_newer_closes_older_and_nothing_is_deleted(store) -> None:
    put(store, "I", "lives_in", "Berlin", 0)
    put(store, "I", "lives_in", "Munich", 10)
    assert rows(store, "lives_in") == {"Berlin": ("superseded", False),
                                       "Munich": ("active", True)}
    closed = store.conn.execute("SELECT valid_to, retired_at FROM beliefs WHERE "
                                "object_text = 'Berlin'").fetchone()
    assert closed[0].startswith("2024-01-11") and closed[1] is not None


def test_user_explicit_is_kept_against_lower_trust(store) -> None:
    put(store, "I", "works_at", "Acme", 0, "user_explicit")
    out = put(store, "I", "works_at", "Globex", 5, "llm_inferred")
    assert out.status == "conflict"
    assert rows(store, "works_at") == {"Acme": ("active", True), "Globex": ("conflict", True)}


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_world_time_decides_not_arrival_order(tmp_path: Path, order) -> None:
    store = make_store(tmp_path / "d")
    facts = [("Berlin", 0, "heuristic"), ("Munich", 10, "user_explicit"),
             ("Paris", 20, "heuristic")]
    for i in order:
        put(store, "I", "lives_in", facts[i][0], facts[i][1], facts[i][2])
    for i in order:  # a replay changes nothing
        assert put(store, "I", "lives_in", facts[i][0], facts[i][1], facts[i][2]).action \
            == "existing"
    assert rows(store, "lives_in") == {"Berlin": ("superseded", False),
                                       "Munich": ("active", True),
                                       "Paris": ("conflict", True)}
    store.db.close()


@pytest.mark.parametrize(("subject", "reason"), [
    ("kazma_v2_4_0", "version_string"), ("it", "pronoun"), ("of the", "fragment"),
    ("x" * 80, "too_long"), ("/etc/passwd", "url_or_path"),
])
def test_hygiene_rejects_and_counts(store, subject, reason) -> None:
    out = put(store, subject, "likes", "jazz", 0)
    assert (out.action, out.reason) == ("rejected", reason)
    put(store, subject, "likes", "chess", 0)
    count = store.conn.execute("SELECT count FROM hygiene_rejections WHERE tenant = 't1' AND "
                               "reason = ?", (reason,)).fetchone()[0]
    assert count == 2
    assert store.conn.execute("SELECT count(*) FROM beliefs").fetchone()[0] == 0


def test_ego_anchor_added_then_dropped_when_a_real_edge_appears(store) -> None:
    put(store, "Alice", "works_at", "Acme", 1, "heuristic")
    anchors = store.conn.execute("SELECT subject_id, object_text, source FROM beliefs WHERE "
                                 "predicate = 'related_to'").fetchall()
    assert anchors == [("user", "Alice", "system_tool")]
    put(store, "I", "friend_of", "Alice", 2, "heuristic")
    assert store.conn.execute("SELECT count(*) FROM beliefs WHERE predicate = 'related_to'"
                              ).fetchone()[0] == 0
    assert backfill_ego_anchors(store.conn, store.index, "t1").added == 0


def test_payload_objects_are_not_minted(store) -> None:
    put(store, "I", "likes", "/home/me/notes.txt", 0)
    put(store, "I", "age_is", "42", 0)
    put(store, "I", "likes", "Jazz", 0)
    names = {r[0] for r in store.conn.execute("SELECT name FROM entities WHERE tenant = 't1'")}
    assert names == {"user", "Jazz"}


def test_backfill_is_idempotent_and_repairs(store) -> None:
    put(store, "Alice", "works_at", "Acme", 1, "heuristic")
    store.conn.execute("DELETE FROM beliefs WHERE predicate = 'related_to'")
    first = backfill_ego_anchors(store.conn, store.index, "t1")
    second = backfill_ego_anchors(store.conn, store.index, "t1")
    assert (first.added, second.added, second.removed) == (1, 0, 0)
    counts.recount(store.conn, "t1")
    assert counts.count_drift(store.conn, "t1") == {}


def test_every_belief_change_lands_in_the_outbox(store) -> None:
    put(store, "I", "lives_in", "Berlin", 0)
    before = store.conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
    put(store, "I", "lives_in", "Munich", 1)
    new = store.conn.execute("SELECT kind, op FROM outbox ORDER BY id").fetchall()[before:]
    assert ("belief", "upsert") in new and len([n for n in new if n[0] == "belief"]) == 2


def test_invalidate_reopens_the_older_value(store) -> None:
    put(store, "I", "lives_in", "Berlin", 0)
    munich = put(store, "I", "lives_in", "Munich", 1)
    invalidate_belief(store.conn, store.index, "t1", munich.belief_uid)
    assert rows(store, "lives_in") == {"Berlin": ("active", True),
                                       "Munich": ("invalidated", True)}
    assert counts.count_drift(store.conn, "t1") == {}


def test_counts_match_a_recount_after_mixed_writes(store) -> None:
    put(store, "I", "lives_in", "Berlin", 0)
    put(store, "Alice", "lives_in", "Berlin", 1, "heuristic")
    put(store, "Alice", "friend_of", "Bob", 2, "heuristic")
    put(store, "I", "lives_in", "Munich", 3, "heuristic")
    assert counts.count_drift(store.conn, "t1") == {}
    hub = store.conn.execute("SELECT belief_count, graph_degree FROM entities WHERE "
                             "entity_id = 'user' AND tenant = 't1'").fetchone()
    assert hub == counts.true_counts(store.conn, "t1", ["user"])["user"]


def test_tenants_never_see_each_other(store) -> None:
    put(store, "I", "lives_in", "Berlin", 0, tenant="t1")
    put(store, "I", "lives_in", "Rome", 0, tenant="t2")
    assert [r[4] for r in belief_table(store.conn, "t2")] == ["Rome"]
    assert rows(store, "lives_in", "t1") == {"Berlin": ("active", True)}


def _turn(uid, text, minute, session="s1", speaker="user", tenant="t1", index=None):
    return TurnInput(tenant, session, uid, speaker, text, day(minute / 1440), index)


def test_record_and_recollect_turn_with_context(store) -> None:
    for i in range(25):
        record_turn(store.conn, _turn(f"u{i}", f"turn number {i}", i, index=i))
    record_turn(store.conn, _turn("other", "another session", 3, session="s2", index=0))
    rec = recollect_turn(store.conn, "t1", "u12", context=10)
    assert rec.turn.text == "turn number 12"
    assert [t.index for t in rec.before] == list(range(2, 12))
    assert [t.index for t in rec.after] == list(range(13, 23))
    edge = recollect_turn(store.conn, "t1", "u0", context=10)
    assert edge.before == [] and len(edge.after) == 10


def test_turns_are_stored_verbatim_and_idempotent(store) -> None:
    text = "  Ünïcode — tabs\tand  spaces \n kept  "
    first = record_turn_and_episode(store.db, store.index, _turn("v1", text, 0))
    again = record_turn_and_episode(store.db, store.index, _turn("v1", text, 0))
    assert first.created and not again.created and first.episode_id == again.episode_id
    assert store.conn.execute("SELECT text FROM turns").fetchone()[0] == text
    ep = store.conn.execute("SELECT text, tier, occurred_at FROM episodes").fetchone()
    # The episode reads "[<day>] <speaker>: <text>"; the text itself is kept as is.
    assert ep[:2] == (episode_text("user", text, ep[2]), "working")
    assert ep[0].startswith("[") and ep[0].endswith(f"] user: {text}")


def test_a_new_session_moves_working_episodes_to_recent(store) -> None:
    record_turn_and_episode(store.db, store.index, _turn("a", "hello", 0, session="s1"))
    record_turn_and_episode(store.db, store.index, _turn("b", "hi again", 60, session="s2"))
    tiers = dict(store.conn.execute("SELECT session_id, tier FROM episodes").fetchall())
    assert tiers == {"s1": "recent", "s2": "working"}


def likes_extractor(turn):
    return [SimpleNamespace(subject="@speaker", predicate="likes", object=w)
            for w in turn.text.split() if w.istitle() and len(w) > 1]


def test_pipeline_steps_are_idempotent(store) -> None:
    record_turn_and_episode(store.db, store.index, _turn("p1", "I like Jazz and Chess", 0))
    ids = extract_and_apply(store.db, store.index, "t1", "p1", extractor=likes_extractor)
    again = extract_and_apply(store.db, store.index, "t1", "p1", extractor=likes_extractor)
    assert len(ids) == 2 and sorted(again) == sorted(ids)
    assert anchor_turn(store.db, store.index, "t1", "p1") == {"added": 0, "removed": 0,
                                                               "moved": 0}
    outcome = process_turn(store.db, store.index, _turn("p1", "I like Jazz and Chess", 0),
                           extractor=likes_extractor)
    assert not outcome.record.created
    assert store.conn.execute("SELECT count(*) FROM beliefs").fetchone()[0] == 2
    imp = store.conn.execute("SELECT importance FROM episodes").fetchone()[0]
    assert imp > 0.5


def test_micro_consolidate_folds_duplicate_episodes(store) -> None:
    turns = [_turn(f"m{i}", "Same words here", i) for i in range(3)]
    process_turns(store.db, store.index, turns, extractor=likes_extractor)
    report = micro_consolidate(store.db, store.index, "t1", "s1", turn_uid="m0")
    assert report.episodes_merged == 2
    assert store.conn.execute("SELECT count(*) FROM episode_turns").fetchone()[0] == 3
    assert micro_consolidate(store.db, store.index, "t1", "s1").episodes_merged == 0
    assert counts.count_drift(store.conn, "t1") == {}


def _belief_states(store) -> dict[str, tuple[str, str | None]]:
    return {r[0]: (r[1], r[2]) for r in store.conn.execute(
        "SELECT belief_uid, status, valid_to FROM beliefs WHERE tenant = 't1'")}


def test_micro_consolidate_reports_the_beliefs_it_changed(store) -> None:
    """The report counts belief rows re-resolution changed, whatever else the transaction
    wrote to the outbox (a merged episode writes rows of its own)."""
    process_turns(store.db, store.index, [_turn(f"m{i}", "Same words here", i) for i in range(3)])
    for predicate, old, new in (("lives_in", "Berlin", "Munich"), ("works_at", "Acme", "Globex")):
        put(store, "I", predicate, old, 0)
        put(store, "I", predicate, new, 10)
    # Stale rows, as a cut-short write would leave them: both closed beliefs read active.
    store.conn.execute("UPDATE beliefs SET status = 'active', valid_to = NULL, retired_at = "
                       "NULL WHERE object_text IN ('Berlin', 'Acme')")
    before = _belief_states(store)
    last_outbox = store.conn.execute("SELECT max(id) FROM outbox").fetchone()[0]
    report = micro_consolidate(store.db, store.index, "t1", "s1", subject_ids=["user"])
    after = _belief_states(store)
    changed = sorted(uid for uid in before if before[uid] != after[uid])
    shipped = sorted(r[0] for r in store.conn.execute(
        "SELECT object_id FROM outbox WHERE id > ? AND kind = 'belief'", (last_outbox,)))
    assert report.episodes_merged == 2
    assert len(changed) == 2 and shipped == changed
    assert report.beliefs_changed == len(changed)
    assert micro_consolidate(store.db, store.index, "t1", "s1",
                             subject_ids=["user"]).beliefs_changed == 0
    assert counts.count_drift(store.conn, "t1") == {}


def test_negated_candidate_closes_the_fact(store) -> None:
    put(store, "I", "lives_in", "Berlin", 0, "heuristic")
    put(store, "I", "lives_in", "Berlin", 5, "heuristic", negated=True)
    assert store.conn.execute("SELECT count(*) FROM beliefs WHERE status = 'active' AND "
                              "predicate = 'lives_in'").fetchone()[0] == 0


def test_a_replacing_statement_closes_the_older_value_of_its_topic(store) -> None:
    # "I love spicy food" ... "I prefer mild food now": the old taste ends when the new starts.
    put(store, "I", "likes", "spicy food", 0, "heuristic")
    put(store, "I", "likes", "Italian food", 1, "heuristic")
    put(store, "I", "likes", "jazz", 2, "heuristic")
    for _ in range(2):  # a replay changes nothing
        put(store, "I", "prefers", "mild food", 10, "heuristic", replaces=True)
    assert rows(store, "likes") == {"spicy food": ("superseded", False),
                                    "Italian food": ("superseded", False),
                                    "jazz": ("active", True)}
    assert rows(store, "prefers") == {"mild food": ("active", True)}
    ended = store.conn.execute("SELECT valid_to FROM beliefs WHERE object_text = 'spicy food' "
                               "AND negated = 0").fetchone()[0]
    assert ended.startswith("2024-01-11")


def test_a_replacing_plan_closes_the_plan_for_the_same_date_only(store) -> None:
    april = day(100)
    put(store, "I", "plans_to", "go to Japan", 0, "heuristic", valid_to=april)
    put(store, "I", "plans_to", "go to Lisbon", 0, "heuristic", valid_to=day(200))
    put(store, "I", "plans_to", "finish the deck", 0, "heuristic", valid_to=april)
    put(store, "I", "plans_to", "go to Seoul", 30, "heuristic", valid_to=april, replaces=True)
    assert rows(store, "plans_to") == {"go to Japan": ("superseded", False),
                                       "go to Lisbon": ("active", False),
                                       "finish the deck": ("active", False),
                                       "go to Seoul": ("active", False)}


def test_without_a_change_marker_values_accumulate(store) -> None:
    put(store, "I", "likes", "spicy food", 0, "heuristic")
    put(store, "I", "prefers", "mild food", 10, "heuristic")
    assert rows(store, "likes") == {"spicy food": ("active", True)}
