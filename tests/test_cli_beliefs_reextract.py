"""``mnemo beliefs reextract`` on a real data dir written by an older release's extractor
(``tests/test_reextract.py``): a dry run shows the changes and writes nothing, the run
makes them, a second run makes none, and it refuses without --yes or a tenant it lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memory_core import heartbeats
from memory_core.clock import utcnow
from memory_core.db import open_ops, open_state
from memory_core.settings import Settings
from memory_core.write.reextract import note_rules
from scripts.cli import main
from tests.helpers.cli_data import cli_env
from tests.helpers.facts_chat import store, write_like_a_worker
from tests.test_reextract import beat, older_rules, turns


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    settings = store(tmp_path / "data")
    write_like_a_worker(settings, "t1", turns("t1"), extractor=older_rules)
    return settings


def mnemo(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=cli_env(settings.data_dir))


def cities(settings: Settings) -> set[str]:
    result = mnemo(settings, "beliefs", "list", "-t", "t1", "-p", "lives_in", "--json")
    assert result.exit_code == 0, result.output
    return {r["object"] for r in json.loads(result.stdout)}


def test_a_dry_run_shows_the_changes_then_the_run_makes_them(settings: Settings) -> None:
    refused = mnemo(settings, "beliefs", "reextract", "-t", "t1")
    assert refused.exit_code != 0 and "--yes" in refused.output and "--dry-run" in refused.output

    dry = mnemo(settings, "beliefs", "reextract", "-t", "t1", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "6 turns read" in dry.stdout
    assert "would add 1, would invalidate 3" in dry.stdout
    assert "job_title_is" in dry.stdout and "Austin" in dry.stdout
    assert cities(settings) == {"Austin"}  # nothing written

    done = mnemo(settings, "beliefs", "reextract", "-t", "t1", "--yes", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert (report["added"], report["invalidated"], report["dry_run"]) == (1, 3, False)
    assert {(c["change"], c["predicate"], c["object"]) for c in report["changes"]} == {
        ("add", "job_title_is", "data analyst"), ("invalidate", "lives_in", "Austin"),
        ("invalidate", "prefers", "sweet food"), ("invalidate", "likes", "mild food")}
    assert all(c["belief"].startswith("belief:b_") for c in report["changes"])
    assert cities(settings) == {"Boston"}

    again = mnemo(settings, "beliefs", "reextract", "-t", "t1", "--yes")
    assert again.exit_code == 0, again.output
    assert "added 0, invalidated 0" in again.stdout


def test_an_unknown_tenant_is_refused_with_the_fix(settings: Settings) -> None:
    result = mnemo(settings, "beliefs", "reextract", "-t", "nobody", "--dry-run")
    assert result.exit_code != 0
    assert "nobody" in result.output and "mnemo tenant" in result.output


def test_all_tenants_runs_each_one(settings: Settings) -> None:
    write_like_a_worker(settings, "t2", turns("t2"), extractor=older_rules)
    both = mnemo(settings, "beliefs", "reextract", "-t", "t1", "--all-tenants", "--dry-run")
    assert both.exit_code != 0 and "--all-tenants" in both.output

    done = mnemo(settings, "beliefs", "reextract", "--all-tenants", "--yes", "--json")
    assert done.exit_code == 0, done.output
    reports = json.loads(done.stdout)["tenants"]
    assert [(r["tenant"], r["added"], r["invalidated"]) for r in reports] == [
        ("t1", 1, 3), ("t2", 1, 3)]
    text = mnemo(settings, "beliefs", "reextract", "--all-tenants", "--dry-run")
    assert "t1: 6 turns read" in text.stdout and "t2: 6 turns read" in text.stdout


def test_memory_status_names_the_tenants_behind_the_rules(settings: Settings) -> None:
    db = open_state(settings, migrate=False)
    try:
        note_rules(db.conn)  # an upgraded worker started after these turns were extracted
    finally:
        db.close()
    status = mnemo(settings, "memory", "status", "--json")
    assert status.exit_code == 0, status.output
    extractor = json.loads(status.stdout)["extractor"]
    assert (extractor["tenants_behind"], extractor["turns_behind"]) == (1, 6)
    text = mnemo(settings, "memory", "status").stdout
    assert "1 tenant(s), 6 turns extracted by older rules" in text
    assert "mnemo beliefs reextract" in text

    assert mnemo(settings, "beliefs", "reextract", "--all-tenants", "--yes").exit_code == 0
    after = json.loads(mnemo(settings, "memory", "status", "--json").stdout)["extractor"]
    assert after["tenants_behind"] == 0
    assert "older rules" not in mnemo(settings, "memory", "status").stdout


def test_memory_status_says_older_workers_still_run(settings: Settings) -> None:
    db, ops = open_state(settings, migrate=False), open_ops(settings, migrate=False)
    try:
        note_rules(db.conn)
        heartbeats.write(ops.conn, beat(None, utcnow()))  # a worker of an older release
    finally:
        db.close()
        ops.close()
    text = mnemo(settings, "memory", "status").stdout
    assert "1 worker(s) still run other extractor rules (unnamed)" in text
    assert "re-extract once every worker runs this release" in text
    status = json.loads(mnemo(settings, "memory", "status", "--json").stdout)["extractor"]
    assert status["upgrading"] is True and status["older_workers"][0]["rules"] is None
