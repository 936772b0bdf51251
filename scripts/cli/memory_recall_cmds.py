"""``mnemo memory explain`` and ``mnemo memory recollect`` (attached to the memory group)."""

from __future__ import annotations

import click

from memory_core.db import open_state
from memory_core.model.turns import recollect_turn
from memory_core.recall.inspect import explain_item
from scripts.cli.app import Ctx, chat_view, emit_json, emit_table, handle_errors, json_option
from scripts.cli.dates import show_time


@click.command("explain")
@click.argument("item_id")
@click.option("--tenant", "-t", default=None, help="Tenant (default: MNEMO_TENANT).")
@json_option
@click.pass_obj
@handle_errors
def explain(obj: Ctx, item_id: str, tenant: str | None, as_json: bool) -> None:
    """Why a memory exists, what it counts as, and how recent recalls scored it.

    ITEM_ID is an id shown by `mnemo recall`: belief:..., episode:... or turn:...

    Example:

        mnemo memory explain belief:b_3f2a... --tenant acme
    """
    tenant = tenant or obj.settings.default_tenant
    with chat_view(obj.settings) as (state, ops):
        report = explain_item(state.conn, ops.conn, tenant, item_id)
    if as_json:
        emit_json(report)
        return
    for key in ("id", "why", "counts_as"):
        click.echo(f"{key:10s} {report[key]}")
    skip = {"id", "why", "counts_as", "recalls", "kind"}
    for key, value in report.items():
        if key not in skip and value is not None:
            click.echo(f"{key:10s} {value}")
    click.echo("")
    if not report["recalls"]:
        click.echo("not considered by any logged recall")
        return
    emit_table(["recall at", "query digest", "decision", "handle", "score"], [
        [r["at"], r["query_digest"][:12], r["reason"], r["handle"] or "-", f"{r['score']:.3f}"]
        for r in report["recalls"]])


@click.command("recollect")
@click.argument("turn_uid")
@click.option("--tenant", "-t", default=None, help="Tenant (default: MNEMO_TENANT).")
@click.option("--context", "-c", type=click.IntRange(0, 100), default=10, show_default=True,
              help="Turns to show either side, from the same chat session.")
@json_option
@click.pass_obj
@handle_errors
def recollect(obj: Ctx, turn_uid: str, tenant: str | None, context: int, as_json: bool) -> None:
    """The raw words of turn TURN_UID, with turns around it from the same session.

    Example:

        mnemo memory recollect t-7f3a --tenant acme --context 3
    """
    tenant = tenant or obj.settings.default_tenant
    state = open_state(obj.settings, migrate=False, readonly=True)
    try:
        found = recollect_turn(state.conn, tenant, turn_uid, context=context)
    finally:
        state.close()
    rows = [*found.before, found.turn, *found.after]
    if as_json:
        emit_json({"turn_uid": found.turn.turn_uid, "session_id": found.turn.session_id,
                   "turns": [{"turn_uid": r.turn_uid, "index": r.index, "speaker": r.speaker,
                              "occurred_at": r.occurred_at, "text": r.text,
                              "target": r.turn_uid == turn_uid} for r in rows]})
        return
    emit_table(["", "turn", "time", "speaker", "text"], [
        [">" if r.turn_uid == turn_uid else "", r.turn_uid, show_time(r.occurred_at),
         r.speaker, r.text] for r in rows])
