"""``mnemo beliefs list|history`` and ``mnemo entities list``: what memory knows, read-only,
one tenant at a time, over a data directory written by the workers' pipeline."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from scripts.cli import main
from tests.helpers.cli_data import cli_env, local_zone_not_utc, seed_data_dir

__all__ = ["local_zone_not_utc"]  # a fixture used here


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("know") / "data"
    seed_data_dir(path)
    return path


def mnemo(data_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=cli_env(data_dir))


def as_json(data_dir: Path, *args: str) -> Any:
    result = mnemo(data_dir, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def facts(rows: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(r["subject"], r["predicate"], r["object"]) for r in rows}


def test_current_beliefs_by_default(data_dir: Path) -> None:
    rows = as_json(data_dir, "beliefs", "list", "--tenant", "t1")
    assert ("Sam", "lives_in", "Osaka") in facts(rows)
    assert ("Ana Silva", "lives_in", "Osaka") in facts(rows)
    assert {r["status"] for r in rows} <= {"active", "conflict"}
    assert not {("Sam", "lives_in", "Lisbon"), ("Sam", "lives_in", "Berlin")} & facts(rows)
    sam = next(r for r in rows if r["predicate"] == "lives_in" and r["subject"] == "Sam")
    assert (sam["valid_to"], sam["turn_uid"], sam["source"]) == (None, "u0017", "heuristic")
    assert sam["valid_from"].startswith("2024-05-03T12:17:00")


def test_the_table_shows_the_columns_and_days(data_dir: Path) -> None:
    result = mnemo(data_dir, "beliefs", "list", "-t", "t1", "--predicate", "lives_in")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["subject", "predicate", "object", "valid", "from", "valid",
                                "to", "status", "conf", "source", "turn", "id"]
    rows, ids = zip(*(line.rsplit("  ", 1) for line in lines[1:]), strict=True)
    assert [row.rstrip() for row in rows] == [
        "Ana Silva  lives_in   Osaka   2024-05-04  -         active  0.70  heuristic  u0021",
        "Sam        lives_in   Osaka   2024-05-03  -         active  0.80  heuristic  u0017"]
    # The id is the one `mnemo memory explain` and `mnemo beliefs invalidate` take.
    listed = as_json(data_dir, "beliefs", "list", "-t", "t1", "--predicate", "lives_in")
    assert [i.strip() for i in ids] == [f"belief:{r['belief_uid']}" for r in listed]


@pytest.mark.parametrize(("as_of", "city"), [
    ("2024-05-02", "Lisbon"),  # midnight UTC: Berlin came at 12:09 that day
    ("2024-05-02T12:30:00", "Berlin"),  # no zone: UTC
    ("2024-05-02T12:05:00", "Lisbon"),  # UTC, not the process's zone (16:05 UTC: Berlin)
    ("2024-05-02T12:30:00+02:00", "Lisbon"),  # 10:30 UTC
    ("2024-05-02T05:30:00-07:00", "Berlin"),  # 12:30 UTC
    ("2024-05-03T13:00:00Z", "Osaka"),
])
@pytest.mark.usefixtures("local_zone_not_utc")
def test_as_of_takes_a_day_or_an_iso_time_with_or_without_a_zone(data_dir: Path, as_of: str,
                                                                city: str) -> None:
    rows = as_json(data_dir, "beliefs", "list", "-t", "t1", "-s", "Sam", "-p", "lives_in",
                   "--as-of", as_of)
    assert facts(rows) == {("Sam", "lives_in", city)}


def test_include_superseded_lists_every_status(data_dir: Path) -> None:
    rows = as_json(data_dir, "beliefs", "list", "-t", "t1", "-s", "sam", "-p", "lives_in",
                   "--include-superseded")
    assert [(r["object"], r["status"]) for r in rows] == [
        ("Lisbon", "superseded"), ("Berlin", "superseded"), ("Osaka", "active")]
    at = as_json(data_dir, "beliefs", "list", "-t", "t1", "-s", "sam", "-p", "lives_in",
                 "--include-superseded", "--as-of", "2024-05-02T13:00Z")
    assert [r["object"] for r in at] == ["Berlin"]


def test_history_is_the_chain_oldest_first_with_turns(data_dir: Path) -> None:
    chain = as_json(data_dir, "beliefs", "history", "-t", "t1", "I", "lives_in")
    assert [(r["object"], r["turn_uid"], r["status"]) for r in chain] == [
        ("Lisbon", "u0001", "superseded"), ("Berlin", "u0009", "superseded"),
        ("Osaka", "u0017", "active")]
    # each value held until the next one began
    assert [r["valid_to"] for r in chain[:-1]] == [r["valid_from"] for r in chain[1:]]
    assert chain[-1]["valid_to"] is None


@pytest.mark.parametrize("label", ["Ana Silva", "ana silva", "ANA", "ana"])
def test_a_subject_is_found_by_name_or_alias_in_any_case(data_dir: Path, label: str) -> None:
    chain = as_json(data_dir, "beliefs", "history", "-t", "t1", label, "lives_in")
    assert [r["object"] for r in chain] == ["Lisbon", "Berlin", "Osaka"]
    assert {r["subject"] for r in chain} == {"Ana Silva"}


def test_nothing_crosses_tenants(data_dir: Path) -> None:
    rows = as_json(data_dir, "beliefs", "list", "-t", "t2", "--include-superseded")
    assert ("Sam", "lives_in", "Lisbon") in facts(rows)
    assert not any(r["object"] in ("Berlin", "Osaka") for r in rows)
    names = {e["name"] for e in as_json(data_dir, "entities", "list", "-t", "t2")}
    assert "Ana" in names and "Ana Silva" not in names and "Osaka" not in names


def test_entities_with_kind_aliases_and_counts(data_dir: Path) -> None:
    found = {e["name"]: e for e in as_json(data_dir, "entities", "list", "--tenant", "t1")}
    assert found["Sam"]["entity_id"] == "user" and found["Sam"]["kind"] == "person"
    assert found["Sam"]["aliases"] == ["user"]
    assert found["Ana Silva"]["aliases"] == ["Ana"]
    assert found["Ana Silva"]["beliefs"] == 3  # lives_in, works_at (subject), has_sibling
    assert found["Ana Silva"]["beliefs_as_subject"] == 6  # with the superseded ones
    # Kinds as the beliefs' roles say (a sister, a workplace, places lived in, a pet); a
    # new user saw every entity listed as a "thing".
    assert {name: found[name]["kind"] for name in ("Ana Silva", "Acme", "Lisbon", "Osaka",
                                                   "Rex")} == {
        "Ana Silva": "person", "Acme": "organization", "Lisbon": "place", "Osaka": "place",
        "Rex": "pet"}
    table = mnemo(data_dir, "entities", "list", "-t", "t1")
    assert table.exit_code == 0
    assert any(line.split()[:5] == ["Ana", "Silva", "person", "Ana", "3"]
               for line in table.stdout.splitlines())


@pytest.mark.parametrize(("args", "expected"), [
    (["beliefs", "list", "-t", "nope"], "tenant 'nope' does not exist: check the name with "
                                        "`mnemo tenant list`"),
    (["entities", "list", "-t", "nope"], "`mnemo tenant list`"),
    (["beliefs", "history", "-t", "t1", "Bob", "lives_in"],
     "no entity named 'Bob' in tenant 't1': see its entities with `mnemo entities list "
     "--tenant t1`"),
    (["beliefs", "list", "-t", "t1", "-p", "livesin"], "unknown predicate 'livesin': use one of"),
    (["beliefs", "list", "-t", "t2", "-s", "Ana Silva"], "no entity named 'Ana Silva' in "
                                                         "tenant 't2'"),  # t1's name only
])
def test_errors_are_one_line_with_the_fix(data_dir: Path, args: list[str],
                                          expected: str) -> None:
    result = mnemo(data_dir, *args)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], lines
    assert result.stdout == ""


def test_reading_changes_nothing(data_dir: Path) -> None:
    def digest() -> str:
        return hashlib.sha256((data_dir / "memory_state.db").read_bytes()).hexdigest()

    before = digest()
    for args in (["beliefs", "list", "--include-superseded"], ["entities", "list"],
                 ["beliefs", "history", "Sam", "likes"]):
        assert mnemo(data_dir, *args, "-t", "t1").exit_code == 0
    assert digest() == before


def test_a_listing_cut_at_the_bound_says_so(data_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memory_core.recall.knowledge.MAX_ROWS", 3)
    monkeypatch.setattr("scripts.cli.beliefs.MAX_ROWS", 3)
    result = mnemo(data_dir, "beliefs", "list", "-t", "t1", "--json")
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)) == 3
    assert "the first 3 beliefs only: narrow the list with --subject or --predicate" in \
        result.stderr
