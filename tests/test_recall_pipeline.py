"""Recall over memory written by the workers' real write path, and the `mnemo recall` CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from click.testing import CliRunner

from memory_core import Memory, format_untrusted_block
from memory_core.db import migrate_stores, open_state
from memory_core.embedders.factory import make_embedder
from memory_core.model.tenants import create_tenant
from memory_core.model.turns import TurnInput
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write import pipeline

TURNS = [
    (datetime(2024, 1, 5, tzinfo=UTC), "I live in Berlin."),
    (datetime(2024, 3, 9, tzinfo=UTC), "My sister Hana plays the cello."),
    (datetime(2024, 6, 1, tzinfo=UTC), "I live in Lisbon now."),
]


def _write(settings: Settings) -> None:
    migrate_stores(settings)
    db = open_state(settings)
    index = VectorIndex(make_embedder(settings))
    create_tenant(db.conn, "acme")
    for i, (at, text) in enumerate(TURNS):
        pipeline.process_turn(db, index, TurnInput("acme", "s1", f"u{i}", "user", text, at))
    db.close()


def test_recall_over_the_write_path_follows_supersession(settings: Settings) -> None:
    _write(settings)
    with Memory.open(settings) as mem:
        now = mem.recall("where do I live", tenant="acme")
        then = mem.recall("where do I live", tenant="acme", as_of="2024-03-01T00:00:00Z")
        block = format_untrusted_block(now)
    assert now.facts[0].text == "the user lives in Lisbon"
    assert now.facts[0].superseded == ("Berlin",) and now.facts[0].valid_to is None
    assert all(f.object != "Berlin" for f in now.facts)  # never presented as current
    assert [(f.object, f.valid_to) for f in then.facts if f.predicate == "lives_in"] == [
        ("Berlin", "2024-06-01T00:00:00.000000Z")]
    assert all("u2" not in e.turn_uids for e in then.entries())  # not yet said at that time
    assert all(i.kind != "belief" for i in now.items)
    assert block.index("[1] (fact, since 2024-06-01, stated by user) the user lives in "
                       "Lisbon (before: Berlin)") < block.index("Evidence")


def test_recall_cli_json_and_explain(settings: Settings, monkeypatch) -> None:
    from scripts.cli import main

    _write(settings)
    monkeypatch.setenv("MNEMO_DATA_DIR", str(settings.data_dir))
    result = CliRunner().invoke(main, ["recall", "cello sister", "--tenant", "acme", "--json",
                                       "--explain"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["items"][0]["turn_uids"] == ["u1"]
    first = next(c for c in data["explanation"]["candidates"] if c["handle"] == 1)
    assert first["decision"] == "kept" and first["id"] == data["items"][0]["id"]
    assert all(c["text"] for c in data["explanation"]["candidates"])  # shown, not stored
    assert data["facts"] == []  # nothing stated answers "cello sister" as a fact
    where = json.loads(CliRunner().invoke(main, ["recall", "where do I live", "--tenant",
                                                 "acme", "--json"]).stdout)
    assert where["facts"][0]["object"] == "Lisbon" and where["facts"][0]["label"] == "[1]"
    table = CliRunner().invoke(main, ["recall", "where do I live", "--tenant", "acme",
                                      "--explain"])
    assert table.exit_code == 0, table.output
    facts, rest = table.stdout.split("Evidence:")
    assert facts.startswith("Facts (currently valid):\n#")
    # Who stated each fact ("user"), not the extractor that `mnemo beliefs list` calls its
    # source ("heuristic"): one word for two things confused a new user.
    assert " said by " in facts.splitlines()[1] and " source " not in facts.splitlines()[1]
    assert "lives_in   Lisbon" in facts and "Berlin" in facts  # Berlin: the value before
    evidence, explained = rest.split("Explanation (every candidate):")
    assert "I live in Lisbon now." in evidence and "lives_in" not in evidence
    assert "kept: rank 1" in explained and "the user lives in Lisbon" in explained
    with Memory.open(settings) as mem:
        logged = mem.ops_db.conn.execute("SELECT explanation FROM recall_log").fetchall()
    assert logged and not any("Lisbon" in r[0] or "cello" in r[0] for r in logged)
    bad = CliRunner().invoke(main, ["recall", "x" * 5000, "--tenant", "acme"])
    assert bad.exit_code == 1 and "MNEMO_MAX_QUERY_CHARS" in bad.output
    unknown = CliRunner().invoke(main, ["recall", "cello", "--tenant", "acmee"])
    assert unknown.exit_code == 1 and "mnemo tenant add acmee" in unknown.output
    # An operator's typo gets the close name of their own store; a far one gets none.
    assert unknown.output.rstrip().endswith("(did you mean 'acme'?)")
    far = CliRunner().invoke(main, ["recall", "cello", "--tenant", "zeta"])
    assert far.exit_code == 1 and "did you mean" not in far.output


def test_memory_explain_and_recollect_cli(settings: Settings, monkeypatch) -> None:
    from scripts.cli import main

    _write(settings)
    monkeypatch.setenv("MNEMO_DATA_DIR", str(settings.data_dir))
    runner = CliRunner()
    recalled = json.loads(runner.invoke(main, ["recall", "where do I live", "--tenant", "acme",
                                               "--json"]).stdout)
    belief = recalled["facts"][0]
    out = runner.invoke(main, ["memory", "explain", belief["id"], "--tenant", "acme", "--json"])
    assert out.exit_code == 0, out.output
    explained = json.loads(out.stdout)
    assert explained["id"] == belief["id"] and explained["status"] == "active"
    assert explained["turn_uid"] == "u2" and "currently valid" in explained["counts_as"]
    assert explained["recalls"], "the recall above is in the recall log"
    turn = json.loads(runner.invoke(main, ["memory", "explain", "turn:u0", "--tenant", "acme",
                                           "--json"]).stdout)
    assert turn["index"] == 0 and turn["text"] == "I live in Berlin."
    missing = runner.invoke(main, ["memory", "explain", "belief:nope", "--tenant", "acme"])
    assert missing.exit_code == 1 and "no memory" in missing.output
    around = runner.invoke(main, ["memory", "recollect", "u1", "--tenant", "acme", "--json"])
    assert around.exit_code == 0, around.output
    assert "My sister Hana plays the cello." in around.stdout
    assert "I live in Berlin." in around.stdout and "I live in Lisbon now." in around.stdout
