"""The root click group, shared options and the error boundary."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from memory_core.errors import MnemoError
from memory_core.log import configure_logging
from memory_core.settings import Settings

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Ctx:
    """What every command gets: the settings, read once at the entry point."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="mnemo")
@click.pass_context
def main(ctx: click.Context) -> None:
    """mnemo: long-term memory for a chat agent, run by a pool of queue workers.

    Configuration comes from MNEMO_* environment variables (docs/configuration.md).

    Example:

        mnemo memory status
    """
    try:
        settings = Settings.from_env()
    except MnemoError as e:
        raise click.ClickException(str(e)) from e
    configure_logging(settings)
    ctx.obj = Ctx(settings)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn mnemo errors into click errors (exit code 1, the message, no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MnemoError as e:
            raise click.ClickException(str(e)) from e

    return wrapper


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def emit_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print a plain aligned table."""
    rows = [["" if v is None else str(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    click.echo(line.rstrip())
    for row in rows:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def progress(message: str) -> None:
    """A progress line on stderr (keeps --json output on stdout clean)."""
    click.echo(message, err=True)
    sys.stderr.flush()
