"""``mnemo mirror``: the Postgres and Neo4j mirrors of the memory."""

from __future__ import annotations

import click

from memory_core.db import open_ops, open_state
from memory_core.mirrors.outbox import configured_mirrors
from memory_core.mirrors.status import mirror_status
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option
from scripts.cli.dates import show_time


@click.group()
def mirror() -> None:
    """The mirrors (Postgres, Neo4j): how far behind each one is.

    A mirror is configured by its URL (MNEMO_POSTGRES_URL, MNEMO_NEO4J_URL); the workers'
    ship_changes job keeps it current from the change outbox.

    Example:

        mnemo mirror status
    """


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


@mirror.command()
@json_option
@click.pass_obj
@handle_errors
def status(obj: Ctx, as_json: bool) -> None:
    """Per configured mirror: its URL (canonical, no password), the changes not yet shipped
    and the age of the oldest of them, when it last shipped, and its last error.

    Reads only memory_state.db and memory_ops.db, so it answers while a mirror is down.

    Example:

        mnemo mirror status --json
    """
    sinks = configured_mirrors(obj.settings)
    state, ops = open_state(obj.settings), open_ops(obj.settings)
    try:
        rows = mirror_status(state.conn, ops.conn, obj.settings, sinks)
    finally:
        state.close()
        ops.close()
    if as_json:
        emit_json({"mirrors": [r.as_dict() for r in rows]})
        return
    if not rows:
        click.echo("no mirror configured (set MNEMO_POSTGRES_URL or MNEMO_NEO4J_URL)")
        return
    emit_table(["mirror", "target", "lag (changes)", "lag (age)", "shipped at", "last error"],
               [[r.sink, r.target or "-", r.lag_changes, _age(r.lag_seconds),
                 show_time(r.shipped_at) or "-", r.last_error or "-"] for r in rows])
