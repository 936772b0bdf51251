"""`mnemo --help` and the health probes start without the heavy libraries, and the lazy
commands' summaries are their help's first paragraph (scripts/cli/__init__.py)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from memory_core import heartbeats
from memory_core.db import migrate_stores, open_ops
from memory_core.settings import Settings
from scripts.cli import COMMANDS, main

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("numpy", "sqlalchemy", "dramatiq", "redis", "sqlite_vec", "fastembed", "onnxruntime",
         "apscheduler", "psycopg", "neo4j", "workers", "schedules", "memory_core.extraction",
         "memory_core.write", "memory_core.maintenance", "memory_core.chat",
         "memory_core.recall", "memory_core.db.migrations")

# Runs the installed entry point's code path (scripts.cli:main) in a fresh interpreter and
# prints the modules loaded once the help is out.
PROBE = """
import sys
import click
from scripts.cli import COMMANDS, main
if sys.argv[1:] == ["load-all"]:
    for name in COMMANDS:
        main.get_command(click.Context(main), name)
try:
    main(["--help"], prog_name="mnemo")
except SystemExit as e:
    assert e.code == 0, e.code
print("\\n--modules--")
print("\\n".join(sorted(sys.modules)))
"""


def _help_in_fresh_interpreter(*args: str) -> tuple[str, set[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text, _, modules = out.stdout.partition("\n--modules--\n")
    return text, set(modules.split())


def test_mnemo_help_imports_no_heavy_module() -> None:
    text, loaded = _help_in_fresh_interpreter()
    assert "worker" in text and "restore-drill" in text  # the full listing was printed
    heavy = sorted(m for m in loaded if m.startswith(HEAVY))
    assert heavy == []


# A deployment runs the probes every few seconds: one call cost ~1.1 s of CPU when it loaded
# the full report's modules (numpy, SQLAlchemy, redis), ~0.25 s without them.
PROBE_RUN = """
import sys
from scripts.cli import main
try:
    main(sys.argv[1:], prog_name="mnemo")
except SystemExit as e:
    print("\\n--exit--", e.code)
print("\\n--modules--")
print("\\n".join(sorted(sys.modules)))
"""


@pytest.mark.parametrize("args", [["--worker"], ["--worker", "--ready"], ["--scheduler"]])
def test_the_health_probes_import_no_heavy_module(args: list[str], tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path / "data")
    migrate_stores(settings)
    ops = open_ops(settings)
    try:
        heartbeats.Heartbeater(ops, "worker", interval_s=1, keep_s=3600).beat()
    finally:
        ops.close()
    env = {**os.environ, "MNEMO_DATA_DIR": str(settings.data_dir)}
    out = subprocess.run([sys.executable, "-c", PROBE_RUN, "health", *args], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=60)
    text, _, modules = out.stdout.partition("\n--modules--\n")
    assert ("--exit-- 0" if args[0] == "--worker" else "--exit-- 2") in text, out.stderr
    heavy = sorted(m for m in modules.split() if m.startswith(HEAVY))
    assert heavy == []


def test_the_lazy_listing_is_the_listing_of_the_loaded_commands() -> None:
    lazy_text, _ = _help_in_fresh_interpreter()
    loaded_text, loaded = _help_in_fresh_interpreter("load-all")
    assert "workers.pool" in loaded  # the second run did import every command
    assert lazy_text == loaded_text


def test_every_summary_is_the_first_paragraph_of_the_commands_help() -> None:
    ctx = click.Context(main)
    assert set(COMMANDS) == set(main.list_commands(ctx))
    for name, (_, summary) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None, name
        first = inspect.cleandoc(command.help or "").split("\n\n")[0]
        assert summary == " ".join(first.split()), f"update the summary of `mnemo {name}`"


def test_a_lazy_command_runs() -> None:
    result = CliRunner().invoke(main, ["queue", "verify", "-h"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output
