"""Keyword postings held in the chat process (``recall.resident``) give exactly the store's
keyword lists (``keyword.ranked_ids``, in C and in Python; ``plan_terms``' counts), and stay
so through every kind of write by another connection: inserts, text rewrites and deletes of
episodes and beliefs, the tenant's own and other tenants'. They catch up from the change log
(``recall_changes``) without being rebuilt; a log entry lost, or a log pruned past them, is
detected by the counts in ``fts_stats`` and rebuilds the tenant instead of serving it stale.
Through ``Memory.recall`` the results are the same with and without them.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_core import Memory
from memory_core.clock import to_db
from memory_core.db import changes, open_state
from memory_core.db.sqlite import atomic, connect
from memory_core.recall.feedback import stored_vectors
from memory_core.recall.keyword import TermPlan, TermStats, plan_terms, ranked_ids
from memory_core.recall.resident import Resident
from memory_core.settings import Settings
from tests.helpers.memory import T0, Store, make_store

pytest_plugins = ("tests.helpers.recall_fixtures",)

TENANTS = ("ana", "ben", "cy")
COMMON = ["porto", "friday", "river", "kitchen"]
RARE = ["kayak", "violin", "lantern", "walrus", "quince", "zither", "Zürich"]
FILLER = ["went", "with", "the", "my", "sister", "to", "a", "new", "job", "at", "moved",
          "loves", "running", "coffee", "tea", "marathon", "dog", "named", "Max"]
WORDS = COMMON + RARE + FILLER + ["nowhere"]
TABLES = ("episodes", "beliefs")


def _text(rng: random.Random) -> str:
    if rng.random() < 0.15:  # equal-scoring rows: ties are broken newest first
        return rng.choice(["porto kayak", "kayak porto", "river friday"])
    words = [w for w in COMMON if rng.random() < 0.5] * rng.randint(1, 2)
    words += [w for w in RARE if rng.random() < 0.1]
    words += rng.choices(FILLER, k=rng.randint(0, 14))
    rng.shuffle(words)
    return " ".join(words) or "went"


_uids = iter(range(1, 10**9))


def _insert(conn: Any, table: str, tenant: str, text: str) -> None:
    n = next(_uids)
    at = to_db(T0)
    if table == "episodes":
        conn.execute(
            "INSERT INTO episodes (tenant, episode_uid, session_id, tier, text, occurred_at, "
            "importance, created_at, updated_at) VALUES (?, ?, 's1', 'recent', ?, ?, 0.5, ?, ?)",
            (tenant, f"e{n}", text, at, at, at))
    else:
        conn.execute(
            "INSERT INTO beliefs (tenant, belief_uid, subject_id, predicate, object_text, text, "
            "valid_from, recorded_at, status, source, confidence) VALUES "
            "(?, ?, 'user', 'likes', ?, ?, ?, ?, 'active', 'heuristic', 0.9)",
            (tenant, f"b{n}", text[:20], text, at, at))


def _writes(conn: Any, rng: random.Random, n: int) -> None:
    """``n`` writes of every kind, to random tenants and tables, in a few transactions."""
    for _ in range(max(1, n // 10)):
        with atomic(conn):
            for _ in range(10):
                table, tenant = rng.choice(TABLES), rng.choice(TENANTS)
                ids = [r[0] for r in conn.execute(f"SELECT id FROM {table} WHERE tenant = ?",
                                                  (tenant,))]
                roll = rng.random()
                if ids and roll < 0.1:
                    conn.execute(f"DELETE FROM {table} WHERE id = ?", (rng.choice(ids),))
                elif ids and roll < 0.2:
                    conn.execute(f"UPDATE {table} SET text = ? WHERE id = ?",
                                 (_text(rng), rng.choice(ids)))
                else:
                    _insert(conn, table, tenant, _text(rng))


def _plans(rng: random.Random) -> list[tuple[TermPlan, int]]:
    plans = [(TermPlan(("kayak", "walrus"), ("porto", "friday")), 7),
             (TermPlan((), ("porto", "river")), 12),
             (TermPlan(("nowhere",), ("porto",)), 9),
             (TermPlan(tuple(WORDS)), 0),
             (TermPlan(("zurich", "Zürich", "kayaks"), ("kitchen",)), 40)]
    for _ in range(6):
        essential = tuple(rng.sample(WORDS, rng.randint(0, 4)))
        plans.append((TermPlan(essential, tuple(rng.sample(WORDS, rng.randint(0, 4)))),
                      rng.randint(0, 30)))
    return plans


@pytest.fixture
def store(tmp_path: Path) -> Any:
    lite = make_store(tmp_path, TENANTS)
    python = connect(lite.db.path, bm25=False)  # the same file, ranked in Python
    yield lite, python
    python.close()
    lite.db.close()


def _same_as_store(lite: Store, python: Any, resident: Resident,
                   plans: list[tuple[TermPlan, int]]) -> int:
    """Every tenant's held lists against the store's (both ways); returns the ids compared."""
    compared = 0
    for tenant in TENANTS:
        held = resident.tenant(lite.conn, tenant)
        assert held is not None
        for table in TABLES:
            for plan, window in plans:
                mine = held.ranked_ids(table, plan, window)
                assert mine == ranked_ids(lite.conn, table, tenant, plan, window), (table, plan)
                assert mine == ranked_ids(python, table, tenant, plan, window), (table, plan)
                compared += len(mine)
            terms = tuple(WORDS)
            for budget in (0, 15, 60):  # the plan recall makes, from either's counts
                assert plan_terms(lite.conn, held, table, terms, 25, budget, tenant, 0.3) == \
                    plan_terms(lite.conn, TermStats(), table, terms, 25, budget, tenant, 0.3)
    return compared


def test_held_postings_rank_as_the_store_through_every_kind_of_write(store) -> None:
    lite, python = store
    rng = random.Random(11)
    plans = _plans(rng)
    resident = Resident()
    _writes(lite.conn, rng, 150)
    compared = _same_as_store(lite, python, resident, plans)
    for _ in range(8):  # inserts, rewrites and deletes by another connection, then recall
        _writes(python, rng, 40)
        compared += _same_as_store(lite, python, resident, plans)
    assert resident.builds == len(TENANTS)  # caught up from the log, never rebuilt
    assert compared > 2_000  # not a comparison of empty lists
    kept = lite.conn.execute("SELECT count(*) FROM recall_changes").fetchone()[0]
    assert kept > 300 and sorted(resident.held()) == sorted(TENANTS)


def test_a_lost_log_entry_is_caught_by_the_counts_and_the_tenant_rebuilt(store) -> None:
    lite, python = store
    rng = random.Random(5)
    resident = Resident()
    _writes(lite.conn, rng, 60)
    _same_as_store(lite, python, resident, _plans(rng))
    builds = resident.builds
    with atomic(lite.conn):
        _insert(lite.conn, "episodes", "ana", "walrus lantern porto")
        lite.conn.execute("DELETE FROM recall_changes WHERE seq = (SELECT max(seq) FROM "
                          "recall_changes)")
    held = resident.tenant(lite.conn, "ana")
    assert resident.builds == builds + 1
    assert held is not None
    plan = TermPlan(("walrus", "lantern"), ("porto",))
    assert held.ranked_ids("episodes", plan, 5) == ranked_ids(lite.conn, "episodes", "ana",
                                                              plan, 5)


def test_a_log_pruned_past_the_held_postings_rebuilds_them(store) -> None:
    lite, python = store
    rng = random.Random(8)
    resident = Resident()
    _writes(lite.conn, rng, 60)
    plans = _plans(rng)
    _same_as_store(lite, python, resident, plans)
    builds = resident.builds
    _writes(lite.conn, rng, 30)
    backlog = lite.conn.execute("SELECT count(*) FROM recall_changes").fetchone()[0]
    with atomic(lite.conn):  # keeps what the held postings need: no rebuild
        assert changes.prune(lite.conn, keep=backlog) == 0
    _same_as_store(lite, python, resident, plans)
    assert resident.builds == builds
    _writes(lite.conn, rng, 30)
    with atomic(lite.conn):
        assert changes.prune(lite.conn, keep=3) > 0
    _same_as_store(lite, python, resident, plans)
    assert resident.builds == builds + len(TENANTS)


def test_a_tenant_over_the_bound_stays_in_the_store_and_the_oldest_is_evicted(store) -> None:
    lite, _ = store
    with atomic(lite.conn):
        for i in range(30):
            _insert(lite.conn, "episodes", "ana", f"kayak {i}")
        for i in range(10):
            _insert(lite.conn, "episodes", "ben", f"kayak {i}")
            _insert(lite.conn, "episodes", "cy", f"kayak {i}")
    small = Resident(max_tenant_rows=20, max_rows=15)
    assert small.tenant(lite.conn, "ana") is None  # over 20 rows: the store's path
    assert small.tenant(lite.conn, "ben") is not None
    assert small.tenant(lite.conn, "cy") is not None  # 20 rows held > 15: ben evicted
    assert small.held() == ["cy"]


def test_the_change_log_is_added_to_a_store_made_before_it(tmp_path: Path) -> None:
    """State migration 4 on a version-3 store: the triggers then log, nothing is lost."""
    settings = Settings.from_env({}, data_dir=tmp_path)
    db = open_state(settings)
    conn = db.conn
    with atomic(conn):  # back to version 3: no log, no triggers writing it
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                    "AND name LIKE '%changes%'").fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute(f"DROP TABLE {changes.TABLE}")
        conn.execute("DELETE FROM schema_migrations WHERE version > 3")
        conn.execute("PRAGMA user_version = 3")
        conn.execute("INSERT INTO tenants (tenant, created_at) VALUES ('ana', ?)",
                     (to_db(T0),))
        _insert(conn, "episodes", "ana", "before the log")
    db.close()
    db = open_state(settings)  # migrates
    with atomic(db.conn):
        _insert(db.conn, "episodes", "ana", "after the log")
    logged = db.conn.execute("SELECT tbl, tenant FROM recall_changes").fetchall()
    assert logged == [("episodes", "ana")]
    held = Resident().tenant(db.conn, "ana")
    assert held is not None and held.tables["episodes"].rows == 2
    db.close()


def test_recall_is_the_same_with_and_without_held_postings(seeded, tmp_path, settings) -> None:
    """Through ``Memory.recall``, with writes and a forgotten episode between recalls."""
    seeder, _ = seeded
    rng = random.Random(3)
    sentences = [
        "I moved to Porto last friday with my sister",
        "my sister has a kayak and a violin",
        "we went running by the river before coffee",
        "Max the dog loves the kitchen",
        "I started a new job at the lantern factory",
    ]
    for text in sentences * 3:
        seeder.turn("acme", text + " " + " ".join(rng.choices(FILLER, k=4)))
    queries = ["Where did I move?", "what does my sister have", "river running",
               "where do I work now", "kayak violin lantern"]
    on = Settings.from_env({"MNEMO_RECALL_RESIDENT_ROWS": "1000000"},
                           data_dir=settings.data_dir)
    off = Settings.from_env({"MNEMO_RECALL_RESIDENT_ROWS": "0"}, data_dir=settings.data_dir)

    def shown(mem: Memory) -> list[Any]:
        out = []
        for q in queries:
            r = mem.recall(q, tenant="acme")
            out.append(([(i.item_id, round(i.score, 9)) for i in r.items],
                        [f.text for f in r.facts]))
        return out

    with Memory.open(on) as a, Memory.open(off) as b:
        assert shown(a) == shown(b)  # "on": the first recall reads the store, builds meanwhile
        assert a._resident is not None and a._resident.wait()
        assert a._resident.held() == ["acme"] and a._resident.builds == 1
        assert shown(a) == shown(b)
        for text in sentences:  # written by another connection between recalls
            seeder.turn("acme", "later " + text)
        gone = seeder.conn.execute("SELECT id, episode_uid FROM episodes WHERE tenant = 'acme' "
                                   "AND text LIKE '%kayak%' ORDER BY id DESC LIMIT 1").fetchone()
        with atomic(seeder.conn):
            seeder.conn.execute("DELETE FROM episode_turns WHERE episode_id = ?", (gone[0],))
            seeder.conn.execute("DELETE FROM episodes WHERE id = ?", (gone[0],))
        after = shown(a)
        assert after == shown(b)
        assert all(f"episode:{gone[1]}" != item for items, _ in after for item, _ in items)
        assert any("later" in t for t in (i.text for i in a.recall(
            "Porto friday sister", tenant="acme").items))
        assert a._resident.builds == 1  # caught up, in the chat process's own snapshot


def test_a_tenant_is_built_in_the_background_and_served_once_ready(store) -> None:
    lite, _ = store
    with atomic(lite.conn):
        for i in range(50):
            _insert(lite.conn, "episodes", "ana", f"kayak porto {i}")
    resident = Resident(connect=lambda: connect(lite.db.path))  # in the builder thread
    assert resident.tenant(lite.conn, "ana") is None  # a one-off recall: no build
    assert resident.wait() and resident.builds == 0
    assert resident.tenant(lite.conn, "ana") is None  # again: the store's path while it builds
    assert resident.wait()
    held = resident.tenant(lite.conn, "ana")
    assert held is not None and held.tables["episodes"].rows == 50
    plan = TermPlan(("kayak",), ("porto",))
    assert held.ranked_ids("episodes", plan, 5) == ranked_ids(lite.conn, "episodes", "ana",
                                                              plan, 5)
    with atomic(lite.conn):  # a log pruned past it: the stale copy is dropped, not served
        _insert(lite.conn, "episodes", "ana", "kayak again")
        changes.prune(lite.conn, keep=0)
    assert resident.tenant(lite.conn, "ana") is None
    assert resident.wait() and resident.builds == 2
    held = resident.tenant(lite.conn, "ana")
    assert held is not None and held.tables["episodes"].rows == 51
    resident.close()
    for _ in range(2):
        assert resident.tenant(lite.conn, "ben") is None  # closed: builds nothing more
    assert resident.wait() and resident.held() == ["ana"]


def test_held_vectors_find_the_stores_neighbours_through_writes(seeded) -> None:
    """``nearest`` against sqlite-vec's exact search, before and after new rows, a vector
    rewritten and a row forgotten (vector and row), all by the seeding connection."""
    seeder, db = seeded
    rng = random.Random(21)
    index = seeder.index
    resident = Resident()

    def sentence() -> str:
        return " ".join(rng.choices(WORDS, k=rng.randint(3, 12))) + f" n{next(_uids)}"

    for _ in range(60):
        uid = seeder.turn("acme", sentence())
        seeder.belief("acme", "user", "likes", sentence(), turn_uid=uid)
    queries = [index.embedder.embed([sentence()])[0] for _ in range(12)]

    def check() -> None:
        held = resident.tenant(db.conn, "acme", index)
        assert held is not None and held.holds_vectors("episodes")
        for base in TABLES:
            for v in queries:
                mine = held.nearest(base, v, 15)
                theirs = index.search(db.conn, base, "acme", v, 15)
                assert [i for i, _ in mine] == [i for i, _ in theirs]
                assert all(abs(a - b) < 1e-5
                           for (_, a), (_, b) in zip(mine, theirs, strict=True))
        # The feedback round's seed vectors: the same values in the same order.
        ids = [i for i, _ in index.search(db.conn, "episodes", "acme", queries[0], 6)][::-1]
        ids += [ids[0], 10**9]  # a repeat and a row with no vector
        table = index._active_table(db.conn, "episodes")
        mine_v = held.stored_vectors("episodes", ids)
        theirs_v = stored_vectors(db.conn, table, ids)
        assert len(mine_v) == len(theirs_v) == 6
        assert all(np.array_equal(a, b) for a, b in zip(mine_v, theirs_v, strict=True))

    check()
    for _ in range(10):
        seeder.turn("acme", sentence())
    belief = db.conn.execute("SELECT id FROM beliefs WHERE tenant = 'acme' ORDER BY id "
                             "LIMIT 1").fetchone()[0]
    gone = db.conn.execute("SELECT id FROM episodes WHERE tenant = 'acme' ORDER BY id "
                           "LIMIT 1").fetchone()[0]
    with atomic(db.conn):
        index.upsert(db.conn, "beliefs", [(belief, "acme", queries[0])])  # now the nearest
        index.delete(db.conn, "episodes", [gone])
        db.conn.execute("DELETE FROM episode_turns WHERE episode_id = ?", (gone,))
        db.conn.execute("DELETE FROM episodes WHERE id = ?", (gone,))
    check()
    held = resident.tenant(db.conn, "acme", index)
    assert held is not None and held.nearest("beliefs", queries[0], 1)[0][0] == belief
    assert gone not in {i for i, _ in held.nearest("episodes", queries[0], 1000)}
    assert resident.builds == 1  # caught up from the log


def test_held_rows_load_as_the_store_through_every_kind_of_write(seeded) -> None:
    """``candidates.load`` from held rows equals the store's, field for field, in every scope
    (now, as of a past time, with the archive), through the writes that change what it
    reads: a belief superseded, ended, expired or rewritten; an episode archived, expired,
    decayed or given another turn; a turn deleted under its beliefs; a belief whose turn is
    recorded after it."""
    from memory_core.recall.candidates import Scope, load

    seeder, _ = seeded
    conn = seeder.conn
    rng = random.Random(9)
    uids = [seeder.turn("acme", " ".join(rng.choices(WORDS, k=6)), session=f"s{i % 3}",
                        speaker=rng.choice(["user", "assistant"])) for i in range(40)]
    for i, uid in enumerate(uids[:30]):
        seeder.belief("acme", "user", "likes", f"thing {i}", turn_uid=uid,
                      valid_from=T0 + timedelta(minutes=i))
    seeder.belief("acme", "user", "likes", "later turn", turn_uid="t-later")
    resident = Resident()
    times = [T0 + timedelta(minutes=m) for m in (5, 25, 60)]

    def scopes() -> list[Scope]:
        now = to_db(T0 + timedelta(days=2))
        return [Scope("acme", now), Scope("acme", now, include_archive=True),
                *(Scope("acme", now, as_of=to_db(t)) for t in times)]

    def check() -> int:
        held = resident.tenant(conn, "acme")
        assert held is not None
        seen = 0
        for kind, table in (("belief", "beliefs"), ("episode", "episodes")):
            ids = [r[0] for r in conn.execute(f"SELECT id FROM {table}")] + [10**9]
            for scope in scopes():
                mine = load(conn, kind, replace(scope, held=held), ids)
                assert mine == load(conn, kind, scope, ids), (kind, scope)
                seen += len(mine)
        return seen

    assert check() > 100
    ep = [r[0] for r in conn.execute("SELECT id FROM episodes ORDER BY id")]
    be = [r[0] for r in conn.execute("SELECT id FROM beliefs ORDER BY id")]
    later = to_db(T0 + timedelta(days=1))
    with atomic(conn):
        conn.execute("UPDATE beliefs SET status = 'superseded', valid_to = ? WHERE id = ?",
                     (to_db(T0 + timedelta(minutes=40)), be[0]))
        conn.execute("UPDATE beliefs SET valid_to = ? WHERE id = ?", (later, be[1]))
        conn.execute("UPDATE beliefs SET expires_at = ? WHERE id = ?",
                     (to_db(T0 + timedelta(hours=1)), be[2]))
        conn.execute("UPDATE beliefs SET text = 'user likes walrus', object_text = 'walrus', "
                     "confidence = 0.4 WHERE id = ?", (be[3],))
        conn.execute("UPDATE beliefs SET status = 'invalidated' WHERE id = ?", (be[4],))
        conn.execute("UPDATE episodes SET tier = 'archive' WHERE id = ?", (ep[0],))
        conn.execute("UPDATE episodes SET expires_at = ? WHERE id = ?",
                     (to_db(T0 + timedelta(hours=1)), ep[1]))
        conn.execute("UPDATE episodes SET importance = 0.05 WHERE id = ?", (ep[2],))
        turn = conn.execute("SELECT id FROM turns WHERE turn_uid = ?", (uids[35],)).fetchone()
        conn.execute("INSERT INTO episode_turns (episode_id, turn_id) VALUES (?, ?)",
                     (ep[3], turn[0]))
        gone = conn.execute("SELECT id FROM turns WHERE turn_uid = ?", (uids[5],)).fetchone()
        conn.execute("DELETE FROM episode_turns WHERE turn_id = ?", (gone[0],))
        conn.execute("DELETE FROM turns WHERE id = ?", (gone[0],))
    seeder.turn("acme", "the later turn", uid="t-later", speaker="assistant")
    assert check() > 100
    assert resident.builds == 1  # all of it caught up from the log


def test_an_unreadable_vector_table_degrades_recall_as_it_does_without_them(seeded,
                                                                           mem) -> None:
    """Catching up reads the vector table: a broken one costs the held copy (dropped, never
    served half caught up) and gives keyword-only recall with a reason, as from the store."""
    from structlog.testing import capture_logs

    from memory_core.recall.strategy import RecallStrategy

    seeder, db = seeded
    seeder.turn("acme", "the red kayak is at the lake")
    dense = RecallStrategy().with_(dense_with_keyword_embedder=True)
    for _ in range(2):  # a conversation: built after the second recall
        assert not mem.recall("red kayak", tenant="acme", strategy=dense).keyword_only
    assert mem._resident is not None and mem._resident.wait()
    assert mem._resident.held() == ["acme"]
    seeder.turn("acme", "a blue kayak")  # a change to catch up, its vector among it
    db.conn.execute("DROP TABLE episodes_vec_g1")
    with capture_logs() as logs:
        result = mem.recall("red kayak", tenant="acme", strategy=dense)
    assert result.keyword_only and "vector index" in (result.degraded_reason or "")
    assert result.items
    assert [e["event"] for e in logs if e["log_level"] == "warning"][:1] == [
        "resident_unavailable"]
    assert mem._resident.held() == []


def test_tenants_in_conversation_that_do_not_fit_are_counted_and_named(store) -> None:
    """Eviction of a tenant recalled within the last minutes is thrashing: counted, and one
    warning naming the setting to raise (not one per eviction)."""
    from structlog.testing import capture_logs

    lite, _ = store
    with atomic(lite.conn):
        for tenant in TENANTS:
            for i in range(10):
                _insert(lite.conn, "episodes", tenant, f"kayak {i}")
    resident = Resident(max_rows=15, connect=lambda: connect(lite.db.path))
    with capture_logs() as logs:
        for _ in range(3):
            for tenant in TENANTS:  # three conversations, room for one
                resident.tenant(lite.conn, tenant)
                assert resident.wait()
    resident.close()
    assert resident.thrashed >= 3 and len(resident.held()) == 1
    warned = [e for e in logs if e["event"] == "resident_thrashing"]
    assert len(warned) == 1 and "MNEMO_RECALL_RESIDENT_ROWS" in warned[0]["hint"]


def test_a_new_vector_generation_rebuilds_the_tenant(seeded) -> None:
    """After a reindex switches the generation, the held vectors are the new table's."""
    from memory_core.db.meta import set_meta
    from memory_core.vectors import GENERATION_KEY, _create_tables

    seeder, db = seeded
    for i in range(12):
        seeder.turn("acme", f"kayak walrus lantern {i}")
    index = seeder.index
    resident = Resident()
    held = resident.tenant(db.conn, "acme", index)
    assert held is not None and held.vectors["episodes"].table == "episodes_vec_g1"
    v = index.embedder.embed(["walrus"])[0]
    with atomic(db.conn):  # generation 2 holds other vectors: the query's own for one row
        _create_tables(db.conn, 2, index.embedder.dim)
        for base in TABLES:
            db.conn.execute(f"INSERT INTO {base}_vec_g2 (rowid, tenant, embedding) "
                            f"SELECT rowid, tenant, embedding FROM {base}_vec_g1")
        first = db.conn.execute("SELECT min(id) FROM episodes").fetchone()[0]
        db.conn.execute("DELETE FROM episodes_vec_g2 WHERE rowid = ?", (first,))
        db.conn.execute("INSERT INTO episodes_vec_g2 (rowid, tenant, embedding) VALUES "
                        "(?, 'acme', ?)", (first, np.asarray(v, np.float32).tobytes()))
        set_meta(db.conn, GENERATION_KEY, "2")
    held = resident.tenant(db.conn, "acme", index)
    assert held is not None and held.vectors["episodes"].table == "episodes_vec_g2"
    assert resident.builds == 2
    mine, theirs = held.nearest("episodes", v, 3), index.search(db.conn, "episodes", "acme",
                                                                 v, 3)
    assert [i for i, _ in mine] == [i for i, _ in theirs] and mine[0][0] == first


