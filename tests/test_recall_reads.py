"""What one recall reads: each candidate row once, whichever lists find it, and an episode's
turn pointers with the episode (real SQLite files; the statements are traced)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from memory_core import Memory
from memory_core.clock import to_db
from memory_core.db.sqlite import atomic
from memory_core.recall import search
from memory_core.recall.candidates import Scope, load
from memory_core.recall.search import TermStats
from memory_core.recall.strategy import RecallStrategy

pytest_plugins = ("tests.helpers.recall_fixtures",)
NOW = datetime(2025, 1, 1, tzinfo=UTC)
# The row reads of ``candidates.load`` (episodes, beliefs), with their ids bound.
_EPISODE_READ = re.compile(r"FROM episodes e NOT INDEXED .*WHERE e\.id IN \(([\d, ]+)\)")
_BELIEF_READ = re.compile(r"FROM beliefs b NOT INDEXED .*WHERE b\.id IN \(([\d, ]+)\)")


@contextmanager
def traced(conn) -> Iterator[list[str]]:
    """The statements ``conn`` runs meanwhile, with their parameters bound."""
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def _ids_read(statements: list[str], pattern: re.Pattern[str]) -> Counter[int]:
    out: Counter[int] = Counter()
    for sql in statements:
        for match in pattern.finditer(" ".join(sql.split())):
            out.update(int(i) for i in match.group(1).split(","))
    return out


def _kayak_world(seeder) -> None:
    for i in range(30):
        seeder.turn("acme", f"Ana took the kayak down the river in Lisbon, trip {i}")
        seeder.turn("acme", f"the paddle and the kayak need a wash after trip {i}")
    seeder.entity("acme", "ana", "Ana")
    for i in range(6):
        seeder.belief("acme", "ana", "likes", f"kayak trip {i}")


def test_one_recall_reads_each_row_once_whichever_lists_find_it(seeded, settings) -> None:
    seeder, _ = seeded
    _kayak_world(seeder)
    # A dense lane with the hash embedder: the keyword and dense lists find the same rows.
    both = RecallStrategy().with_(dense_with_keyword_embedder=True)
    with Memory.open(settings) as mem:
        mem.recall("warm up the caches", tenant="acme", now=NOW)
        with traced(mem._state.conn) as statements:
            result = mem.recall("What did Ana say about the kayak and the paddle?",
                                tenant="acme", budget=20, now=NOW, strategy=both)
    assert result.items and not result.keyword_only
    episodes = _ids_read(statements, _EPISODE_READ)
    beliefs = _ids_read(statements, _BELIEF_READ)
    assert len(episodes) > 20 and beliefs  # several lists found rows of both kinds
    assert max(episodes.values()) == 1, [i for i, n in episodes.items() if n > 1]
    assert max(beliefs.values()) == 1, [i for i, n in beliefs.items() if n > 1]


def test_a_list_returns_the_pools_own_rows_without_reading_them(seeded) -> None:
    seeder, db = seeded
    _kayak_world(seeder)
    scope = Scope(tenant="acme", now=to_db(NOW))
    first = search.fts(db.conn, "episode", scope, ("kayak",), 10, stats=TermStats())
    pool = {c.key: c for c in first}
    with traced(db.conn) as statements:
        again = search.fts(db.conn, "episode", scope, ("kayak",), 10, stats=TermStats(),
                           pool=pool)
        wider = search.fts(db.conn, "episode", scope, ("kayak",), 15, stats=TermStats(),
                           pool=pool)
    assert [c.row_id for c in again] == [c.row_id for c in first]
    assert all(a is b for a, b in zip(again, first, strict=True))
    assert [c.row_id for c in wider][:10] == [c.row_id for c in first]
    # Only the five rows the pool lacked were read.
    assert sorted(_ids_read(statements, _EPISODE_READ)) == sorted(
        c.row_id for c in wider[10:])


def test_an_episode_loads_with_its_turns_in_order_and_its_first_speaker(seeded) -> None:
    seeder, db = seeded
    conn = db.conn
    late = seeder.turn("acme", "and then we went home", speaker="ben")
    early = seeder.turn("acme", "we met at the river", speaker="ana")
    other = seeder.turn("acme", "different session", speaker="cy", session="s0")
    turn_ids = {uid: conn.execute("SELECT id FROM turns WHERE turn_uid = ?", (uid,)).fetchone()[0]
                for uid in (late, early, other)}
    with atomic(conn):
        # ``early`` has the higher index in s1 only after this; s0 sorts before s1.
        conn.execute("UPDATE turns SET idx = idx + 1000 WHERE turn_uid = ?", (late,))
        merged = conn.execute(
            "INSERT INTO episodes (tenant, episode_uid, session_id, tier, text, occurred_at, "
            "importance, created_at, updated_at) VALUES ('acme', 'ep_merged', 's1', 'recent', "
            "'a merged run', ?, 0.5, ?, ?)", (to_db(NOW),) * 3).lastrowid
        bare = conn.execute(
            "INSERT INTO episodes (tenant, episode_uid, session_id, tier, text, occurred_at, "
            "importance, created_at, updated_at) VALUES ('acme', 'ep_bare', 's1', 'recent', "
            "'no turns', ?, 0.5, ?, ?)", (to_db(NOW),) * 3).lastrowid
        for uid in (late, other, early):  # stored out of order
            conn.execute("INSERT INTO episode_turns (episode_id, turn_id) VALUES (?, ?)",
                         (merged, turn_ids[uid]))
    found = load(conn, "episode", Scope(tenant="acme", now=to_db(NOW)), [bare, merged])
    assert found[merged].turn_uids == (other, early, late)
    assert found[merged].speaker == "cy"
    assert found[merged].text == "a merged run"
    assert found[bare].turn_uids == () and found[bare].speaker is None
