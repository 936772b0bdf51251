"""``mnemo recall``: what memory returns for a query, as the chat process would get it."""

from __future__ import annotations

import click

from memory_core import Budget, Memory
from memory_core.recall.explain import last_log
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option

_TEXT_WIDTH = 70


@click.command("recall")
@click.argument("query")
@click.option("--tenant", "-t", default=None, help="Tenant (default: MNEMO_TENANT).")
@click.option("--session", "session_id", default=None, help="Favour this chat session.")
@click.option("--as-of", default=None, help="World time, ISO-8601 with a zone (…Z).")
@click.option("--limit", "-n", type=click.IntRange(1, 1000), default=None,
              help="Items to return (default: MNEMO_RECALL_MAX_ITEMS).")
@click.option("--strategy", default=None, help="Recall preset: default, keyword, fast, "
              "archive, multi_hop.")
@click.option("--explain", is_flag=True, help="Show every candidate's score components and why "
              "it was kept or dropped.")
@json_option
@click.pass_obj
@handle_errors
def recall(obj: Ctx, query: str, tenant: str | None, session_id: str | None,
           as_of: str | None, limit: int | None, strategy: str | None, explain: bool,
           as_json: bool) -> None:
    """Recall memory for QUERY: items with handles, scores and turn pointers.

    Read-only on memory; the explanation (query digest only) goes to the recall log.

    Example:

        mnemo recall "where does Ana live?" --tenant acme --explain
    """
    settings = obj.settings
    budget = Budget(limit, settings.recall_max_tokens) if limit else None
    with Memory.open(settings) as mem:
        result = mem.recall(query, tenant=tenant, session_id=session_id, as_of=as_of,
                            budget=budget, strategy=strategy)
        log = None
        if explain and result.log_id is not None:
            mem.flush_recall_log()
            log = last_log(mem.ops_db.conn, result.tenant, result.log_id)
    if as_json:
        data = result.to_dict()
        if explain:
            data["explanation"] = log
        emit_json(data)
        return
    if result.keyword_only:
        click.echo(f"keyword-only recall: {result.degraded_reason}", err=True)
    if not result.items:
        click.echo("nothing recalled")
    emit_table(["#", "id", "kind", "score", "date", "turns", "text"], [
        [item.label, item.item_id, item.kind, f"{item.score:.3f}",
         (item.occurred_at or "")[:10], ",".join(item.turn_uids[:3]),
         _short(item.text)] for item in result.items])
    if log:
        click.echo("")
        emit_table(["decision", "id", "score", "lists", "components"], [
            [c["reason"], c["id"], f"{c['score']:.3f}",
             " ".join(f"{k}#{v}" for k, v in c["lists"].items()),
             " ".join(f"{k}={v:.2f}" for k, v in c["components"].items() if v)]
            for c in log["candidates"]])


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _TEXT_WIDTH else text[: _TEXT_WIDTH - 1] + "…"
