"""Property: random turns and mutations for 3 tenants, applied in two random orders and once
more with every step repeated, give identical belief tables; invariants always hold."""

from __future__ import annotations

import itertools
import tempfile
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.errors import NotFoundError
from memory_core.model import counts
from memory_core.model.beliefs import BeliefInput, mutate_belief
from memory_core.model.predicates import PREDICATES
from memory_core.model.turns import TurnInput, recollect_turn
from memory_core.write.pipeline import process_turns
from tests.helpers.memory import belief_table, day, make_store

TENANTS = ("ta", "tb", "tc")
SUBJECTS = ("I", "Alice", "Bob", "Sam", "kazma_v2_4_0")
PREDICATES_USED = ("lives_in", "works_at", "likes", "friend_of", "name_is")
OBJECTS = {"lives_in": ("Berlin", "Munich", "Paris"), "works_at": ("Acme", "Globex"),
           "likes": ("Jazz", "Chess", "/tmp/notes.txt"), "friend_of": ("Alice", "Bob", "Sam"),
           "name_is": ("Sam", "Samantha")}
SOURCES = ("user_explicit", "operator", "heuristic", "llm_inferred")

mutation = st.builds(
    lambda tenant, subject, predicate, pick, when, source: (
        "mutate", tenant, subject, predicate, OBJECTS[predicate][pick % len(OBJECTS[predicate])],
        when, source),
    st.sampled_from(TENANTS), st.sampled_from(SUBJECTS), st.sampled_from(PREDICATES_USED),
    st.integers(0, 5), st.integers(0, 12), st.sampled_from(SOURCES))
turn = st.builds(
    lambda tenant, place, when, n: ("turn", tenant, place, when, n),
    st.sampled_from(TENANTS), st.sampled_from(("Berlin", "Paris", "Rome")), st.integers(0, 12),
    st.integers(0, 3))


def extractor(t):
    place = t.text.rsplit(" ", 1)[1]
    return [SimpleNamespace(subject="@speaker", predicate="lives_in", object=place),
            SimpleNamespace(subject="Alice", predicate="friend_of", object="@speaker")]


def apply(store, step) -> None:
    if step[0] == "mutate":
        _, tenant, subject, predicate, obj, when, source = step
        mutate_belief(store.conn, store.index, tenant,
                      BeliefInput(subject, predicate, obj, day(when), source=source))
    else:
        _, tenant, place, when, n = step
        uid = f"{tenant}-{place}-{when}-{n}"
        process_turns(store.db, store.index, [TurnInput(
            tenant, f"s{when // 4}", uid, "user", f"I live in {place}", day(when + n / 24))],
            extractor=extractor)


def check_invariants(conn) -> None:
    for tenant in TENANTS:
        assert counts.count_drift(conn, tenant) == {}
        slots = defaultdict(list)
        for subject, predicate, status, start, end, negated in conn.execute(
                "SELECT subject_id, predicate, status, valid_from, valid_to, negated FROM "
                "beliefs WHERE tenant = ?", (tenant,)):
            if PREDICATES[predicate].functional and status in ("active", "superseded") \
                    and not negated:
                slots[(subject, predicate)].append((start, end or "9999", status))
        for members in slots.values():
            assert sum(m[2] == "active" for m in members) <= 1
            spans = sorted(m for m in members if m[0] < m[1])
            for (_, end, _), (start, _, _) in itertools.pairwise(spans):
                assert end <= start  # never two values at one world time
        entities = {r[0] for r in conn.execute("SELECT entity_id FROM entities WHERE "
                                               "tenant = ?", (tenant,))}
        for subject, obj in conn.execute("SELECT subject_id, object_entity_id FROM beliefs "
                                         "WHERE tenant = ?", (tenant,)):
            assert subject in entities and (obj is None or obj in entities)
        assert all(r[0] == tenant for r in belief_table(conn, tenant))


def check_orders(stores, order_a, order_b) -> None:
    """Apply ``order_a`` to stores[0], ``order_b`` to stores[1], ``order_a`` with every step
    twice to stores[2]: the same belief tables, the invariants, no turn across tenants."""
    for step in order_a:
        apply(stores[0], step)
    for step in order_b:
        apply(stores[1], step)
    for step in order_a:
        apply(stores[2], step)
        apply(stores[2], step)
    tables = [belief_table(s.conn) for s in stores]
    assert tables[0] == tables[1]
    assert tables[0] == tables[2]
    for s in stores:
        check_invariants(s.conn)
    conn = stores[0].conn
    for tenant, other in itertools.permutations(TENANTS, 2):
        for (uid,) in conn.execute("SELECT turn_uid FROM turns WHERE tenant = ?", (other,)):
            with pytest.raises(NotFoundError):
                recollect_turn(conn, tenant, uid)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(mutation, turn), min_size=1, max_size=14), data=st.data())
def test_order_and_repetition_do_not_change_beliefs(steps, data) -> None:
    order_a = data.draw(st.permutations(steps))
    order_b = data.draw(st.permutations(steps))
    with tempfile.TemporaryDirectory() as tmp:
        stores = [make_store(Path(tmp) / name, TENANTS) for name in ("a", "b", "c")]
        try:
            check_orders(stores, order_a, order_b)
        finally:
            for s in stores:
                s.db.close()


@pytest.fixture(scope="module")
def pg_stores(primary_urls):
    """Three Postgres primaries (one database each), reset for every example."""
    from memory_core.db.pg_store import PgDatabase

    dbs = [PgDatabase(url, None) for url in primary_urls]
    for db in dbs:
        db.migrate()
    yield dbs
    for db in dbs:
        db.close()


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(mutation, turn), min_size=1, max_size=14), data=st.data())
def test_order_and_repetition_do_not_change_beliefs_on_postgres(pg_stores, steps, data) -> None:
    """The same property with the Postgres primary as the state store."""
    from tests.helpers.primary import make_pg_store

    order_a = data.draw(st.permutations(steps))
    order_b = data.draw(st.permutations(steps))
    stores = [make_pg_store(db.url, TENANTS, db=db) for db in pg_stores]
    check_orders(stores, order_a, order_b)
