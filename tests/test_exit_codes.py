"""The exit codes documented in docs/cli.md and README.md (one table, from
``scripts.cli.exit_codes``) are the codes the commands exit with: a usage error, a mnemo
error, a failed restore drill, a storage fault, a file of turns with bad lines, and `mnemo
health` healthy / degraded / unhealthy. The codes are read from the documents, so a table
that drifts fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_core.db.stores import migrate_stores
from memory_core.settings import Settings
from scripts.cli import main
from scripts.cli.exit_codes import render_table
from tests.conftest import REPO
from tests.test_health import _alive, _env
from tests.test_queue_cli import _dead_letter

_ROW = re.compile(r"^\| (\d+) \| (.*?) \| (.*?) \| (.*?) \|$")


def documented(path: Path) -> dict[str, int]:
    """{what: code} from the exit-code table of a document; ``health:<status>`` for the
    `mnemo health` column's first word."""
    codes: dict[str, int] = {}
    for line in path.read_text().splitlines():
        m = _ROW.match(line)
        if m:
            code, every, health, rec = int(m[1]), m[2], m[3], m[4]
            codes[every.split(":")[0]] = code
            if health != "-":
                codes[f"health:{health.split(';')[0].split(' ')[0]}"] = code
            if rec != "-":
                codes[f"reconcile:{rec.split(',')[0].split(':')[0]}"] = code
    return codes


DOCS = REPO / "docs" / "cli.md"


@pytest.mark.parametrize("name", ["docs/cli.md", "README.md"])
def test_one_table_in_both_documents(name: str) -> None:
    assert render_table() in (REPO / name).read_text()
    assert documented(REPO / name) == documented(DOCS)


def test_the_documented_codes_are_the_ones_commands_exit_with(tmp_path: Path) -> None:
    doc = documented(DOCS)
    # The default log level: the first command run in a process configures logging for it
    # (and a cached logger keeps that level), so an "error" level here would hide warnings
    # from tests that run later and capture them.
    env = {k: v for k, v in _env(tmp_path).items() if k != "MNEMO_LOG_LEVEL"}
    settings = Settings.from_env(env)
    migrate_stores(settings)

    def run(*args: str, **extra: str) -> int:
        return CliRunner().invoke(main, list(args), env={**env, **extra}).exit_code

    assert run("queue", "stats", "--no-such-option") == doc["a usage error"]
    assert run("schedules", "history", "no-such-schedule") == doc["a mnemo error"]
    bad_file = tmp_path / "turns.jsonl"
    bad_file.write_text('{"session_id": "s1"}\n', encoding="utf-8")
    assert run("ingest", "--check", str(bad_file)) == doc["bad input data"]
    assert run("ingest", str(bad_file)) == doc["bad input data"]

    _alive(settings)
    assert run("health") == doc["health:healthy"]
    _dead_letter(settings)
    assert run("health") == doc["health:degraded"]
    assert run("restore-drill") == doc["`mnemo restore-drill` only"]  # no backup: it fails

    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "memory_state.db").write_bytes(b"SQLite format 3\0" + b"\x07" * 3000)
    assert run("memory", "status", MNEMO_DATA_DIR=str(damaged)) == doc[
        "a database is damaged, read-only or full"]
    assert run("health", MNEMO_DATA_DIR=str(damaged)) == doc["health:unhealthy"]
    assert doc["success"] == doc["health:healthy"] == 0
    # `mnemo mirror reconcile` (tests/mirrors/test_reconcile.py runs clean and drift too)
    assert run("mirror", "reconcile") == doc["reconcile:an error"]  # no mirror configured
    assert (doc["reconcile:clean"], doc["reconcile:drift found (`--dry-run`)"]) == (0, 1)
