"""Keyword search at bounded cost (search.plan_terms / search.fts), and the compact recall
log read back as dicts."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from memory_core import Memory
from memory_core.clock import to_db, utcnow
from memory_core.db import fts as fts_index
from memory_core.recall import search
from memory_core.recall.candidates import Scope, load
from memory_core.recall.context import neighbours
from memory_core.recall.explain import last_log, recalls_of
from memory_core.recall.search import TermPlan, TermStats, plan_terms
from memory_core.recall.strategy import RecallStrategy
from memory_core.settings import Settings

pytest_plugins = ("tests.helpers.recall_fixtures",)
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _world(seeder) -> None:
    """40 turns naming Lisbon, 6 naming the kayak (4 of those Lisbon too)."""
    for i in range(40):
        extra = " with the red kayak" if i % 10 == 0 else ""
        seeder.turn("acme", f"walked around Lisbon on day {i}{extra}")
    for i in range(2):
        seeder.turn("acme", f"the kayak needs a new paddle, note {i}")


def test_rows_matching_a_rare_term_are_ranked_exactly_then_the_common_ones(seeded) -> None:
    seeder, db = seeded
    _world(seeder)
    conn = db.conn
    stats = TermStats()
    terms = ("kayak", "lisbon")
    # A ranking budget of 10 rows: "kayak" (6 rows) is ranked over every row it matches,
    # "lisbon" (40 rows) only adds to those rows and fills in after them.
    assert plan_terms(conn, stats, "episodes", terms, 1000, 10, "acme") == TermPlan(
        ("kayak",), ("lisbon",))
    scope = Scope(tenant="acme", now=to_db(utcnow()))
    got = search.fts(conn, "episode", scope, terms, 20, stats=stats, common_df=1000,
                     rank_budget=10)
    # Only this tenant's rows are in the index, so FTS5's own bm25 is the tenant's here.
    exact = conn.execute(
        "SELECT rowid, rank FROM episodes_fts WHERE episodes_fts MATCH ? ORDER BY rank",
        (fts_index.match("acme", "kayak", "lisbon"),)).fetchall()
    score = dict(exact)
    with_kayak = {r[0] for r in conn.execute(
        "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?",
        (fts_index.match("acme", "kayak"),))}
    assert len(with_kayak) == 6
    ids = [c.row_id for c in got]
    # The six kayak rows first, in exactly bm25's order over both terms (equal scores
    # newest first) ...
    assert sorted(ids[:6]) == sorted(with_kayak)
    assert ids[:6] == sorted(with_kayak, key=lambda r: (round(score[r], 9), -r))
    # ... then the newest 10 (the budget) of the rows matching only the common term.
    newest = [r[0] for r in conn.execute(
        "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ? ORDER BY rowid DESC",
        (fts_index.match("acme", "lisbon"),)) if r[0] not in with_kayak][:10]
    assert set(ids[6:]) == set(newest)
    # Unbounded (budget 0), the same first six.
    unbounded = search.fts(conn, "episode", scope, terms, 20, stats=TermStats(),
                           common_df=1000, rank_budget=0)
    assert [c.row_id for c in unbounded][:6] == ids[:6]


def test_only_common_terms_rank_their_newest_matches(seeded) -> None:
    seeder, db = seeded
    _world(seeder)
    scope = Scope(tenant="acme", now=to_db(utcnow()))
    # "lisbon" is common at common_df=20: it is searched only among its newest matches.
    plan = plan_terms(db.conn, TermStats(), "episodes", ("lisbon",), 20, 10, "acme")
    assert plan == TermPlan((), ("lisbon",))
    got = search.fts(db.conn, "episode", scope, ("lisbon",), 5, stats=TermStats(),
                     common_df=20, rank_budget=10)
    newest = [r[0] for r in db.conn.execute(
        "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ? ORDER BY rowid DESC "
        "LIMIT 10", (fts_index.match("acme", "lisbon"),))]
    assert len(got) == 5 and {c.row_id for c in got} <= set(newest)


def test_frequencies_and_row_counts_are_the_tenants_own(seeded) -> None:
    seeder, db = seeded
    _world(seeder)
    seeder.tenant("other")
    for i in range(7):
        seeder.turn("other", f"Lisbon again, and Lisbon, day {i}")
    stats = TermStats()
    assert stats.df(db.conn, "episodes", "acme", "lisbon") == 40
    assert stats.df(db.conn, "episodes", "other", "lisbon") == 7
    assert stats.df(db.conn, "episodes", "other", "kayak") == 0
    assert stats.tenant_rows(db.conn, "episodes", "acme") == 42
    assert stats.tenant_rows(db.conn, "episodes", "other") == 7


def test_the_recall_log_reads_back_as_dicts_in_either_format(seeded, mem) -> None:
    seeder, _ = seeded
    _world(seeder)
    result = mem.recall("the red kayak", tenant="acme", budget=3)
    mem.flush_recall_log()
    log = last_log(mem.ops_db.conn, "acme", result.log_id)
    assert log is not None and "format" not in log
    kept = [c for c in log["candidates"] if c["decision"] == "kept"]
    assert [c["id"] for c in kept] == [i.item_id for i in result.items]
    assert [c["reason"] for c in kept] == ["kept: rank 1", "kept: rank 2", "kept: rank 3"]
    first = kept[0]
    assert first["kind"] == "episode" and first["handle"] == 1
    assert first["turn_uids"] == list(result.items[0].turn_uids)
    assert first["components"]["rrf"] > 0 and "episode_fts" in first["lists"]
    dropped = [c for c in log["candidates"] if c["decision"] == "dropped"]
    assert dropped and all(c["reason"] == "dropped: over the item budget" for c in dropped)
    found = recalls_of(mem.ops_db.conn, "acme", first["id"])
    assert found[0]["log_id"] == result.log_id and found[0]["reason"] == "kept: rank 1"
    # A row written before the compact format (a dict per candidate) still reads.
    old_entry = {"id": "episode:ep_old", "kind": "episode", "handle": 1, "lists": {},
                 "score": 1.0, "components": {"rrf": 1.0}, "decision": "kept",
                 "reason": "kept: rank 1", "turn_uids": ["old"]}
    mem.ops_db.conn.execute(
        "INSERT INTO recall_log (tenant, query_digest, at, strategy, explanation) VALUES "
        "('acme', 'd', '2024-01-01T00:00:00.000000Z', 'default', ?)",
        (json.dumps({"recalled": ["episode:ep_old"], "candidates": [old_entry]}),))
    assert last_log(mem.ops_db.conn, "acme")["candidates"] == [old_entry]
    assert recalls_of(mem.ops_db.conn, "acme", "episode:ep_old")[0]["turn_uids"] == ["old"]


def test_neighbours_are_the_episodes_next_to_the_best_hits(seeded) -> None:
    seeder, db = seeded
    uids = [seeder.turn("acme", f"line {i}", session="s9") for i in range(5)]
    other = seeder.turn("acme", "another chat", session="s8")
    conn = db.conn
    scope = Scope(tenant="acme", now=to_db(utcnow()))
    episode_of = {r[0]: r[1] for r in conn.execute(
        "SELECT t.turn_uid, et.episode_id FROM turns t JOIN episode_turns et ON "
        "et.turn_id = t.id")}
    top = list(load(conn, "episode", scope, [episode_of[uids[2]], episode_of[other]]).values())
    top.sort(key=lambda c: c.turn_uids[0] != uids[2])  # the middle line first
    got = neighbours(conn, scope, top, span=1)
    # The turns just before and after the hit, in its session; nothing next to the lone
    # turn of the other session; the hits themselves are not their own neighbours.
    assert [c.turn_uids for c in got] == [(uids[1],), (uids[3],)]
    wider = neighbours(conn, scope, top[:1], span=2)
    assert [c.turn_uids for c in wider] == [(uids[1],), (uids[3],), (uids[0],), (uids[4],)]
    # A neighbour recall already holds is its own object, not read again.
    pool = {c.key: c for c in got[:1]}
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        again = neighbours(conn, scope, top, span=1, pool=pool)
    finally:
        conn.set_trace_callback(None)
    assert again[0] is got[0] and [c.turn_uids for c in again] == [(uids[1],), (uids[3],)]
    loads = [q for q in seen if "FROM episodes e NOT INDEXED" in q]
    [read] = [re.search(r"e\.id IN \(([^)]*)\)", q).group(1) for q in loads]  # type: ignore[union-attr]
    assert read.split(",") == [str(got[1].row_id)], loads


def test_a_helper_thread_changes_nothing_in_the_result(settings, seeded) -> None:
    seeder, _ = seeded
    _world(seeder)
    dense_too = RecallStrategy().with_(dense_with_keyword_embedder=True)  # a dense lane
    results, lists = [], set()
    for threads in (0, 2):
        s = Settings.from_env({}, data_dir=settings.data_dir, recall_helper_threads=threads)
        with Memory.open(s) as m:
            r = m.recall("the red kayak in Lisbon", tenant="acme", budget=20,
                         strategy=dense_too, now=NOW)
            results.append([(i.item_id, i.score, i.components) for i in r.items])
            m.recall("kayak", tenant="acme", strategy=dense_too)  # both lanes, again
            m.flush_recall_log()
            lists |= {k for c in last_log(m.ops_db.conn, "acme")["candidates"]
                      for k in c["lists"]}
            assert not r.keyword_only
    assert results[0] == results[1] and len(results[0]) == 20
    assert {"episode_dense", "episode_fts"} <= lists


def test_a_logged_recall_reads_back_its_candidates() -> None:
    """LOG_FORMAT 3: each candidate's lists, decision, turn pointers (kept ones only) and its
    score and components (float32s in one base64 string) come back as dicts; a missing or
    non-finite component is left out, a zero one kept; four decimals, six for the score."""
    from memory_core.recall.candidates import Candidate
    from memory_core.recall.explain import build_explanation, candidates

    def cand(row_id: int, score: float, comps: dict) -> Candidate:
        c = Candidate(kind="episode", row_id=row_id, uid=f"ep_{row_id}", text="t",
                      occurred_at=None, turn_uids=(f"u{row_id}",),
                      ranks={"episode_fts": row_id, "graph": 5})
        c.score, c.components = score, comps
        return c

    kept = cand(7, 1.25, {"time": 0.0, "rrf": 0.123456, "recency": float("nan"),
                          "ppr": 1.0, "speaker": None})
    dropped = cand(8, 0.5, {"subject": 0.25, "direct_cap": float("inf")})
    fact = cand(9, float("nan"), {"rrf": 0.5})
    body = json.loads(build_explanation(
        [kept, dropped, fact], {dropped.key: "dropped: over the fact budget"}, [kept],
        terms=3))
    assert body["format"] == 3 and body["recalled"] == ["episode:ep_7"] and body["terms"] == 3
    got = candidates(body)
    assert [c["id"] for c in got] == ["episode:ep_7", "episode:ep_8", "episode:ep_9"]
    assert got[0] == {"id": "episode:ep_7", "kind": "episode", "handle": 1,
                      "lists": {"episode_fts": 7, "graph": 5}, "score": 1.25,
                      "components": {"time": 0.0, "rrf": 0.1235, "ppr": 1.0},
                      "decision": "kept", "reason": "kept: rank 1", "turn_uids": ["u7"]}
    assert got[1]["components"] == {"subject": 0.25}
    assert (got[1]["decision"], got[1]["reason"]) == ("dropped", "dropped: over the fact budget")
    assert got[1]["turn_uids"] == [] and got[1]["handle"] is None
    # A candidate without a reason is "dropped"; a score that is not finite reads as None.
    assert (got[2]["reason"], got[2]["score"], got[2]["components"]) == ("dropped", None,
                                                                         {"rrf": 0.5})


def test_recall_log_rows_of_format_2_still_read() -> None:
    """A row written before format 3 (components as JSON numbers in COMPONENTS order, null
    where missing) reads back as it did."""
    from memory_core.recall.explain import candidates

    body = json.loads('{"format":2,"recalled":["episode:ep_7"],"candidates":['
                      '["episode:ep_7",1,1.250000,{"episode_fts":2},'
                      '[0.1235,1.0000,null,null,null,null,0],"kept",["u1"]],'
                      '["belief:b1",null,0.5,{},[],"items",[]]]}')
    got = candidates(body)
    assert got[0]["components"] == {"rrf": 0.1235, "ppr": 1.0, "time": 0}
    assert (got[0]["reason"], got[0]["turn_uids"]) == ("kept: rank 1", ["u1"])
    assert (got[1]["kind"], got[1]["reason"]) == ("belief", "dropped: over the item budget")


def test_bm25_order_puts_the_essential_rows_first_and_ties_newest_first() -> None:
    """``keyword._bm25_order``: rows holding an essential term before the others whatever
    their scores, each group by bm25, equal scores newest (highest id) first."""
    from memory_core.recall.keyword import _bm25_order

    # Three tokens over 100 rows; the same length everywhere, so scores follow tf and idf.
    found = [(10, {1: 1, 2: 1}), (10, {3: 1, 4: 2}), (12, {5: 3, 6: 3, 2: 1})]
    sizes = {doc: 20 for doc in range(1, 7)}
    got = _bm25_order(found, sizes, {1, 2, 3, 4}, 100, 2000, int)
    # 2 holds two tokens; 4 has tf 2; 3 and 1 tie (newest first); then 6 and 5, which tie
    # and score above 4, 3 and 1 but hold no essential token.
    assert got == [2, 4, 3, 1, 6, 5]
    assert _bm25_order(found, {}, set(), 100, 2000, int) == []
    assert _bm25_order(found, sizes, set(), 0, 0, int) == []
