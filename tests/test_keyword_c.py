"""Keyword ranking in C (``memory_core/db/bm25.c``, loaded by ``db.sqlite.connect``) gives
exactly the ids, in exactly the order, of the Python path (``keyword._fts5_postings`` and
``_bm25_order``): on generated tenants of different sizes sharing one index, with rows that
hit several terms, repeated terms, equal scores (ties: newest first), deleted and rewritten
rows, terms absent for the tenant or everywhere, and plans of every shape. Without the
extension (not built, not loadable, or ``MNEMO_SQLITE_BM25=false``) recall ranks in Python
and gives the same results.

The extension is built by ``pip install -e .`` where a C compiler and sqlite3ext.h are
there; these tests skip without it locally and fail in CI (whose install must build it).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from memory_core import Memory
from memory_core.db import sqlite as db_sqlite
from memory_core.db.sqlite import BM25_LOADED, atomic, bm25_extension, connect
from memory_core.model.tenants import create_tenant
from memory_core.recall import keyword
from memory_core.recall.keyword import TermPlan, ranked_ids
from memory_core.settings import Settings
from tests.conftest import service_unavailable
from tests.helpers.memory import Store, day, insert_episodes, make_store

pytest_plugins = ("tests.helpers.recall_fixtures",)

COMMON = ["porto", "friday", "river"]
RARE = ["kayak", "violin", "lantern", "walrus", "quince", "zither"]
FILLER = [f"w{i}" for i in range(30)]
ABSENT = ["nowhere", "xylograph"]  # in no row of any tenant
WORDS = COMMON + RARE + FILLER + ABSENT
# (tenant, rows): sizes from below MIN_TENANT_ROWS_FOR_LOCAL to a few hundred
TENANTS = (("big", 400), ("mid", 120), ("small", 15), ("one", 1))


@pytest.fixture(scope="module", autouse=True)
def extension_built() -> None:
    if bm25_extension() is None:
        service_unavailable("mnemo's bm25 extension (memory_core/db/_bm25*: "
                            "`pip install -e .` with a C compiler and sqlite3ext.h)")


def _texts(rng: random.Random, n: int) -> list[str]:
    """Rows with common words in most of them, rare ones in a few, repeats (term
    frequencies), lengths that vary (bm25's length term) and many short rows of the same
    length and words (equal scores)."""
    out = []
    for _ in range(n):
        if rng.random() < 0.2:  # equal-scoring rows: the tie order is newest first
            out.append(rng.choice(["porto kayak", "kayak porto", "river friday w1"]))
            continue
        words = [w for w in COMMON if rng.random() < 0.6] * rng.randint(1, 3)
        words += [w for w in RARE if rng.random() < 0.08] * rng.randint(1, 2)
        words += rng.choices(FILLER, k=rng.randint(0, 25))
        rng.shuffle(words)
        out.append(" ".join(words) or "w0")
    return out


_ids = iter(range(1, 10**9))


def _write(conn: Any, tenant: str, texts: list[str], rng: random.Random) -> None:
    """The rows, then some deleted and some rewritten (FTS5 tombstones: a deleted row must
    count nowhere, in either path's document frequencies)."""
    rows = [(next(_ids), text) for text in texts]
    with atomic(conn):
        insert_episodes(conn, [(i, tenant, f"{tenant}-{i}", text, day(i / 50))
                               for i, text in rows])
        for i, _ in rows:
            if rng.random() < 0.05:
                conn.execute("DELETE FROM episodes WHERE id = ?", (i,))
            elif rng.random() < 0.05:
                conn.execute("UPDATE episodes SET text = ? WHERE id = ?",
                             (" ".join(rng.choices(RARE + COMMON, k=3)), i))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[tuple[Store, Any]]:
    """One index, several tenants, the same words: (the store, whose connection ranks in
    C, and a second connection to the same file ranking in Python)."""
    path = Path(tmp_path_factory.mktemp("kwc"))
    lite = make_store(path, tuple(t for t, _ in TENANTS))
    rng = random.Random(7)
    for tenant, n in TENANTS:
        _write(lite.conn, tenant, _texts(rng, n), rng)
    python = connect(lite.db.path, bm25=False)
    yield lite, python
    python.close()
    lite.db.close()


def _both(store: tuple[Store, Any], tenant: str, plan: TermPlan, window: int,
          table: str = "episodes") -> tuple[list[int], list[int]]:
    lite, python = store
    assert getattr(lite.conn, BM25_LOADED) is True
    assert getattr(python, BM25_LOADED) is False
    return (ranked_ids(lite.conn, table, tenant, plan, window),
            ranked_ids(python, table, tenant, plan, window))


@pytest.mark.parametrize("tenant", [t for t, _ in TENANTS])
@pytest.mark.parametrize(("essential", "other", "window"), [
    (("kayak", "violin"), (), 0),  # rare terms only
    (("kayak", "walrus"), ("porto", "friday"), 7),  # common rows fill in after the rare ones
    (("lantern",), ("porto", "river", "w3"), 400),  # a window past every common row
    ((), ("porto", "friday"), 12),  # only common terms: the best of their newest rows
    ((), ("porto",), 0),  # nothing to rank
    (("nowhere",), ("porto",), 9),  # an essential term in no row
    (("xylograph", "nowhere"), (), 5),  # no term in any row
    (("kayak", "kayak", "kayaks"), ("kayak", "porto", "porto"), 5),  # repeated words, one stem
    (tuple(WORDS), (), 0),  # every word essential: 41 tokens, tens of phrases in C
    (tuple(RARE), tuple(COMMON + FILLER), 60),
])
def test_c_ranks_as_python(store, tenant, essential, other, window) -> None:
    c, py = _both(store, tenant, TermPlan(essential, other), window)
    assert c == py
    if tenant == "big" and essential and essential[0] == "kayak" and window == 7:
        assert len(c) > 7  # not a vacuous comparison: rare rows and common ones


def test_rows_with_equal_scores_come_newest_first(store) -> None:
    """The generated rows hold many equal scores: both paths put the newest first."""
    c, py = _both(store, "big", TermPlan(("kayak",), ("porto",)), 0)
    lite, _ = store
    texts = dict(lite.conn.execute("SELECT id, text FROM episodes WHERE tenant = 'big'"))
    same = [i for i in c if texts[i] in ("porto kayak", "kayak porto")]
    assert len(same) >= 5 and same == sorted(same, reverse=True)
    assert c == py


def test_a_tenants_ranking_is_its_own(store) -> None:
    """Every tenant shares the words; each gets its own rows only, in the same order both
    ways."""
    lite, _ = store
    plan = TermPlan(("kayak", "lantern", "walrus"), ("porto", "w2"))
    for tenant, _ in TENANTS:
        c, py = _both(store, tenant, plan, 10)
        assert c == py
        tenant_rows = {r[0] for r in lite.conn.execute(
            "SELECT id FROM episodes WHERE tenant = ?", (tenant,))}
        assert set(c) <= tenant_rows


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 150),
       essential=st.lists(st.sampled_from(WORDS), max_size=6),
       other=st.lists(st.sampled_from(WORDS), max_size=6), window=st.integers(0, 80))
