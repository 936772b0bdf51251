"""``mnemo beliefs invalidate``: a wrong belief marked never true, on a real data dir.

The turns go through the workers' pipeline (real SQLite files, sqlite-vec): the user says
they live in Boston, then that they moved to Denver, and introduces themselves as Sam and
later, wrongly, as Dev. Invalidating the move makes Boston current again; invalidating the
wrong name gives the user back their name; each is idempotent, refuses without --yes, and
cannot reach another tenant's memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memory_core import Memory
from memory_core.db import open_state
from memory_core.model.entities import entity_name, lookup
from memory_core.model.tenants import HUB
from memory_core.settings import Settings
from scripts.cli import main
from tests.helpers.cli_data import cli_env
from tests.helpers.facts_chat import store, write_like_a_worker

TURNS = [("I live in Boston.", "2024-03-01T10:00:00Z"),
         ("I'm Sam.", "2024-03-01T10:01:00Z"),
         ("I moved to Denver last week.", "2024-04-10T09:00:00Z"),
         ("Dev here.", "2024-04-11T09:00:00Z")]


def _turns(tenant: str) -> list[dict[str, Any]]:
    return [{"tenant": tenant, "session_id": "s1", "turn_uid": f"{tenant}-u{i}",
             "speaker": "user", "text": text, "occurred_at": at, "index": i}
            for i, (text, at) in enumerate(TURNS)]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    settings = store(tmp_path / "data")
    write_like_a_worker(settings, "t1", _turns("t1"))
    write_like_a_worker(settings, "t2", _turns("t2"))
    return settings


def mnemo(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=cli_env(settings.data_dir))


def current(settings: Settings, tenant: str = "t1") -> set[tuple[str, str]]:
    result = mnemo(settings, "beliefs", "list", "-t", tenant, "--json")
    assert result.exit_code == 0, result.output
    return {(r["predicate"], r["object"]) for r in json.loads(result.stdout)}


def belief_id(settings: Settings, tenant: str, predicate: str, obj: str) -> str:
    db = open_state(settings, migrate=False, readonly=True)
    try:
        (uid,) = db.conn.execute(
            "SELECT belief_uid FROM beliefs WHERE tenant = ? AND predicate = ? AND "
            "object_text = ?", (tenant, predicate, obj)).fetchone()
    finally:
        db.close()
    return f"belief:{uid}"


def hub_name(settings: Settings, tenant: str) -> str | None:
    db = open_state(settings, migrate=False, readonly=True)
    try:
        return entity_name(db.conn, tenant, HUB)
    finally:
        db.close()


def test_a_wrong_move_invalidated_makes_the_old_city_current_again(settings: Settings) -> None:
    assert {("lives_in", "Denver"), ("moved_to", "Denver")} <= current(settings)
    assert ("lives_in", "Boston") not in current(settings)
    denver, boston = (belief_id(settings, "t1", "lives_in", c) for c in ("Denver", "Boston"))
    shipped = _outbox(settings, "t1", denver)

    done = mnemo(settings, "beliefs", "invalidate", denver, "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"belief": denver, "previous_status": "active",
                                       "status": "invalidated", "current_again": [boston]}
    assert ("lives_in", "Boston") in current(settings)
    assert ("lives_in", "Denver") not in current(settings)
    every = mnemo(settings, "beliefs", "list", "-t", "t1", "--include-superseded", "--json")
    assert {(r["object"], r["status"]) for r in json.loads(every.stdout)
            if r["predicate"] == "lives_in"} == {("Boston", "active"), ("Denver", "invalidated")}
    with Memory.open(settings) as mem:  # what the chat side recalls
        facts = [f.text for f in mem.recall("Where do I live now?", tenant="t1").facts]
    # Where they live is Boston again; the move is a belief of its own (an event), left as is.
    assert any("lives in Boston" in f for f in facts), facts
    assert not any("lives in Denver" in f for f in facts), facts
    # The mirrors follow: the change is in the outbox, in the same transaction.
    assert _outbox(settings, "t1", denver) > shipped

    again = mnemo(settings, "beliefs", "invalidate", denver, "--yes")
    assert again.exit_code == 0, again.output
    assert "already invalidated; nothing changed" in again.stdout
    assert ("lives_in", "Boston") in current(settings)


def _outbox(settings: Settings, tenant: str, belief: str) -> int:
    """How many changes of ``belief`` (``belief:<uid>``) wait in the mirrors' outbox."""
    state = open_state(settings, migrate=False, readonly=True)
    try:
        return int(state.conn.execute(
            "SELECT count(*) FROM outbox WHERE tenant = ? AND kind = 'belief' AND "
            "object_id = ?", (tenant, belief.removeprefix("belief:"))).fetchone()[0])
    finally:
        state.close()


