"""Any query string is searched safely or refused with InvalidInputError; tenants never see
each other's memory; the pure parts (query terms, PageRank, strategies)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core import Memory
from memory_core.db import migrate_stores, open_state
from memory_core.embedders.factory import make_embedder
from memory_core.errors import InvalidInputError, UnknownTenantError
from memory_core.recall.ppr import personalized_pagerank
from memory_core.recall.query import fts_expression, prepare_query
from memory_core.recall.strategy import PRESETS, RecallStrategy, get_strategy
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from tests.helpers.recall_seed import Seeder

HOSTILE = [
    "", " ", "\x00", "a\x00b", '"', '""', "'", "*", "a*", "NEAR(a b)", "NEAR(", "a AND",
    "OR OR", "NOT x", "(", ")", "^a", "col:x", "text:secret", "{a b}:c", "a + b", "-x",
    "'; DROP TABLE beliefs; --", "\" OR 1=1 --", "\ud800", "🎉🎉", "é" * 4000, "\u202e",
    "x" * 4096, "%", "_", "\\", "\r\n\t", "ﬁ ligature", "İstanbul",
]
GIB = st.text(alphabet=st.characters(), max_size=300) | st.text(
    alphabet=st.sampled_from(list('"*()^:+-{}NEARORAND\x00 \'\\%_,.')), max_size=60)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[Memory]:
    settings = Settings.from_env({}, data_dir=tmp_path_factory.mktemp("safety"))
    migrate_stores(settings)
    db = open_state(settings)
    seeder = Seeder(db.conn, VectorIndex(make_embedder(settings)))
    for tenant in ("red", "blue"):
        seeder.tenant(tenant)
        seeder.entity(tenant, "ana", "Ana")
        for i in range(6):
            uid = seeder.turn(tenant, f"{tenant}-secret-{i}: Ana likes the {tenant} lake "
                                      f"and plays chess on day {i}")
            seeder.belief(tenant, "ana", "likes", f"{tenant} thing {i}", turn_uid=uid,
                          subject_name="Ana")
    seeder.tenant("empty")  # exists, holds nothing
    db.close()
    mem = Memory.open(settings)
    yield mem
    mem.close()


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_are_searched_safely(world: Memory, query: str) -> None:
    alone = world.recall(query, tenant="red", budget=50)
    assert all("blue" not in i.text.lower() for i in alone.items), alone.items
    # Searched, not dropped: a known word beside the hostile text still finds red's memory
    # (and after "DROP TABLE" and friends, the memory is still there to be found).
    mixed = world.recall(f"lake {query}"[:4096], tenant="red", budget=50)
    found = [i.text for i in mixed.items]
    assert any("the red lake" in text for text in found), found
    assert all("blue" not in text.lower() for text in found), found


def test_too_long_and_non_string_queries_are_refused_clearly(world: Memory) -> None:
    with pytest.raises(InvalidInputError, match=r"4096.*MNEMO_MAX_QUERY_CHARS"):
        world.recall("x" * 100_000, tenant="red")
    for bad in (None, b"bytes", 42, ["a"]):
        with pytest.raises(InvalidInputError, match="must be a str"):
            world.recall(bad, tenant="red")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        world.recall("x", tenant="Robert'); DROP TABLE tenants;--")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=GIB)
def test_arbitrary_queries_never_raise(world: Memory, query: str) -> None:
    world.recall(query, tenant="blue")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=GIB | st.sampled_from(["ana lake chess", "red secret", "blue thing", "Ana"]),
       tenant=st.sampled_from(["red", "blue", "empty", "nobody"]))
def test_a_tenant_never_sees_another_tenants_memory(world: Memory, query: str,
                                                    tenant: str) -> None:
    if tenant == "nobody":  # never created: refused, as after_turn refuses it
        with pytest.raises(UnknownTenantError, match="mnemo tenant add nobody"):
            world.recall(query, tenant=tenant)
        return
    result = world.recall(query, tenant=tenant, budget=50)
    other = {"red": "blue", "blue": "red", "empty": "re"}[tenant]
    for item in result.items:
        assert tenant != "empty"
        assert other not in item.text.lower(), item


def test_the_fts_expression_is_only_quoted_words() -> None:
    q = prepare_query('NEAR(a b) "x" OR y* col:z ^w', max_chars=100)
    assert q.fts == '"near" OR "b" OR "x" OR "y" OR "col" OR "z" OR "w"'
    assert fts_expression(()) is None
    assert prepare_query("the and of", max_chars=100).fts is None


def test_pagerank_favours_what_the_seed_reaches() -> None:
    adj = {"s": {"a": 1.0}, "a": {"s": 1.0, "b": 1.0}, "b": {"a": 1.0}, "c": {"d": 1.0},
           "d": {"c": 1.0}}
    scores = personalized_pagerank(adj, {"s": 1.0})
    assert scores["a"] > scores["b"] > 0 and scores["c"] == scores["d"] == 0
    assert abs(sum(scores.values()) - 1.0) < 1e-6
    assert set(personalized_pagerank(adj, {"zz": 1.0}).values()) == {0.0}


def test_strategies_are_frozen_data() -> None:
    assert get_strategy(None) is PRESETS["default"]
    assert get_strategy("fast").ppr_enabled is False
    with pytest.raises(InvalidInputError):
        get_strategy("nope")
    with pytest.raises(InvalidInputError):
        RecallStrategy().with_(k={"bogus": 3})
    with pytest.raises(AttributeError):
        PRESETS["default"].rrf_k = 1  # type: ignore[misc]


def test_time_cues_read_months_and_years_not_the_verb_may() -> None:
    from memory_core.recall.query import time_cue

    cue = time_cue("What did Ana do in May 2023?")
    assert cue.months == {5} and cue.years == {2023}
    assert cue.matches("2023-05-08T13:56:00.000000Z") == 1.0
    assert cue.matches("2023-06-08T13:56:00.000000Z") == 0.0
    assert not time_cue("may I ask what you may like?")
    assert time_cue("sometime in sept. or Jan 5").months == {1}
