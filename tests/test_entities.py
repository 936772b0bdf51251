"""Entities: stable ids, rename, merge with the ledger archived first, the self hub."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.model import counts
from memory_core.model.beliefs import BeliefInput, mutate_belief
from memory_core.model.entities import HUB, lookup, rename_entity
from memory_core.model.merges import merge_entities
from memory_core.model.tenants import create_tenant
from tests.helpers.memory import belief_table, day, make_store


@pytest.fixture
def store(tmp_path: Path):
    s = make_store(tmp_path / "data")
    yield s
    s.db.close()


def put(store, subject, predicate, obj, when, source="user_explicit"):
    return mutate_belief(store.conn, store.index, "t1",
                         BeliefInput(subject, predicate, obj, day(when), source=source))


def test_create_tenant_makes_the_hub(store) -> None:
    assert store.conn.execute("SELECT entity_id, name FROM entities WHERE tenant = 't1'"
                              ).fetchall() == [("user", "user")]
    assert create_tenant(store.conn, "t1") is False  # idempotent


@pytest.mark.parametrize("label", ["user", "You", "I", "me", "myself", "  USER "])
def test_self_labels_collapse_onto_the_hub(store, label) -> None:
    assert lookup(store.conn, "t1", label) == HUB


def test_ids_are_stable_and_rename_keeps_them(store) -> None:
    out = put(store, "Shipx", "works_on", "the launch", 0)
    eid = out.subject_id
    assert put(store, "shipx", "works_on", "the docs", 1).subject_id == eid
    result = rename_entity(store.conn, store.index, "t1", eid, "ShipX Pro")
    assert result.old_name == "Shipx" and result.beliefs_rerendered >= 2
    assert lookup(store.conn, "t1", "shipx") == eid  # the old label is an alias
    assert lookup(store.conn, "t1", "ShipX Pro") == eid
    texts = [r[0] for r in store.conn.execute("SELECT text FROM beliefs WHERE subject_id = ?",
                                              (eid,))]
    assert all(t.startswith("ShipX Pro ") for t in texts)
    anchor = store.conn.execute("SELECT object_text FROM beliefs WHERE predicate = "
                                "'related_to'").fetchone()
    assert anchor == ("ShipX Pro",)


def test_a_renamed_object_keeps_one_value_under_its_new_name(store) -> None:
    """``user has_sibling Anna``, Anna renamed Ann, then "my sister Ann": one sister, named
    Ann; the old name is no longer a sibling of its own."""
    eid = put(store, "user", "has_sibling", "Anna", 0).object_entity_id
    put(store, "Bob", "has_sibling", "Anna", 0)
    rename_entity(store.conn, store.index, "t1", eid, "Ann")
    assert put(store, "user", "has_sibling", "Ann", 2).object_entity_id == eid
    current = store.conn.execute(
        "SELECT subject_id, object_text, text FROM beliefs WHERE predicate = 'has_sibling' "
        "AND status = 'active' ORDER BY subject_id").fetchall()
    bob = lookup(store.conn, "t1", "Bob")
    assert sorted(current) == sorted([(bob, "Ann", "Bob has sibling Ann"),
                                      ("user", "Ann", "user has sibling Ann")])
    assert store.conn.execute("SELECT count(*) FROM beliefs WHERE object_text = 'Anna'"
                              ).fetchone() == (0,)


def test_rename_refuses_a_name_in_use(store) -> None:
    a = put(store, "Alice", "likes", "Jazz", 0).subject_id
    put(store, "Bob", "likes", "Jazz", 0)
    with pytest.raises(InvalidInputError, match="merge"):
        rename_entity(store.conn, store.index, "t1", a, "Bob")
    with pytest.raises(NotFoundError):
        rename_entity(store.conn, store.index, "t1", "ent_nope", "Carol")


def test_merge_rewires_records_and_archives_first(store) -> None:
    a = put(store, "Bobby", "lives_in", "Berlin", 0).subject_id
    b = put(store, "Robert", "works_at", "Acme", 0).subject_id
    c = put(store, "Rob", "likes", "Chess", 0).subject_id
    merge_entities(store.conn, store.index, "t1", c, a)  # Rob -> Bobby (ledger row 1)
    result = merge_entities(store.conn, store.index, "t1", a, b)  # Bobby -> Robert
    assert result.beliefs_rewired == 2
    subjects = {r[0] for r in store.conn.execute(
        "SELECT subject_id FROM beliefs WHERE predicate != 'related_to'")}
    assert subjects == {b}
    assert {lookup(store.conn, "t1", n) for n in ("Rob", "Bobby", "Robert")} == {b}
    archived = store.conn.execute("SELECT from_entity_id, into_entity_id FROM "
                                  "entity_merges_archive").fetchall()
    assert (c, a) in archived  # the ledger row naming Bobby was archived before Bobby went
    live = store.conn.execute("SELECT from_entity_id, into_entity_id FROM entity_merges "
                              "ORDER BY id").fetchall()
    assert live == [(c, b), (a, b)]
    assert store.conn.execute("SELECT count(*) FROM entities WHERE entity_id IN (?, ?)",
                              (a, c)).fetchone()[0] == 0
    assert counts.count_drift(store.conn, "t1") == {}
    anchors = store.conn.execute("SELECT object_entity_id FROM beliefs WHERE "
                                 "predicate = 'related_to'").fetchall()
    assert anchors == [(b,)]


def test_the_hub_cannot_be_merged_away(store) -> None:
    a = put(store, "Alice", "likes", "Jazz", 0).subject_id
    with pytest.raises(InvalidInputError):
        merge_entities(store.conn, store.index, "t1", HUB, a)


@pytest.mark.parametrize("name_first", [True, False])
def test_the_users_own_name_collapses_onto_the_hub(tmp_path: Path, name_first) -> None:
    store = make_store(tmp_path / "d")
    steps = [lambda: put(store, "I", "name_is", "Mubder", 0),
             lambda: put(store, "Mubder", "likes", "Jazz", 1, "heuristic")]
    for step in steps if name_first else reversed(steps):
        step()
    assert lookup(store.conn, "t1", "Mubder") == HUB
    assert store.conn.execute("SELECT name FROM entities WHERE entity_id = 'user'"
                              ).fetchone() == ("Mubder",)
    table = [(r[2], r[3], r[4], r[7]) for r in belief_table(store.conn)]
    assert ("user", "likes", "Jazz", "Mubder likes Jazz") in table
    assert not any(r[1] == "related_to" for r in table)
    assert counts.count_drift(store.conn, "t1") == {}
    store.db.close()
