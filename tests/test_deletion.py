"""Verified deletion: no byte of the deleted text left in any table; a digest-only tombstone."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from memory_core.errors import DeletionNotConfirmedError, NotFoundError
from memory_core.model import counts
from memory_core.model.beliefs import BeliefInput, mutate_belief
from memory_core.model.deletion import delete_memory, digest
from memory_core.model.turns import TurnInput
from memory_core.write.pipeline import process_turns
from tests.helpers import forget_name
from tests.helpers.memory import day, make_store, row_counts, scan_for

SECRET = "Zorblaxian quinceberry marmalade"


def extractor(turn):
    if "love" in turn.text:
        return [SimpleNamespace(subject="@speaker", predicate="likes",
                                object=turn.text.split("love ", 1)[1].rstrip("."))]
    return []


@pytest.fixture
def store(tmp_path: Path):
    s = make_store(tmp_path / "data")
    turns = [TurnInput("t1", "s1", f"u{i}", "user", text, day(i))
             for i, text in enumerate(["Hello there, nice weather.", f"I love {SECRET}.",
                                       "I love Jazz.", "Bye for now."])]
    process_turns(s.db, s.index, turns, extractor=extractor)
    yield s
    s.db.close()


def test_deleting_a_turn_leaves_no_byte_of_it(store) -> None:
    assert scan_for(store.conn, b"Zorblaxian")  # it is there before
    report = delete_memory(store.conn, store.index, "t1", "turn", "u1")
    assert report.deleted == {"turns": 1, "episodes": 1, "beliefs": 1, "entities": 1}
    for needle in (SECRET.encode(), b"zorblaxian", b"quinceberry", b"marmalade"):
        assert scan_for(store.conn, needle) == [], needle
    tombs = store.conn.execute("SELECT kind, digest, reason FROM tombstones").fetchall()
    assert {t[0] for t in tombs} == {"turn", "episode", "belief"}
    assert all(len(t[1]) == 64 and int(t[1], 16) >= 0 for t in tombs)
    turn_tomb = next(t for t in tombs if t[0] == "turn")
    assert turn_tomb[1] == digest("turn", "u1", f"I love {SECRET}.")
    assert counts.count_drift(store.conn, "t1") == {}
    # the rest is untouched
    assert store.conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 3
    assert scan_for(store.conn, b"Jazz")


def test_a_redelivered_turn_does_not_bring_a_deleted_turn_back(store) -> None:
    from memory_core.write.pipeline import extract_and_apply, record_turn_and_episode

    delete_memory(store.conn, store.index, "t1", "turn", "u1")
    before = row_counts(store.conn)
    again = TurnInput("t1", "s1", "u1", "user", f"I love {SECRET}.", day(1))
    assert record_turn_and_episode(store.db, store.index, again) is None
    assert extract_and_apply(store.db, store.index, "t1", "u1", extractor=extractor) == []
    assert process_turns(store.db, store.index, [again], extractor=extractor)[0].record is None
    assert row_counts(store.conn) == before
    assert scan_for(store.conn, b"Zorblaxian") == []


def test_deleting_a_belief_reopens_nothing_it_should_not(store) -> None:
    uid = store.conn.execute("SELECT belief_uid FROM beliefs WHERE object_text = 'Jazz'"
                             ).fetchone()[0]
    delete_memory(store.conn, store.index, "t1", "belief", uid)
    assert store.conn.execute("SELECT count(*) FROM beliefs WHERE object_text = 'Jazz'"
                              ).fetchone()[0] == 0
    assert store.conn.execute("SELECT count(*) FROM entities WHERE name = 'Jazz'"
                              ).fetchone()[0] == 0
    assert counts.count_drift(store.conn, "t1") == {}


def test_deleting_the_active_value_reopens_the_older_one(tmp_path: Path) -> None:
    s = make_store(tmp_path / "d")
    for place, when in (("Berlin", 0), ("Munich", 5)):
        out = mutate_belief(s.conn, s.index, "t1", BeliefInput("I", "lives_in", place, day(when)))
    delete_memory(s.conn, s.index, "t1", "belief", out.belief_id)
    assert s.conn.execute("SELECT object_text, status, valid_to FROM beliefs WHERE predicate = "
                          "'lives_in'").fetchall() == [("Berlin", "active", None)]
    s.db.close()


def test_an_unconfirmed_vector_delete_deletes_nothing(store, monkeypatch) -> None:
    before = row_counts(store.conn)
    monkeypatch.setattr(type(store.index), "delete", lambda self, conn, base, ids: len(ids))
    with pytest.raises(DeletionNotConfirmedError, match="nothing was deleted"):
        delete_memory(store.conn, store.index, "t1", "turn", "u1")
    assert row_counts(store.conn) == before
    assert scan_for(store.conn, b"Zorblaxian")


def test_unknown_refs_and_kinds(store) -> None:
    with pytest.raises(NotFoundError):
        delete_memory(store.conn, store.index, "t1", "turn", "nope")
    with pytest.raises(Exception, match="kind must be"):
        delete_memory(store.conn, store.index, "t1", "entity", "x")
    with pytest.raises(NotFoundError):  # another tenant's row is not found
        store.conn.execute("INSERT INTO tenants VALUES ('t2', '2024-01-01T00:00:00.000000Z')")
        delete_memory(store.conn, store.index, "t2", "turn", "u1")


def test_a_deleted_name_of_the_user_leaves_no_byte_of_it(tmp_path: Path) -> None:
    s = make_store(tmp_path / "d")
    uid = forget_name.tell(s)
    assert scan_for(s.conn, b"maya") and forget_name.keyword_hits(s, "maya")["beliefs"]
    assert s.conn.execute("SELECT count(*) FROM entity_merges").fetchone()[0] == 1
    delete_memory(s.conn, s.index, "t1", "belief", uid)
    # no table holds the name: belief texts and objects, aliases, entity names, the merge
    # ledger, the FTS5 segments and vocabulary; no keyword search finds it
    assert scan_for(s.conn, b"maya") == []
    assert forget_name.keyword_hits(s, "maya") == {"beliefs": [], "episodes": [], "turns": []}
    assert forget_name.texts(s) == {
        "Tom friend of user", "user lives in Porto", "user's sister has sibling user",
        "Anna friend of user", "Ben no longer colleague of user", "user related to Ben",
        "Carl friend of me"}
    assert forget_name.stale_vectors(s) == []  # each re-rendered text was re-embedded
    # what is not the name stays: the user is still the object, the hub still the user
    assert forget_name.rows_of(s.conn, "SELECT count(*) FROM beliefs WHERE object_entity_id "
                               "= 'user'") == [(4,)]
    assert forget_name.rows_of(s.conn, "SELECT name FROM entities WHERE entity_id = 'user'") \
        == [("user",)]
    assert counts.count_drift(s.conn, "t1") == {}
    s.db.close()


def test_a_deleted_name_keeps_what_only_looks_like_it(tmp_path: Path) -> None:
    s = make_store(tmp_path / "d")
    uid = forget_name.tell(s)
    mutate_belief(s.conn, s.index, "t1", BeliefInput("I", "likes", "Maya Angelou", day(9)))
    mutate_belief(s.conn, s.index, "t1", BeliefInput("Maya\u2019s old dog", "is_a", "beagle",
                                                     day(9)))
    mutate_belief(s.conn, s.index, "t1", BeliefInput("User's sister", "lives_in", "Lisbon",
                                                     day(9)))
    older = mutate_belief(s.conn, s.index, "t1", BeliefInput("I", "name_is", "Maya", day(-1)))
    delete_memory(s.conn, s.index, "t1", "belief", uid)
    # an older statement of the same name still gives it: nothing of it is forgotten
    assert forget_name.rows_of(s.conn, "SELECT name FROM entities WHERE entity_id = 'user'") \
        == [("Maya",)]
    assert "Anna friend of Maya" in forget_name.texts(s)
    delete_memory(s.conn, s.index, "t1", "belief", str(older.belief_uid))
    assert "Anna friend of user" in forget_name.texts(s)
    assert "user likes Maya Angelou" in forget_name.texts(s)  # another Maya: kept
    assert scan_for(s.conn, b"maya's") == [] and scan_for(s.conn, "maya\u2019s".encode()) == []
    # "Maya's sister" is the sister the user already had by another label: they merge
    assert forget_name.rows_of(s.conn, "SELECT name FROM entities WHERE name LIKE '%''s%' "
                               "ORDER BY name") == [("User's sister",), ("user's old dog",)]
    assert {"User's sister has sibling user", "User's sister lives in Lisbon",
            "user's old dog is a beagle"} <= forget_name.texts(s)
    assert counts.count_drift(s.conn, "t1") == {}
    s.db.close()