def test_c_ranks_as_python_on_generated_tenants(store, seed, n, essential, other,
                                                window) -> None:
    """A new tenant per example, of its own size and rows, in the shared index."""
    lite, _ = store
    rng = random.Random(seed)
    tenant = f"gen{seed}-{n}"
    if lite.conn.execute("SELECT 1 FROM episodes WHERE tenant = ?", (tenant,)).fetchone():
        tenant += "-again"
    create_tenant(lite.conn, tenant)
    _write(lite.conn, tenant, _texts(rng, n), rng)
    c, py = _both(store, tenant, TermPlan(tuple(essential), tuple(other)), window)
    assert c == py
    # and a plan as recall makes it, from the tenant's own frequencies
    plan = keyword.plan_terms(lite.conn, keyword.TermStats(), "episodes",
                              tuple(dict.fromkeys(essential + other)), 40, 30, tenant, 0.5)
    c, py = _both(store, tenant, plan, window)
    assert c == py


def test_the_c_scores_are_pythons(store) -> None:
    """Score for score, the same doubles (ties would otherwise break differently)."""
    lite, _ = store
    rows, total = keyword.fts_index.tenant_stats(lite.conn, "episodes", "big")
    tokens = list(keyword.word_tokens("big", ("kayak", "porto", "w4")).values())
    found, sizes, _ = keyword._fts5_postings(lite.conn, "episodes", tokens[:1], tokens[1:], 0)
    avgdl = total / rows
    expected: dict[int, float] = {}
    for df, tfs in found:
        idf = keyword._idf(rows, df)
        for doc, n in tfs.items():
            norm = keyword.K1 * (1 - keyword.B + keyword.B * keyword.fts_index.doc_length(
                sizes[doc]) / avgdl)
            expected[doc] = expected.get(doc, 0.0) + idf * (n * keyword.K1_PLUS_1 / (n + norm))
    match = (f"{keyword._phrases(tokens[:1])} OR ({keyword._phrases(tokens[1:])} AND "
             f"{keyword._phrases(tokens[:1])})")
    got = dict(lite.conn.execute(
        "SELECT rowid, mnemo_bm25(episodes_fts, ?, ?, ?) FROM episodes_fts "
        "WHERE episodes_fts MATCH ?", (rows, avgdl, 3, match)).fetchall())
    assert len(got) > 10 and got == expected


