"""The root click group, shared options and the error boundary.

The root group loads its commands' modules on first use (``MnemoGroup.add_lazy``): they
import the worker, maintenance and broker code with SQLAlchemy, numpy, Dramatiq and the
extractor, which `mnemo --help` and every other command need not pay for. This module itself
imports only click and the light parts of ``memory_core``.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import click

from memory_core.clock import to_db
from memory_core.db import Database, open_ops, open_state
from memory_core.db.faults import fault_of, storage_status, store_error
from memory_core.db.sqlite import sqlite_module
from memory_core.errors import (
    BrokerError,
    MnemoError,
    StoreDamagedError,
    StoreError,
    StoreUnwritableError,
    UnknownTenantError,
)
from memory_core.settings import Settings
from scripts.cli import exit_codes

STORAGE_FAULT_EXIT = exit_codes.STORAGE_FAULT  # damaged, read-only or full (docs/cli.md)

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Ctx:
    """What every command gets: the settings, read once at the entry point."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings


class StorageFault(click.ClickException):
    """A damaged, read-only or full database: exit code 4, the file and the fix."""

    exit_code = STORAGE_FAULT_EXIT


def _handled(e: BaseException) -> bool:
    """A mnemo error or an error of either SQLite driver (stdlib sqlite3 or pysqlite3)."""
    import sqlite3

    return isinstance(e, MnemoError | sqlite3.Error | sqlite_module().Error)


def click_error(e: BaseException) -> click.ClickException:
    """The one ``Error:`` line (and exit code) for a mnemo or SQLite error."""
    if isinstance(e, StoreDamagedError | StoreUnwritableError):
        return StorageFault(str(e))
    if isinstance(e, UnknownTenantError):
        return click.ClickException(str(e) + _close_tenants(e.tenant))
    if isinstance(e, MnemoError):
        return click.ClickException(str(e))
    wrapped = _locate(e)
    if isinstance(wrapped, StoreDamagedError | StoreUnwritableError):
        return StorageFault(str(wrapped))
    return click.ClickException(str(wrapped))


def _current_obj() -> Ctx | None:
    """The running command's ``Ctx`` (its settings), if a command is running."""
    ctx = click.get_current_context(silent=True)
    return ctx.find_object(Ctx) if ctx is not None else None


def _close_tenants(name: str | None) -> str:
    """For a mistyped tenant, the operator's own store's tenants whose names are close, as
    `` (did you mean 'acme'?)`` (never in the library, whose callers are tenants
    themselves); empty when none is close or the store cannot be read."""
    obj = _current_obj()
    if name is None or obj is None:
        return ""
    from memory_core.model.tenants import list_tenants

    try:
        state = open_state(obj.settings, migrate=False, readonly=True)
        try:
            names = list_tenants(state.conn)
        finally:
            state.close()
    except Exception:  # a probe that fails must not hide the original error
        return ""
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(t) for t in close)}?)" if close else ""


def _locate(e: BaseException) -> StoreError:
    """Name the database behind a raw SQLite error: the one ``storage_status`` finds at
    fault (damaged first), else the error as it came."""
    obj = _current_obj()
    fault = fault_of(e)
    if obj is not None:
        try:
            found = storage_status(obj.settings)
        except Exception:  # a probe that fails must not hide the original error
            found = {}
        for status in sorted(found.values(), key=lambda s: s.state != "damaged"):
            if not status.ok and status.state != "missing":
                return store_error(e, status.path, f"running this command ({status.detail})")
        if fault is not None:
            return store_error(e, obj.settings.data_dir, "running this command")
    return store_error(e, "a mnemo database", "running this command")


class MnemoGroup(click.Group):
    """The root group: whatever command runs, a mnemo or SQLite error ends as one
    ``Error:`` line and its exit code, never a traceback. Commands added with ``add_lazy``
    are imported when they are run or asked for help; the group's own help lists them from
    their summary without importing them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, str]] = {}  # name -> ("module:attribute", summary)

    def add_lazy(self, name: str, target: str, summary: str) -> None:
        """Register command ``name`` as ``target`` ("module:attribute"), loaded on first use.
        ``summary``: the first paragraph of its help (a test keeps the two equal)."""
        self.lazy[name] = (target, summary)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attribute = self.lazy[cmd_name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, with a lazy command's summary instead of importing it."""
        rows: list[tuple[str, click.Command | None, str]] = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name)
            if cmd is None:
                rows.append((name, None, self.lazy[name][1]))
            elif not cmd.hidden:
                rows.append((name, cmd, ""))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([
                    (name, (cmd or click.Command(name, help=summary)).get_short_help_str(limit))
                    for name, cmd, summary in rows])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as e:
            if not _handled(e):
                raise
            raise click_error(e) from e


@click.group(cls=MnemoGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="mnemo")
@click.pass_context
def main(ctx: click.Context) -> None:
    """mnemo: long-term memory for a chat agent, run by a pool of queue workers.

    Configuration comes from MNEMO_* environment variables (docs/configuration.md).

    Example:

        mnemo memory status
    """
    from memory_core.log import configure_logging  # structlog: not for `mnemo --help`

    try:
        settings = Settings.from_env()
    except MnemoError as e:
        raise click.ClickException(str(e)) from e
    configure_logging(settings)
    ctx.obj = Ctx(settings)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn mnemo and SQLite errors into click errors (the message, no traceback): exit
    code 4 for a damaged, read-only or full database, 1 for any other mnemo error."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if not _handled(e):
                raise
            raise click_error(e) from e

    return wrapper


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _json_value(value: Any) -> Any:
    """A datetime as ISO-8601 UTC with Z (the storage encoding, as the stored times the
    commands print); anything else as its text."""
    if isinstance(value, datetime) and value.utcoffset() is not None:
        return to_db(value)
    return str(value)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=_json_value))


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


@contextmanager
def chat_view(settings: Settings) -> Iterator[tuple[Database, Database]]:
    """(state, ops): the state database read as the chat reads it (read-only, not migrated)
    and the ops database (not migrated), both closed on the way out."""
    state = open_state(settings, migrate=False, readonly=True)
    try:
        ops = open_ops(settings, migrate=False)
        try:
            yield state, ops
        finally:
            ops.close()
    finally:
        state.close()


@contextmanager
def redis_errors(settings: Settings, failed: str) -> Iterator[None]:
    """A Redis error inside becomes a BrokerError naming the (redacted) URL, what ``failed``
    ("did not answer") and the fix."""
    import redis

    try:
        yield
    except redis.RedisError as e:
        raise BrokerError(
            f"Redis at {settings.broker_url} {failed} ({type(e).__name__}): "
            "start it, or check MNEMO_BROKER_URL") from e