def test_held_rows_answer_the_walk_and_the_bridge_as_the_store(seeded) -> None:
    """The entity bridge (``beliefs_touching``), the walk's expansion
    (``beliefs_touching_each``), its links (``graph._link_*``) and the walk's scores
    (``ego_pagerank``) from held rows equal the store's, before and after writes, in every
    scope; equal confidences and times make the order's ties matter."""
    from memory_core.recall import graph
    from memory_core.recall.candidates import Scope, beliefs_touching, beliefs_touching_each
    from memory_core.recall.candidates import load as load_rows
    from memory_core.recall.strategy import DEFAULT

    seeder, _ = seeded
    conn = seeder.conn
    rng = random.Random(4)
    people = ["ana", "ben", "cy", "dee", "eve"]
    for p in people:
        seeder.entity("acme", p, p.title())
    for _ in range(60):
        uid = seeder.turn("acme", " ".join(rng.choices(WORDS, k=5)))
        subject, obj = rng.sample(people, 2)
        seeder.belief("acme", subject, rng.choice(["knows", "likes", "works_with"]), obj,
                      object_entity=obj, turn_uid=uid, confidence=rng.choice([0.9, 0.7]),
                      valid_from=T0 + timedelta(minutes=rng.choice([1, 2, 3])))
    resident = Resident()
    now = to_db(T0 + timedelta(days=2))
    scopes = [Scope("acme", now), Scope("acme", now, as_of=to_db(T0 + timedelta(minutes=2)))]

    def check() -> None:
        held = resident.tenant(conn, "acme")
        assert held is not None
        for scope in scopes:
            mine = replace(scope, held=held)
            for ents in (people[:1], people[1:3], people):
                assert held.touching(scope, ents, 7) == [
                    r[0] for r in beliefs_touching(conn, scope, ents, "b.id", 7)]
                assert beliefs_touching_each(conn, mine, ents, 3) == \
                    beliefs_touching_each(conn, scope, ents, 3)
            uids = [r[0] for r in conn.execute("SELECT turn_uid FROM turns")]
            top = list(load_rows(conn, "episode", scope, range(1, 12)).values())
            top += list(load_rows(conn, "belief", scope, range(1, 8)).values())
            for ents in (people[:1], people[2:]):
                theirs = graph.ego_pagerank(conn, scope, DEFAULT, ents, top)
                assert graph.ego_pagerank(conn, mine, DEFAULT, ents, top) == theirs
                assert len(theirs) > 5
            if scope.as_of is None:  # not vacuous: the walk links episodes and beliefs
                assert held.episodes_of_turns(scope, uids[:30])
                assert held.beliefs_of_turns(scope, uids[:30])

    check()
    be = [r[0] for r in conn.execute("SELECT id FROM beliefs WHERE object_entity_id IS NOT "
                                     "NULL ORDER BY id")]
    with atomic(conn):
        conn.execute("UPDATE beliefs SET status = 'superseded', valid_to = ? WHERE id = ?",
                     (to_db(T0 + timedelta(minutes=90)), be[0]))
        conn.execute("UPDATE beliefs SET object_entity_id = 'eve', subject_id = 'dee' "
                     "WHERE id = ?", (be[1],))
        conn.execute("UPDATE beliefs SET confidence = 0.95 WHERE id = ?", (be[2],))
        conn.execute("DELETE FROM beliefs WHERE id = ?", (be[3],))
        turn = conn.execute("SELECT t.id FROM turns t JOIN episode_turns et ON et.turn_id = "
                            "t.id ORDER BY t.id LIMIT 1").fetchone()[0]
        conn.execute("DELETE FROM episode_turns WHERE turn_id = ?", (turn,))
    check()
    assert resident.builds == 1


