"""Keyword search on the Postgres primary ranks exactly as on SQLite: the same rows written
to a SQLite store and to the primary give the same ranked ids for every plan — rare terms
only, rare and common ones (the newest rows holding only common terms fill the list), only
common ones, and the plans ``plan_terms`` makes with terms left out for being too common —
each with the tenant's own statistics while another tenant shares the words."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core.clock import to_db
from memory_core.db.pg_store import PgDatabase
from memory_core.db.sqlite import atomic
from memory_core.recall import keyword, search
from memory_core.recall.candidates import Scope
from tests.helpers.memory import Store, day, insert_episodes, make_store
from tests.helpers.primary import make_pg_store

COMMON = ["porto", "friday", "river"]  # in most of t1's rows
RARE = ["kayak", "violin", "lantern", "walrus", "quince", "zither"]
FILLER = [f"w{i}" for i in range(40)]
NOW = to_db(day(400))


def _texts(seed: int, n: int) -> list[str]:
    """Rows with common words in most of them, rare ones in a few, repeats (term
    frequencies) and lengths that vary (bm25's length term)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [w for w in COMMON if rng.random() < 0.6] * rng.randint(1, 2)
        words += [w for w in RARE if rng.random() < 0.04]
        words += rng.choices(FILLER, k=rng.randint(2, 25))
        rng.shuffle(words)
        out.append(" ".join(words))
    return out


def _write(store: Store) -> None:
    """The same rows, with the same ids, in either store: t1's and t2's interleaved."""
    rows = [(i + 1, "t1" if i % 3 else "t2", text)
            for i, text in enumerate(_texts(5, 600))]
    conn = store.conn
    with atomic(conn):
        insert_episodes(conn, [(i, tenant, f"e{i}", text, day(i / 2)) for i, tenant, text in rows])


@pytest.fixture(scope="module")
def stores(primary_urls, tmp_path_factory) -> Iterator[tuple[Store, Store]]:
    lite = make_store(Path(tmp_path_factory.mktemp("lite")), ("t1", "t2"))
    db = PgDatabase(primary_urls[1], None)
    db.migrate()
    prim = make_pg_store(db.url, ("t1", "t2"), db=db)
    for store in (lite, prim):
        _write(store)
    yield lite, prim
    lite.db.close()
    db.close()


def _both(stores: tuple[Store, Store], fn: Any) -> tuple[Any, Any]:
    return fn(stores[0].conn), fn(stores[1].conn)


def test_the_same_index_statistics(stores) -> None:
    lite, prim = _both(stores, lambda c: sorted(tuple(r) for r in c.execute(
        "SELECT tbl, tenant, rows, tokens FROM fts_stats WHERE tbl = 'episodes'").fetchall()))
    assert lite == prim and len(lite) == 2


@pytest.mark.parametrize(("essential", "other", "window"), [
    (("kayak", "violin"), (), 0),  # rare terms only
    (("kayak", "walrus"), ("porto", "friday"), 7),  # rare and common: common fill the rest
    (("lantern",), ("porto", "river", "w3"), 40),
    ((), ("porto", "friday"), 12),  # only common terms: the newest of their rows
    (("quince", "zither", "kayak", "violin", "lantern", "walrus"), ("w1",), 5),
    (("nothing",), ("porto",), 9),  # an essential term with no row
])
def test_ranked_ids_are_sqlites(stores, essential, other, window) -> None:
    plan = keyword.TermPlan(essential, other)
    lite, prim = _both(stores, lambda c: keyword.ranked_ids(c, "episodes", "t1", plan, window))
    assert lite == prim
    rare = keyword.ranked_ids(stores[0].conn, "episodes", "t1", keyword.TermPlan(essential), 0)
    assert len(lite) == len(rare) + (window if other else 0)  # the fill is there, and whole
    assert len(lite) > 5


@pytest.mark.parametrize("terms", [
    ("porto", "kayak", "friday", "w7"), ("river", "violin", "w2", "w9", "lantern"),
    ("porto", "friday", "river"), ("walrus",), tuple(FILLER[:20]),
])
def test_planned_searches_are_sqlites(stores, terms) -> None:
    """Through ``plan_terms`` (the tenant's document frequencies; a term in ``common_df``
    rows or more left out) and the load of the visible rows, as recall searches."""
    scope = Scope("t1", NOW)

    def run(conn: Any, common_df: int, budget: int) -> list[int]:
        found = search.fts(conn, "episode", scope, terms, 15, stats=search.TermStats(),
                           common_df=common_df, rank_budget=budget, local_fraction=0.9)
        return [c.row_id for c in found]

    for common_df, budget in ((250, 40), (100, 10), (10_000, 0)):
        lite, prim = _both(stores, lambda c, d=common_df, b=budget: run(c, d, b))
        assert lite == prim
        assert len(lite) >= 10  # 15, or the window of the newest rows when all are common


def test_a_common_term_is_left_out_the_same_way(stores) -> None:
    """The planner's inputs are the same on both engines: the document frequencies (so the
    same terms are left out, essential and other) and the tenant's row count."""
    words = ("porto", "kayak", "friday", "w7", "violin")
    lite, prim = _both(stores, lambda c: search.plan_terms(
        c, search.TermStats(), "episodes", words, 250, 40, "t1", 0.9))
    assert lite == prim
    assert "porto" not in (*lite.essential, *lite.other)  # too common: left out
    assert lite.essential and lite.other


def test_a_common_term_is_counted_only_up_to_the_cap(stores) -> None:
    """On the primary the planner counts a term's postings only as far as it needs: a term
    in ``cap`` rows or more comes back as ``cap``; a rarer one, and every count on SQLite
    (FTS5 counts in C), is exact; a cached capped count never answers a higher cap."""
    lite, prim = stores
    words = ("porto", "kayak", "w7")
    exact = keyword.TermStats().dfs(lite.conn, "episodes", "t1", words)
    assert exact == keyword.TermStats().dfs(prim.conn, "episodes", "t1", words)
    assert exact["porto"] > 200 > exact["kayak"] > 0
    stats = keyword.TermStats()
    capped = stats.dfs(prim.conn, "episodes", "t1", words, cap=100)
    assert capped == {w: min(n, 100) for w, n in exact.items()}
    assert keyword.TermStats().dfs(lite.conn, "episodes", "t1", words, cap=100) == exact
    assert stats.dfs(prim.conn, "episodes", "t1", words, cap=50)["porto"] == 100  # cached
    assert stats.dfs(prim.conn, "episodes", "t1", words) == exact  # counted again, in full
    assert stats.dfs(prim.conn, "episodes", "t2", ("porto",), cap=10) == {"porto": 10}
