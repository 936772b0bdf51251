"""daily_digest on real files: the counts match what happened that day, nothing of other
days or tenants; stored once; no memory text in it; `mnemo digest` prints it."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_core.clock import to_db
from memory_core.maintenance.commitments import commitment_gc
from memory_core.maintenance.digest import daily_digest, digest_day, read_digest
from memory_core.maintenance.sweep import sweep
from memory_core.model.deletion import delete_memory
from memory_core.model.entities import lookup
from memory_core.model.merges import merge_entities
from scripts.cli import main
from tests.helpers.maintenance import World, make_world, snapshot

D0 = date(2024, 5, 1)
MORNING = datetime(2024, 5, 1, 8, tzinfo=UTC)
NOON = datetime(2024, 5, 1, 12, tzinfo=UTC)
NEUTRAL = ("The harbour fog was thick.", "The ferry was late again.", "Rain all afternoon.")


@pytest.fixture
def world(tmp_path: Path):
    w = make_world(tmp_path / "data", pending_review_ttl_s=3_600)
    yield w
    w.close()


def _as_if_written_on_d0(world: World) -> None:
    """The write path stamps the real clock: move every system time to D0's morning."""
    m = to_db(MORNING)
    for sql in ("UPDATE turns SET recorded_at = ?", "UPDATE episodes SET created_at = ?",
                "UPDATE entities SET created_at = ?", "UPDATE beliefs SET recorded_at = ?",
                "UPDATE beliefs SET retired_at = ? WHERE retired_at IS NOT NULL",
                "UPDATE entity_merges SET merged_at = ?"):
        world.conn.execute(sql, (m,))


def _happen(world: World) -> dict[str, Any]:
    """One day of memory in t1 (and a little in t2); returns some belief ids."""
    for i, text in enumerate(NEUTRAL):
        world.turn("t1", f"u{i + 1}", text, occurred=MORNING)
    world.turn("t1", "u0", "Snow on the hills.", occurred=MORNING - timedelta(days=1))
    world.turn("t2", "x1", NEUTRAL[0], occurred=MORNING)
    b, d = world.belief, timedelta(days=1)
    ids = {"lisbon": b("t1", "I", "lives_in", "Lisbon", MORNING - 30 * d),
           "porto": b("t1", "I", "lives_in", "Porto", MORNING - d),
           "jazz": b("t1", "Ana", "likes", "jazz", MORNING - 5 * d),
           "tango": b("t1", "Anna", "likes", "tango", MORNING - 5 * d),
           "rome": b("t1", "I", "plans_to", "fly to Rome", MORNING - 40 * d),
           "opera": b("t1", "I", "likes", "opera", MORNING - d, pending_review=True),
           "tea": b("t1", "I", "likes", "tea", MORNING - d),
           "coffee": b("t1", "I", "likes", "coffee", MORNING - d,
                       expires_at=NOON - timedelta(hours=1))}
    assert world.conn.execute("SELECT count(*) FROM beliefs WHERE turn_uid IS NOT NULL"
                              ).fetchone()[0] == 0  # the turns themselves stated nothing
    ids["anna"], ids["ana"] = lookup(world.conn, "t1", "Anna"), lookup(world.conn, "t1", "Ana")
    merge_entities(world.conn, world.index, "t1", ids["anna"], ids["ana"])
    _as_if_written_on_d0(world)
    # The day before: not in D0's digest.
    world.conn.execute("UPDATE turns SET recorded_at = ? WHERE turn_uid = 'u0'",
                       (to_db(MORNING - timedelta(days=1)),))
    world.conn.execute("UPDATE episodes SET created_at = ? WHERE episode_uid IN (SELECT "
                       "e.episode_uid FROM episodes e JOIN episode_turns et ON et.episode_id "
                       "= e.id JOIN turns t ON t.id = et.turn_id WHERE t.turn_uid = 'u0')",
                       (to_db(MORNING - timedelta(days=1)),))
    commitment_gc(world.env(NOON))
    delete_memory(world.conn, world.index, "t1", "belief", ids["tea"], now=NOON)
    sweep(world.conn, world.index, "t1", NOON)
    return ids


