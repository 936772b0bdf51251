"""Other tenants change nothing: adding, changing or deleting another tenant's memories never
changes a tenant's recall (items, order, scores, and whatever else ``to_dict`` carries), and
keyword search ranks a tenant's rows by that tenant's own bm25.

Real SQLite files, the real recall path; the other tenants' memories share the tenant's
words, so any statistic taken from the whole index would move.
"""

from __future__ import annotations

import math
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core import Memory
from memory_core.db import fts, migrate_stores, open_state
from memory_core.db.sqlite import atomic, sqlite_module
from memory_core.embedders.factory import make_embedder
from memory_core.model.deletion import delete_memory
from memory_core.recall import keyword
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from tests.helpers.recall_seed import Seeder

pytest_plugins = ("tests.helpers.recall_fixtures",)

WORDS = ("Ana", "Ben", "Lisbon", "Porto", "kayak", "paddle", "violin", "lesson", "jazz",
         "club", "river", "tram", "pizza", "garden", "painting", "adoption", "friday",
         "concert", "hiking", "recipe")
QUERIES = ("What did Ana say about the kayak in Lisbon?", "When is the violin lesson?",
           "jazz club in Porto on friday", "painting and hiking with Ben")
TENANT = "me"
OTHERS = ("other1", "other2")

sentence = st.lists(st.sampled_from(WORDS), min_size=2, max_size=9).map(" ".join)
add_turn = st.tuples(st.just("turn"), st.sampled_from(OTHERS), sentence)
add_belief = st.tuples(st.just("belief"), st.sampled_from(OTHERS),
                       st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)))
change = st.tuples(st.just("change"), st.sampled_from(OTHERS), sentence)
delete = st.tuples(st.just("delete"), st.sampled_from(OTHERS), st.integers(0, 50))
new_tenant = st.tuples(st.just("tenant"), st.just("late"), st.lists(sentence, max_size=12))
operation = st.one_of(add_turn, add_belief, change, delete, new_tenant)


NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _result(mem: Memory, query: str) -> dict[str, Any]:
    out = mem.recall(query, tenant=TENANT, budget=12, now=NOW).to_dict()
    out.pop("timings_ms")
    out.pop("log_id")
    return out


def _apply(seeder: Seeder, index: VectorIndex, op: tuple[str, str, Any]) -> None:
    kind, tenant, arg = op
    conn = seeder.conn
    if kind == "turn":
        seeder.turn(tenant, arg)
    elif kind == "belief":
        seeder.belief(tenant, "user", "likes", f"{arg[0]} {arg[1]}")
    elif kind == "change":  # a merge rewrites an episode's text (recon_episodes)
        row = conn.execute("SELECT id FROM episodes WHERE tenant = ? ORDER BY id DESC LIMIT 1",
                           (tenant,)).fetchone()
        if row:
            with atomic(conn):
                conn.execute("UPDATE episodes SET text = ? WHERE id = ?", (arg, row[0]))
    elif kind == "delete":  # through the verified delete path (FTS optimised, and so on)
        uids = [r[0] for r in conn.execute("SELECT turn_uid FROM turns WHERE tenant = ? "
                                           "ORDER BY id", (tenant,))]
        if uids:
            delete_memory(conn, index, tenant, "turn", uids[arg % len(uids)])
    else:
        if not conn.execute("SELECT 1 FROM tenants WHERE tenant = ?", (tenant,)).fetchone():
            seeder.tenant(tenant)
        for text in arg:
            seeder.turn(tenant, text)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mine=st.lists(sentence, min_size=1, max_size=25),
       theirs=st.lists(st.tuples(st.sampled_from(OTHERS), sentence), max_size=25),
       ops=st.lists(operation, min_size=1, max_size=8))
