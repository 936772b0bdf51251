"""Every command is discoverable: help with an example, and a current docs/cli.md."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from scripts.cli import main
from scripts.cli.docs import render, walk

DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
COMMANDS = [(" ".join(path) or "mnemo", cmd) for path, cmd in walk(main)]


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_command_has_help_with_an_example(name: str, command: click.Command) -> None:
    assert command.help, f"`{name}` has no help text"
    assert "Example:" in command.help, f"`{name}` help has no `Example:`"


@pytest.mark.parametrize(("name", "_cmd"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_dash_h_works_everywhere(name: str, _cmd: click.Command) -> None:
    args = [] if name == "mnemo" else name.split()
    result = CliRunner().invoke(main, [*args, "-h"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output


def test_docs_cli_md_is_current() -> None:
    assert DOCS.read_text(encoding="utf-8") == render(main), (
        "docs/cli.md is out of date: run `python -m scripts.cli.docs > docs/cli.md`")