def test_the_digest_counts_what_happened_that_day(world: World) -> None:
    ids = _happen(world)
    env = world.env(datetime(2024, 5, 2, 0, 5, tzinfo=UTC))
    assert digest_day(env.now) == D0
    report = daily_digest(env)
    assert report.counts == {"day": "2024-05-01", "digests_stored": 2}
    body = read_digest(world.ops.conn, "t1", D0)
    assert body is not None
    learned, changed, dropped = body["learned"], body["changed"], body["dropped"]
    assert (learned["turns"], learned["episodes"]) == (3, 3)
    assert learned["beliefs"] == 6  # tea and coffee are gone; the rest stays, expired or not
    assert learned["by_predicate"] == {"lives_in": 2, "likes": 3, "plans_to": 1}
    assert learned["anchors"] == 1  # user -related_to-> Ana (Anna's went with the merge)
    names = dict(world.conn.execute("SELECT entity_id, name FROM entities").fetchall())
    # Tea and coffee left with their beliefs; Anna was merged into Ana.
    assert sorted(names[e] for e in learned["entity_ids"]) == [
        "Ana", "Lisbon", "Porto", "jazz", "opera", "tango"]
    assert learned["entities"] == 6
    assert (changed["superseded"], changed["invalidated"], changed["conflicts"]) == (1, 0, 0)
    assert changed["superseded_by_predicate"] == {"lives_in": 1}
    assert changed["entities_merged"] == 1
    assert changed["merges"] == [{"from": ids["anna"], "into": ids["ana"]}]
    assert dropped["deleted"] == {"user_request": {"belief": 1},
                                  "retention_sweep": {"belief": 1}}
    assert (dropped["swept"], dropped["purged"]) == (1, 0)
    assert (dropped["commitments_expired"], dropped["reviews_expired"]) == (1, 1)
    assert dropped["expired_by_predicate"] == {"plans_to": 1}
    other = read_digest(world.ops.conn, "t2", D0)
    assert other is not None and other["learned"]["turns"] == 1
    assert other["learned"]["beliefs"] == 0 and other["dropped"]["deleted"] == {}
    stored = world.ops.conn.execute("SELECT group_concat(body) FROM digests").fetchone()[0]
    for text in ("Lisbon", "jazz", "Ana", "Rome", "harbour", "tea"):
        assert text not in stored  # ids, predicates and counts only


def test_a_second_run_of_the_window_changes_nothing(world: World) -> None:
    _happen(world)
    env = world.env(datetime(2024, 5, 2, 0, 5, tzinfo=UTC))
    daily_digest(env)
    once = snapshot(world)
    report = daily_digest(env)
    assert snapshot(world) == once
    assert report.counts == {"day": "2024-05-01", "already_stored": 2}


def _cli(world: World, *args: str):
    env = {"MNEMO_DATA_DIR": str(world.settings.data_dir), "MNEMO_HASH_DIM": "32"}
    return CliRunner().invoke(main, ["digest", *args], env=env)


def test_cli_prints_the_stored_digest_with_names(world: World) -> None:
    _happen(world)
    daily_digest(world.env(datetime(2024, 5, 2, 0, 5, tzinfo=UTC)))
    out = _cli(world, "--tenant", "t1", "--date", "2024-05-01", "--json")
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert shown["stored"] is True and shown["learned"]["turns"] == 3
    assert "Ana" in shown["names"].values()
    table = _cli(world, "--tenant", "t1", "--date", "2024-05-01")
    assert table.exit_code == 0, table.output
    assert "learned  turns" in table.output and "deleted (retention_sweep)" in table.output
    assert "new beliefs by predicate: likes 3, lives_in 2, plans_to 1" in table.output
    live = _cli(world, "--tenant", "t1", "--date", "2024-04-30", "--json")
    assert json.loads(live.stdout)["stored"] is False
    assert json.loads(live.stdout)["learned"]["turns"] == 1  # u0, the day before
    bad = _cli(world, "--tenant", "t1", "--date", "May 1st")
    assert bad.exit_code == 2 and "'May 1st' is not a date: use YYYY-MM-DD" in bad.output