def test_other_tenants_never_change_a_tenants_recall(
        mine: list[str], theirs: list[tuple[str, str]],
        ops: list[tuple[str, str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Settings.from_env({}, data_dir=Path(tmp), log_level="error")
        migrate_stores(cfg)
        db = open_state(cfg, migrate=False)
        index = VectorIndex(make_embedder(cfg))
        seeder = Seeder(db.conn, index)
        for tenant in (TENANT, *OTHERS):
            seeder.tenant(tenant)
        for i, text in enumerate(mine):  # the same rows, times and uids on every replay
            seeder.turn(TENANT, text, uid=f"mine{i}", at=NOW - timedelta(days=len(mine) - i))
            if i % 3 == 0:
                seeder.belief(TENANT, "user", "likes", text)
        for tenant, text in theirs:
            seeder.turn(tenant, text)
        with Memory.open(cfg) as mem:
            before = [_result(mem, q) for q in QUERIES]
        for op in ops:
            _apply(seeder, index, op)
        with Memory.open(cfg) as mem:  # fresh caches
            after = [_result(mem, q) for q in QUERIES]
        db.close()
    assert after == before


def test_keyword_search_is_fts5_bm25_over_the_tenants_rows_alone(seeded) -> None:
    """Ranked as FTS5 ranks an index holding nothing but this tenant's rows."""
    seeder, db = seeded
    texts = ["Ana and Ben took the kayak down the river in Lisbon",
             "the violin lesson moved to friday", "kayak kayak kayak", "Lisbon tram at night",
             "jazz club in Porto with Ana", "a recipe for pizza", "river hiking near Porto",
             "Ben paints the garden; Ana plays violin in the jazz club on friday"]
    for i, text in enumerate(texts * 3):
        seeder.turn("acme", f"{text} {i}")
    seeder.tenant("crowd")
    for i in range(60):
        seeder.turn("crowd", f"kayak river Lisbon violin friday Porto {i}")
    words = ("kayak", "lisbon", "violin", "friday", "porto", "jazz")
    got = keyword.ranked_ids(db.conn, "episodes", "acme", keyword.TermPlan(words), 0)

    alone = sqlite_module().connect(":memory:")
    alone.execute("CREATE VIRTUAL TABLE x USING fts5(text, tokenize='ascii')")
    alone.executemany("INSERT INTO x (rowid, text) VALUES (?, ?)", [
        (r[0], fts.index_text("acme", r[1])) for r in db.conn.execute(
            "SELECT id, text FROM episodes WHERE tenant = 'acme'")])
    expected = alone.execute("SELECT rowid, bm25(x) FROM x WHERE x MATCH ? ORDER BY rank, rowid",
                             (fts.match("acme", *words),)).fetchall()
    assert len(got) == len(expected) > 20
    # The same order, ties (equal scores) aside.
    scores = dict(expected)
    assert [round(scores[i], 9) for i in got] == [round(s, 9) for _, s in expected]
    assert not math.isclose(scores[got[0]], scores[got[-1]])


def _alone_bm25(db: Any, tenant: str, words: tuple[str, ...]) -> dict[int, float]:
    """FTS5's own bm25 of every row of an index holding only ``tenant``'s episodes."""
    alone = sqlite_module().connect(":memory:")
    alone.execute("CREATE VIRTUAL TABLE x USING fts5(text, tokenize='ascii')")
    alone.executemany("INSERT INTO x (rowid, text) VALUES (?, ?)", [
        (r[0], fts.index_text(tenant, r[1])) for r in db.conn.execute(
            "SELECT id, text FROM episodes WHERE tenant = ?", (tenant,))])
    return dict(alone.execute("SELECT rowid, bm25(x) FROM x WHERE x MATCH ?",
                              (fts.match(tenant, *words),)).fetchall())


def test_rare_and_common_terms_rank_as_fts5_over_the_tenants_rows_alone(seeded) -> None:
    """With essential and other terms: every row holding an essential term, by FTS5's bm25
    over all the terms (the other terms' frequencies counted in those rows only, their
    document counts over all the tenant's rows), then the newest ``window`` rows holding
    only other terms, by the same bm25."""
    seeder, db = seeded
    for i in range(40):  # "porto" and "friday" common, "kayak" and "violin" rare
        words = ["porto"] * (1 + i % 3) + ["friday"] * (i % 2) + ["kayak"] * (i % 9 == 0) + [
            "violin"] * (i % 13 == 0) + ["word"] * (i % 5)
        seeder.turn("acme", " ".join(words) + f" {i}")
    seeder.tenant("crowd")
    for i in range(50):
        seeder.turn("crowd", f"kayak porto friday violin {i}")
    plan = keyword.TermPlan(("kayak", "violin"), ("porto", "friday"))
    window = 7
    got = keyword.ranked_ids(db.conn, "episodes", "acme", plan, window)

    scores = _alone_bm25(db, "acme", ("kayak", "violin", "porto", "friday"))  # negative
    rare = set(_alone_bm25(db, "acme", ("kayak", "violin")))
    fill = sorted(set(scores) - rare, reverse=True)[:window]
    assert len(rare) == 8 and len(fill) == window and len(got) == len(rare) + window
    assert set(got[:len(rare)]) == rare and set(got[len(rare):]) == set(fill)
    for part in (got[:len(rare)], got[len(rare):]):  # by score (ties aside), best first
        expected = sorted(round(scores[i], 9) for i in part)
        assert [round(scores[i], 9) for i in part] == expected
    assert len({round(scores[i], 9) for i in got[:len(rare)]}) > 3


def test_a_search_reads_only_the_tenants_postings(seeded) -> None:
    seeder, db = seeded
    seeder.turn("acme", "the kayak in Lisbon")
    seeder.tenant("crowd")
    for i in range(30):
        seeder.turn("crowd", f"kayak {i}")
    token = fts.search_tokens("acme", ["kayak"])[0]
    docs = [r[0] for r in db.conn.execute("SELECT doc FROM episodes_fts_i WHERE term = ?",
                                          (token,))]
    tenants = {r[0] for r in db.conn.execute(
        f"SELECT DISTINCT tenant FROM episodes WHERE id IN ({','.join('?' * len(docs))})", docs)}
    assert len(docs) == 1 and tenants == {"acme"}
    assert fts.tenant_stats(db.conn, "episodes", "acme") == (1, 4)  # "the" is a token too


def test_a_deleted_memory_leaves_no_token_and_no_statistic(seeded, settings) -> None:
    seeder, db = seeded
    keep = seeder.turn("acme", "the kayak trip to Lisbon")
    gone = seeder.turn("acme", "my zanzibarian passphrase is quokkaberry")
    index = VectorIndex(make_embedder(settings))
    before = fts.tenant_stats(db.conn, "episodes", "acme")
    delete_memory(db.conn, index, "acme", "turn", gone)
    tokens = fts.search_tokens("acme", ["zanzibarian", "passphrase", "quokkaberry"])
    for table in ("turns", "episodes"):
        marks = ",".join("?" * len(tokens))
        assert db.conn.execute(f"SELECT count(*) FROM {table}_fts_i WHERE term IN ({marks})",
                               tokens).fetchone()[0] == 0
    assert fts.tenant_stats(db.conn, "episodes", "acme") == (before[0] - 1, before[1] - 5)
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = b"".join(p.read_bytes() for p in settings.data_dir.glob("memory_state.db*"))
    assert not any(t.encode() in raw for t in tokens)  # optimised and zeroed, not just hidden
    assert keep and fts.search_tokens("acme", ["kayak"])[0].encode() in raw
