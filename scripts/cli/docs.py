"""Render the CLI reference (docs/cli.md) from the click tree itself.

Regenerate with ``python -m scripts.cli.docs > docs/cli.md``; a test fails when the file is
out of date or a command has no help with an ``Example:``.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from scripts.cli.exit_codes import render_table

HEADER = f"""# The mnemo CLI

Generated from the commands' own help by `python -m scripts.cli.docs > docs/cli.md`;
a test fails when this file is out of date.

## Conventions

- `--json` on every command prints one JSON document on stdout (progress and warnings go to
  stderr). `mnemo up`, `mnemo worker` and `mnemo scheduler` run until stopped: with `--json`
  they print one JSON object per line, `{{"event": "started", ...}}` once running and
  `{{"event": "stopped", "outcome": "ok"}}` (or `"error"` with the error) when they end.
- Dates and times (`--as-of`, `--date`): `YYYY-MM-DD` (midnight UTC) or ISO-8601; UTC when
  no zone is given. Tables print days as `YYYY-MM-DD` and times as ISO-8601 UTC with `Z`;
  `--json` gives full times in the same form.
- An error is one `Error:` line saying what is wrong and how to fix it, with an exit code
  from the table below. `mnemo ingest` lists every bad line (up to 50) before it.

## Exit codes

{render_table()}"""

PROGRESS = """
## Progress

Commands that can run long (`ingest`, `memory reindex`, `backup now`, `restore`, `mirror sync`,
`mirror reconcile`) report progress on stderr, never on stdout: on a terminal a bar with the
count, the rate and the ETA; otherwise a plain line every 2 s of each step and a last line
with its duration. Nothing shows for work that ends within 2 s, or with `--json` or `--quiet`.
`mnemo queue stats --watch` shows how fast the queues drain.
"""


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], click.Command]]:
    """Every command under ``command``, depth first, groups before their members."""
    yield path, command
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):  # sorted; loads lazy commands
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from walk(sub, (*path, name))


def render(root: click.Command) -> str:
    parts = [HEADER, PROGRESS]
    for path, command in walk(root):
        name = " ".join(("mnemo", *path))
        ctx = click.Context(command, info_name=name, terminal_width=100, max_content_width=100,
                            help_option_names=["-h", "--help"])
        parts.append(f"\n## `{name}`\n\n```text\n{command.get_help(ctx).rstrip()}\n```\n")
    return "".join(parts)


def main() -> None:
    from scripts.cli import main as root

    click.echo(render(root), nl=False)


if __name__ == "__main__":
    main()