def test_recalls_on_several_threads_while_a_writer_writes(seeded, settings) -> None:
    """Two chat threads recall one tenant while another connection writes to it: no error,
    and once the writer stops both give what the store gives."""
    import threading

    seeder, _ = seeded
    for i in range(30):
        seeder.turn("acme", f"kayak walrus lantern porto {i}")
    off = Settings.from_env({"MNEMO_RECALL_RESIDENT_ROWS": "0"}, data_dir=settings.data_dir)
    errors: list[BaseException] = []
    with Memory.open(settings) as mem, Memory.open(off) as store:
        for _ in range(2):
            mem.recall("kayak porto", tenant="acme")
        assert mem._resident is not None and mem._resident.wait()
        stop = threading.Event()

        def recall() -> None:
            try:
                while not stop.is_set():
                    mem.recall("walrus lantern porto", tenant="acme")
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=recall) for _ in range(2)]
        for t in threads:
            t.start()
        for i in range(40):
            seeder.turn("acme", f"another kayak by the porto river {i}")
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        mine = mem.recall("kayak porto river", tenant="acme")
        theirs = store.recall("kayak porto river", tenant="acme")
        assert [i.item_id for i in mine.items] == [i.item_id for i in theirs.items]
        assert mem._resident.builds == 1


def test_an_older_snapshot_than_the_held_copy_serves_it_without_a_rebuild(store) -> None:
    """Threads recall in their own read snapshots: one older than what another thread caught
    the copy up to must not take the difference for a lost change (a rebuild per write)."""
    lite, _ = store
    with atomic(lite.conn):
        for i in range(10):
            _insert(lite.conn, "episodes", "ana", f"kayak {i}")
    old, new = connect(lite.db.path), connect(lite.db.path)
    resident = Resident()
    assert resident.tenant(new, "ana") is not None
    old.execute("BEGIN")
    old.execute("SELECT count(*) FROM episodes").fetchone()  # its snapshot starts here
    with atomic(lite.conn):
        _insert(lite.conn, "episodes", "ana", "kayak later")
    held = resident.tenant(new, "ana")  # caught up past the old snapshot
    assert held is not None and held.tables["episodes"].rows == 11
    assert resident.tenant(old, "ana") is held  # served, not rebuilt
    assert resident.builds == 1
    old.execute("ROLLBACK")
    old.close()
    new.close()
