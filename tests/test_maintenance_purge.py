"""session_purge and the retention sweep on real files: exactly the expired memories go,
through the verified delete path, never another tenant's; trivial episodes of ended
sessions are purged and their turns stay; `mnemo memory sweep` lists before it removes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_core.clock import to_db
from memory_core.maintenance.purge import purge_ended_sessions, session_purge
from memory_core.maintenance.sweep import sweep
from scripts.cli import main
from tests.helpers.maintenance import World, make_world, snapshot

HOUR = timedelta(hours=1)


@pytest.fixture
def world(tmp_path: Path):
    w = make_world(tmp_path / "data")
    yield w
    w.close()


def _expire(world: World, table: str, row_id: int, delta: timedelta) -> None:
    world.conn.execute(f"UPDATE {table} SET expires_at = ? WHERE id = ?",
                       (to_db(world.start + delta), row_id))


def _seed_expiry(world: World) -> dict[str, tuple[str, int]]:
    s = world.start
    ids = {
        "gone_belief": ("beliefs", world.belief("t1", "Ana", "likes", "jazz", s)),
        "kept_belief": ("beliefs", world.belief("t1", "Ana", "likes", "tango", s)),
        "plain_belief": ("beliefs", world.belief("t1", "I", "likes", "tea", s)),
        "gone_episode": ("episodes", world.turn("t1", "u1", "The ferry was late again.")),
        "kept_episode": ("episodes", world.turn("t1", "u2", "The harbour fog was thick.")),
        "other_tenant": ("beliefs", world.belief("t2", "Bo", "likes", "jazz", s)),
    }
    _expire(world, *ids["gone_belief"], -HOUR)
    _expire(world, *ids["kept_belief"], 10 * HOUR)
    _expire(world, *ids["gone_episode"], -2 * HOUR)
    _expire(world, *ids["kept_episode"], 10 * HOUR)
    _expire(world, *ids["other_tenant"], -HOUR)
    return ids


def _exists(world: World, table: str, row_id: int) -> bool:
    return world.conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (row_id,)).fetchone() \
        is not None


def test_the_sweep_removes_exactly_the_expired_memories_of_its_tenant(world: World) -> None:
    ids = _seed_expiry(world)
    vectors_before = world.index.counts(world.conn)
    dry = sweep(world.conn, world.index, "t1", world.start, dry_run=True)
    assert dry.found == {"belief": 1, "episode": 1} and dry.deleted == {}
    assert all(_exists(world, *ref) for ref in ids.values())

    report = sweep(world.conn, world.index, "t1", world.start)

    gone = {name for name, ref in ids.items() if not _exists(world, *ref)}
    assert gone == {"gone_belief", "gone_episode"}
    assert report.deleted["beliefs"] == 1 and report.deleted["episodes"] == 1
    for table, row_id in (ids["gone_belief"], ids["gone_episode"]):
        assert world.conn.execute(f"SELECT count(*) FROM {table}_fts_docsize WHERE id = ?",
                                  (row_id,)).fetchone()[0] == 0
    after = world.index.counts(world.conn)
    assert after["episodes"] == vectors_before["episodes"] - 1
    # The episode's turn stays; a tombstone (digest only) records each removal.
    assert world.conn.execute("SELECT count(*) FROM turns WHERE turn_uid = 'u1'").fetchone()[0]
    reasons = world.conn.execute("SELECT tenant, kind, reason FROM tombstones").fetchall()
    assert sorted(reasons) == [("t1", "belief", "retention_sweep"),
                               ("t1", "episode", "retention_sweep")]


def test_session_purge_sweeps_every_tenant_and_twice_equals_once(world: World) -> None:
    ids = _seed_expiry(world)
    env = world.env(world.start)
    report = session_purge(env)
    assert report.counts["beliefs_swept"] == 2 and report.counts["episodes_swept"] == 1
    assert not _exists(world, *ids["other_tenant"])
    assert _exists(world, *ids["kept_belief"]) and _exists(world, *ids["plain_belief"])
    once = snapshot(world)
    again = session_purge(env)
    assert snapshot(world) == once
    assert again.counts["beliefs_swept"] == again.counts["episodes_swept"] == 0


def _seed_sessions(world: World) -> dict[str, int]:
    ids = {
        "ok": world.turn("t1", "o1", "ok", session="old"),
        "recalled": world.turn("t1", "o2", "thanks!", session="old"),
        "belief": world.turn("t1", "o3", "I live in Lisbon now.", session="old"),
        "long": world.turn("t1", "o4", "The ferry to Barreiro was late again today.",
                           session="old"),
        "explicit": world.turn("t1", "o5", "remember milk", session="old"),
        "live_ok": world.turn("t1", "l1", "ok", session="live"),
        "other_ok": world.turn("t2", "x1", "ok", session="old"),
    }
    world.conn.execute("UPDATE turns SET recorded_at = ? WHERE session_id = 'old'",
                       (to_db(world.start - 2 * HOUR),))
    world.conn.execute("UPDATE episodes SET access_count = 1 WHERE id = ?", (ids["recalled"],))
    return ids


def test_trivial_episodes_of_ended_sessions_are_purged_and_their_turns_stay(
        world: World) -> None:
    ids = _seed_sessions(world)
    env = world.after(minutes=1)
    assert purge_ended_sessions(env, "t1") == 1
    gone = {name for name, i in ids.items() if not _exists(world, "episodes", i)}
    assert gone == {"ok"}  # and never t2's, nor the live session's
    assert world.conn.execute("SELECT count(*) FROM turns WHERE turn_uid = 'o1'").fetchone()[0]
    assert world.conn.execute("SELECT reason FROM tombstones").fetchall() == [("session_purge",)]
    report = session_purge(env)
    assert report.counts["episodes_purged"] == 1  # t2's now
    assert not _exists(world, "episodes", ids["other_ok"])
    assert _exists(world, "episodes", ids["live_ok"])
    tiers = dict(world.conn.execute("SELECT session_id, group_concat(DISTINCT tier) FROM "
                                    "episodes GROUP BY session_id").fetchall())
    assert tiers == {"old": "recent", "live": "working"}


def test_purge_below_zero_keeps_every_episode(tmp_path: Path) -> None:
    world = make_world(tmp_path / "data", session_purge_below=0.0)
    try:
        ids = _seed_sessions(world)
        session_purge(world.after(minutes=1))
        assert all(_exists(world, "episodes", i) for i in ids.values())
    finally:
        world.close()


def _cli(world: World, *args: str):
    env = {"MNEMO_DATA_DIR": str(world.settings.data_dir), "MNEMO_HASH_DIM": "32"}
    return CliRunner().invoke(main, ["memory", "sweep", *args], env=env)


def test_cli_sweep_lists_then_removes_and_needs_yes(world: World) -> None:
    ids = _seed_expiry(world)
    refused = _cli(world)
    assert refused.exit_code == 1 and "--yes" in refused.output
    dry = _cli(world, "--dry-run", "--tenant", "t1", "--json")
    assert dry.exit_code == 0, dry.output
    listed = json.loads(dry.stdout)
    assert {(i["kind"], i["id"]) for i in listed["items"]} == {
        ("belief", ids["gone_belief"][1]), ("episode", ids["gone_episode"][1])}
    assert "jazz" not in dry.output and "ferry" not in dry.output  # ids, never text
    assert all(_exists(world, *ref) for ref in ids.values())
    table = _cli(world, "--dry-run")
    assert "would remove 2 belief(s), 1 episode(s)" in table.output
    done = _cli(world, "--yes")
    assert done.exit_code == 0, done.output
    assert "removed 2 belief(s), 1 episode(s)" in done.output
    gone = {name for name, ref in ids.items() if not _exists(world, *ref)}
    assert gone == {"gone_belief", "gone_episode", "other_tenant"}