# --- without the extension -------------------------------------------------------------


def _recall_ids(settings: Settings, **env: str) -> tuple[list[Any], bool]:
    settings = Settings.from_env(env, data_dir=settings.data_dir)
    with Memory.open(settings) as mem:
        result = mem.recall("the kayak on the porto river, lantern", tenant="acme")
        return ([i.item_id for i in result.items],
                bool(getattr(mem._state.conn, BM25_LOADED, False)))


@pytest.fixture
def recall_store(seeded, settings) -> Settings:
    """A store Memory can open: the generated rows as turns (and their episodes)."""
    seeder, _ = seeded
    for text in _texts(random.Random(3), 150):
        seeder.turn("acme", text)
    return settings


def test_recall_is_the_same_without_the_extension(recall_store, monkeypatch) -> None:
    with_c, loaded = _recall_ids(recall_store)
    assert loaded and with_c
    off, loaded = _recall_ids(recall_store, MNEMO_SQLITE_BM25="false")
    assert not loaded and off == with_c
    monkeypatch.setattr(db_sqlite, "bm25_extension", lambda: None)  # not built
    missing, loaded = _recall_ids(recall_store)
    assert not loaded and missing == with_c


def test_an_extension_that_does_not_load_never_breaks_recall(recall_store, tmp_path,
                                                             monkeypatch) -> None:
    """A file that is no SQLite extension (built for something else, damaged): told once,
    recall ranks in Python."""
    with_c, _ = _recall_ids(recall_store)
    broken = tmp_path / "_bm25.so"
    broken.write_bytes(b"not a shared library")
    monkeypatch.setattr(db_sqlite, "bm25_extension", lambda: str(broken))
    monkeypatch.setattr(db_sqlite, "_bm25_warned", set())
    with capture_logs() as logs:
        got, loaded = _recall_ids(recall_store)
    assert not loaded and got == with_c
    warned = [e for e in logs if e["event"] == "bm25_extension_not_loaded"]
    assert len(warned) == 1 and warned[0]["fallback"] == "python"
