"""macro_sleep on real files: decay, reinforcement from the recall log, tier moves, ego
anchors and the FTS drift check; idempotent per window, tenant-scoped, safe after a kill."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path

import pytest

from memory_core.clock import from_db, to_db
from memory_core.db import fts
from memory_core.maintenance import reinforce as reinforce_mod
from memory_core.maintenance.bodies import BODIES
from memory_core.maintenance.fts_merge import merge_fts, merge_step
from memory_core.maintenance.sleep import macro_sleep
from memory_core.maintenance.tiers import TierPolicy, tier_for
from memory_core.recall.explain import write_recall_log
from tests.helpers.maintenance import World, episode, make_world, snapshot

TRAM = "I adore the Lisbon tram rides every weekend with my two oldest friends."
PIZZA = "We argued about pineapple pizza toppings for three hours yesterday."


@pytest.fixture
def world(tmp_path: Path):
    w = make_world(tmp_path / "data")
    yield w
    w.close()


def _pending(world: World) -> int:
    return world.ops.conn.execute(
        "SELECT count(*) FROM recall_log WHERE applied_at IS NULL").fetchone()[0]


def test_a_recalled_episode_rises_and_an_unrecalled_one_decays(world: World) -> None:
    tram = world.turn("t1", "u1", TRAM)
    pizza = world.turn("t1", "u2", PIZZA)
    before = {e: episode(world, e)["importance"] for e in (tram, pizza)}
    recalled = world.recall("t1", "Lisbon tram rides", items=1)
    uids = dict(world.conn.execute("SELECT id, episode_uid FROM episodes").fetchall())
    assert recalled == [f"episode:{uids[tram]}"]  # the pizza episode was not used

    report = macro_sleep(world.after(hours=6))

    after = {e: episode(world, e) for e in (tram, pizza)}
    assert after[tram]["importance"] > before[tram]
    assert after[tram]["access_count"] == 1 and after[tram]["last_access_at"] is not None
    assert after[pizza]["importance"] < before[pizza]
    assert after[pizza]["access_count"] == 0
    assert report.counts["recalls_applied"] == 1 and _pending(world) == 0


def test_decay_follows_the_clock_not_the_number_of_runs(world: World) -> None:
    pizza = world.turn("t1", "u2", PIZZA)
    created, start = world.conn.execute("SELECT created_at, importance FROM episodes "
                                        "WHERE id = ?", (pizza,)).fetchone()
    half_life = world.settings.importance_half_life_s
    for hours in (6, 6, 12, 30):  # the repeated 6 h is a redelivered window
        env = world.after(hours=hours)
        macro_sleep(env)
        elapsed = (env.now - from_db(created)).total_seconds()
        expected = start * 0.5 ** (elapsed / half_life)
        got = episode(world, pizza)
        assert math.isclose(got["importance"], expected, rel_tol=1e-6), hours
        assert got["decayed_at"] == to_db(env.now)


def test_running_twice_in_a_window_equals_running_once(world: World) -> None:
    world.turn("t1", "u1", TRAM)
    world.turn("t1", "u2", "My sister Ana lives in Porto and loves jazz.")
    world.turn("t2", "u1", PIZZA)
    world.recall("t1", "Lisbon tram")
    world.recall("t2", "pizza toppings")
    env = world.after(days=3)
    first = macro_sleep(env)
    once = snapshot(world)
    second = macro_sleep(env)
    assert snapshot(world) == once
    assert first.counts["recalls_applied"] == 2
    assert second.counts.get("recalls_applied", 0) == 0
    assert second.counts.get("working_to_recent", 0) == 0
    assert BODIES["macro_sleep"] is macro_sleep


def test_a_kill_between_the_two_files_reinforces_exactly_once(world: World,
                                                               monkeypatch) -> None:
    tram = world.turn("t1", "u1", TRAM)
    world.recall("t1", "Lisbon tram rides", items=1)
    real_atomic = reinforce_mod.atomic

    def killed_at_ops(conn, **kw):  # the state commit happened; the ops one never does
        if conn is world.ops.conn:
            raise RuntimeError("worker killed")
        return real_atomic(conn, **kw)

    monkeypatch.setattr(reinforce_mod, "atomic", killed_at_ops)
    env = world.after(hours=6)
    with pytest.raises(RuntimeError):
        macro_sleep(env)
    boosted = episode(world, tram)
    assert boosted["access_count"] == 1 and _pending(world) == 1
    monkeypatch.setattr(reinforce_mod, "atomic", real_atomic)

    report = macro_sleep(env)  # the redelivery
    again = episode(world, tram)
    assert (again["importance"], again["access_count"]) == (
        boosted["importance"], boosted["access_count"])  # not boosted twice
    assert _pending(world) == 0
    assert report.counts["recalls_applied"] == 1
    assert report.counts["episodes_reinforced"] == 0
    keys = world.conn.execute("SELECT count(*) FROM applied_jobs WHERE key LIKE "
                              "'reinforce:%'").fetchone()[0]
    assert keys == 0


def test_reinforcement_never_crosses_tenants_nor_stalls_on_a_damaged_row(world: World) -> None:
    mine = world.turn("t1", "u1", TRAM)
    theirs = world.turn("t2", "u1", PIZZA)  # the same turn_uid in another tenant
    body = json.dumps({"recalled": ["turn:u1"], "candidates": []})
    write_recall_log(world.ops.conn, "t1", "digest", "default", body, keep=500)
    write_recall_log(world.ops.conn, "t2", "digest", "default", "{damaged", keep=500)
    report = macro_sleep(world.after(hours=1))
    assert episode(world, mine)["access_count"] == 1
    assert episode(world, theirs)["access_count"] == 0
    assert report.counts["recalls_applied"] == 2 and _pending(world) == 0


POLICY = TierPolicy(recent_s=86_400, archive_s=10 * 86_400, archive_importance=0.5)


@pytest.mark.parametrize(("age_days", "importance", "tier"), [
    (0.5, 0.1, "recent"),
    (2, 0.1, "long_term"),
    (9.9, 0.1, "long_term"),
    (10, 0.1, "archive"),
    (10, 0.5, "long_term"),
    (400, 0.9, "long_term"),
])
def test_tier_rule(age_days: float, importance: float, tier: str) -> None:
    assert tier_for(age_days * 86_400, importance, POLICY) == tier


def test_tiers_move_with_session_end_age_and_importance(tmp_path: Path) -> None:
    world = make_world(tmp_path / "data", tier_recent_s=86_400, tier_archive_s=10 * 86_400,
                       archive_importance=0.5, session_idle_s=1_800)
    try:
        start = world.start
        ids = {
            "live": world.turn("t1", "l1", PIZZA, session="live"),
            "ended": world.turn("t1", "e1", TRAM, session="old",
                                occurred=start - timedelta(hours=2)),
            "week": world.turn("t1", "w1", "The harbour fog was thick.", session="week",
                               occurred=start - timedelta(days=5)),
            "stale": world.turn("t1", "a1", "Nothing much happened.", session="ancient",
                                occurred=start - timedelta(days=20)),
            "kept": world.turn("t1", "a2", "Remember that my locker code is 4412.",
                               session="ancient", occurred=start - timedelta(days=20)),
        }
        # Only the "live" session had a turn in the last half hour.
        world.conn.execute("UPDATE turns SET recorded_at = ? WHERE session_id != 'live'",
                           (to_db(start - timedelta(hours=2)),))
        world.conn.execute("UPDATE episodes SET tier = 'working' WHERE id = ?",
                           (ids["ended"],))
        report = macro_sleep(world.after(minutes=1))
        tiers = {k: episode(world, v)["tier"] for k, v in ids.items()}
        assert tiers == {"live": "working", "ended": "recent", "week": "long_term",
                         "stale": "archive", "kept": "long_term"}
        assert report.counts["working_to_recent"] >= 1
        # Importance decides: a reinforced archived episode comes back.
        world.conn.execute("UPDATE episodes SET importance = 0.9 WHERE id = ?",
                           (ids["stale"],))
        report = macro_sleep(world.after(minutes=2))
        assert episode(world, ids["stale"])["tier"] == "long_term"
        assert report.counts["archive_to_long_term"] == 1
    finally:
        world.close()


def _fts_rows(world: World, fts: str) -> int:
    return world.conn.execute(f"SELECT count(*) FROM {fts}_docsize").fetchone()[0]


def _pineapple(world: World) -> int:
    return world.conn.execute("SELECT count(*) FROM turns_fts WHERE turns_fts MATCH ?",
                              (fts.match("t1", "pineapple"),)).fetchone()[0]


def test_fts_drift_is_detected_and_repaired(world: World) -> None:
    for i, text in enumerate((TRAM, PIZZA, "The quarterly budget meeting ran late.")):
        world.turn("t1", f"u{i}", text)
    world.turn("t2", "u9", "Pineapple on pizza, again.")
    # Damage on purpose: shadow rows deleted behind the triggers' back, an index row
    # deleted without its base row, and one tenant's statistics wrong.
    world.conn.execute("DELETE FROM episodes_fts_docsize WHERE id IN "
                       "(SELECT id FROM episodes WHERE tenant = 't1' ORDER BY id LIMIT 2)")
    tid = world.conn.execute("SELECT id FROM turns WHERE turn_uid = 'u1' AND tenant = 't1'"
                             ).fetchone()[0]
    world.conn.execute("DELETE FROM turns_fts WHERE rowid = ?", (tid,))
    world.conn.execute("INSERT INTO fts_stats VALUES ('beliefs', 'nobody', 3, 30)")
    assert _pineapple(world) == 0
    assert _fts_rows(world, "episodes_fts") == 2
    stats = world.conn.execute("SELECT tbl, tenant, rows, tokens FROM fts_stats WHERE "
                               "tbl != 'beliefs' ORDER BY 1, 2").fetchall()

    report = macro_sleep(world.after(hours=6))

    assert report.counts["fts_rebuilt"] == 3
    assert report.counts["fts_rebuilt_episodes_fts"] == "2->4"
    assert report.counts["fts_rebuilt_turns_fts"] == "3->4"
    assert "fts_rebuilt_beliefs_fts" in report.counts  # its statistics were off
    for name, base in (("turns_fts", "turns"), ("episodes_fts", "episodes")):
        base_rows = world.conn.execute(f"SELECT count(*) FROM {base}").fetchone()[0]
        assert _fts_rows(world, name) == base_rows
    assert _pineapple(world) == 1
    assert world.conn.execute("SELECT tbl, tenant, rows, tokens FROM fts_stats WHERE "
                              "tbl != 'beliefs' ORDER BY 1, 2").fetchall() == stats
    assert world.conn.execute("SELECT count(*) FROM fts_stats WHERE tenant = 'nobody'"
                              ).fetchone()[0] == 0
    assert "fts_rebuilt" not in macro_sleep(world.after(hours=12)).counts


def test_an_index_made_by_another_tokenizer_is_rebuilt(world: World) -> None:
    world.turn("t1", "u1", TRAM)
    world.conn.execute("UPDATE meta SET value = 'older' WHERE key = ?", (fts.META_KEY,))
    report = macro_sleep(world.after(hours=6))
    assert report.counts["fts_rebuilt"] == 3
    assert fts.recorded_version(world.conn) == fts.TOKENS_VERSION
    assert "fts_rebuilt" not in macro_sleep(world.after(hours=12)).counts


def test_a_missing_ego_anchor_is_backfilled(world: World) -> None:
    world.belief("t1", "Ana", "likes", "jazz", world.start)
    anchors = "SELECT count(*) FROM beliefs WHERE tenant = 't1' AND source = 'system_tool'"
    assert world.conn.execute(anchors).fetchone()[0] == 1
    world.conn.execute("DELETE FROM beliefs WHERE source = 'system_tool'")  # lost, somehow
    report = macro_sleep(world.after(hours=6))
    assert report.counts["anchors_added"] == 1
    assert world.conn.execute(anchors).fetchone()[0] == 1
    assert macro_sleep(world.after(hours=7)).counts["anchors_added"] == 0


def _segments(world: World, fts_table: str) -> int:
    return int(world.conn.execute(f"SELECT count(DISTINCT segid) FROM {fts_table}_idx"
                                  ).fetchone()[0])


def _fragment(world: World) -> None:
    for table in fts.FTS_TABLES:  # one segment per write transaction, as after bursts
        world.conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('automerge', 0)")
    for i in range(30):  # many distinct words: the merged segment spans many pages
        words = " ".join(f"w{i}x{j}" for j in range(150))
        world.turn("t1", f"u{i}", f"I went hiking in the Alps with Anna, trip {i}: {words}")


def test_macro_sleep_merges_the_full_text_segments(world: World) -> None:
    _fragment(world)
    query = fts.match("t1", "hiking")
    found = sorted(world.conn.execute("SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?",
                                      (query,)).fetchall())
    assert len(found) == 30 and _segments(world, "turns_fts") >= 10

    report = macro_sleep(world.after(hours=1))
    assert report.counts["fts_merge_steps_turns_fts"] >= 1
    for table in fts.FTS_TABLES:
        assert _segments(world, table) <= 1, table
    assert sorted(world.conn.execute("SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?",
                                     (query,)).fetchall()) == found
    assert world.conn.execute("INSERT INTO turns_fts (turns_fts) VALUES ('integrity-check')"
                              ) is not None
    again = macro_sleep(world.after(hours=1))  # the same window again: nothing to merge
    assert {k: v for k, v in again.counts.items() if k.startswith("fts_merge")} == {
        f"fts_merge_steps_{table}": 0 for table in fts.FTS_TABLES}


def test_the_merge_goes_in_steps_of_its_own_transaction(world: World) -> None:
    _fragment(world)
    seen: list[tuple[str, bool]] = []

    def step(conn, table: str, pages: int) -> bool:
        assert not conn.in_transaction  # each step commits before the next begins
        merged = merge_step(conn, table, pages)
        seen.append((table, merged))
        return merged

    steps = merge_fts(world.conn, pages=1, step=step)
    assert steps["turns_fts"] > 3  # a small page budget: many short steps, not one long one
    assert _segments(world, "turns_fts") <= 1
    assert seen.count(("turns_fts", False)) == 1  # stopped at the first step with no work


def test_sleep_keeps_the_newest_recall_changes_and_records_the_cut(world: World,
                                                                   monkeypatch) -> None:
    """The change log chat processes catch up from (``db.changes``) is cut to its newest
    ``CHANGES_KEPT`` entries; the cut is recorded so a process behind it rebuilds."""
    from memory_core.db import changes
    from memory_core.db.meta import get_meta
    from memory_core.maintenance import sleep

    for i in range(6):
        world.turn("t1", f"u{i}", f"{TRAM} {i}")
    logged = world.conn.execute("SELECT count(*), max(seq) FROM recall_changes").fetchone()
    assert logged[0] >= 6
    monkeypatch.setattr(sleep, "CHANGES_KEPT", 3)
    report = macro_sleep(world.after(hours=6))
    assert report.counts["recall_changes_pruned"] >= logged[0] - 3
    kept = world.conn.execute("SELECT min(seq), count(*) FROM recall_changes").fetchone()
    assert kept[1] == 3
    assert int(get_meta(world.conn, changes.PRUNED_KEY)) == kept[0] - 1
    macro_sleep(world.after(hours=12))  # its own decay is logged, then cut again
    assert world.conn.execute("SELECT count(*) FROM recall_changes").fetchone()[0] == 3