def test_a_wrong_name_invalidated_gives_the_user_their_name_back(settings: Settings) -> None:
    assert hub_name(settings, "t1") == "Dev"
    done = mnemo(settings, "beliefs", "invalidate", belief_id(settings, "t1", "name_is", "Dev"),
                 "--yes")
    assert done.exit_code == 0, done.output
    assert "invalidated (was active)" in done.stdout
    assert hub_name(settings, "t1") == "Sam"
    assert ("name_is", "Sam") in current(settings)
    listed = mnemo(settings, "beliefs", "list", "-t", "t1", "--predicate", "lives_in")
    assert "Sam" in listed.stdout and "Dev" not in listed.stdout  # the user's facts, by name
    assert hub_name(settings, "t2") == "Dev"  # another tenant's memory is its own


def test_the_users_only_name_invalidated_leaves_them_unnamed(settings: Settings) -> None:
    write_like_a_worker(settings, "t3", [{**_turns("t3")[3], "index": 0}])  # "Dev here."
    assert hub_name(settings, "t3") == "Dev"
    result = mnemo(settings, "beliefs", "invalidate", belief_id(settings, "t3", "name_is", "Dev"),
                   "-t", "t3", "--yes")
    assert result.exit_code == 0, result.output
    assert hub_name(settings, "t3") == HUB  # the default name, not the wrong one
    db = open_state(settings, migrate=False, readonly=True)
    try:
        assert lookup(db.conn, "t3", "Dev") is None  # "Dev" no longer names the user
    finally:
        db.close()


def test_it_refuses_without_yes_and_for_what_is_not_this_tenants_belief(
        settings: Settings) -> None:
    denver = belief_id(settings, "t1", "lives_in", "Denver")
    before = current(settings)
    unconfirmed = mnemo(settings, "beliefs", "invalidate", denver)
    assert unconfirmed.exit_code != 0
    assert "pass --yes to confirm" in unconfirmed.output
    assert f"mnemo memory explain {denver}" in unconfirmed.output

    other = belief_id(settings, "t2", "lives_in", "Denver")  # t2's, asked of t1
    crossed = mnemo(settings, "beliefs", "invalidate", other, "-t", "t1", "--yes")
    assert crossed.exit_code != 0
    assert "does not exist in tenant 't1'" in crossed.output
    assert ("lives_in", "Denver") in current(settings, "t2")

    episode = mnemo(settings, "beliefs", "invalidate", "episode:ep_1", "--yes")
    assert episode.exit_code != 0 and "not a belief" in episode.output
    unknown = mnemo(settings, "beliefs", "invalidate", "belief:b_nothing", "--yes")
    assert unknown.exit_code != 0 and "does not exist" in unknown.output
    assert current(settings) == before  # nothing refused changed anything
    assert len(unconfirmed.output.strip().splitlines()) == 1  # one line, with the fix


def test_its_output_names_ids_never_memory_text(settings: Settings) -> None:
    result = mnemo(settings, "beliefs", "invalidate",
                   belief_id(settings, "t1", "lives_in", "Denver"), "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert "Denver" not in result.stderr and "Denver" not in result.stdout
