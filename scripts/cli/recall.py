"""``mnemo recall``: what memory returns for a query, as the chat process would get it."""

from __future__ import annotations

from datetime import datetime

import click

from memory_core import Budget, Memory
from memory_core.recall.explain import last_log
from memory_core.recall.inspect import texts_of
from memory_core.recall.result import RecallResult
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option
from scripts.cli.data_dir import require_data_dir
from scripts.cli.dates import date_option, show_day

_TEXT_WIDTH = 70


@click.command("recall")
@click.argument("query")
@click.option("--tenant", "-t", default=None, help="Tenant (default: MNEMO_TENANT).")
@click.option("--session", "session_id", default=None, help="Favour this chat session.")
@date_option("--as-of", help="Recall what was valid at this world time")
@click.option("--limit", "-n", type=click.IntRange(1, 1000), default=None,
              help="Evidence items to return (default: MNEMO_RECALL_MAX_ITEMS).")
@click.option("--facts", "fact_budget", type=click.IntRange(0, 100), default=None,
              help="Facts to return (default: MNEMO_RECALL_FACT_BUDGET; 0: none).")
@click.option("--strategy", default=None, help="Recall preset: default, keyword, fast, "
              "archive, multi_hop.")
@click.option("--explain", is_flag=True, help="Show every candidate with its text, score "
              "components and why it was kept or dropped.")
@json_option
@click.pass_obj
@handle_errors
def recall(obj: Ctx, query: str, tenant: str | None, session_id: str | None,
           as_of: datetime | None, limit: int | None, fact_budget: int | None,
           strategy: str | None, explain: bool, as_json: bool) -> None:
    """Recall memory for QUERY: facts, then evidence, with handles, scores and turn pointers.

    Facts are the beliefs valid now (with --as-of: valid then) that answer the query, best
    first: subject, predicate, object, since when, confidence, who stated it and the turn it
    came from. Evidence is the episodes and raw turns, best first. --explain adds every
    candidate with its text (read from memory for this display; the recall log itself
    keeps no text). Read-only on memory; the explanation goes to the recall log.

    Example:

        mnemo recall "where does Ana live?" --tenant acme --explain
    """
    require_data_dir(obj.settings)
    settings = obj.settings
    budget = Budget(limit, settings.recall_max_tokens) if limit else None
    with Memory.open(settings, warn_keyword_grade=explain) as mem:
        result = mem.recall(query, tenant=tenant, session_id=session_id, as_of=as_of,
                            budget=budget, strategy=strategy, fact_budget=fact_budget)
        log = None
        if explain and result.log_id is not None:
            mem.flush_recall_log()
            log = last_log(mem.ops_db.conn, result.tenant, result.log_id)
        if log:
            texts = texts_of(mem.state_db.conn, result.tenant,
                             [c["id"] for c in log["candidates"]])
            texts.update({e.item_id: e.text for e in result.entries()})
            for cand in log["candidates"]:
                cand["text"] = texts.get(cand["id"])
    if as_json:
        data = result.to_dict()
        if explain:
            data["explanation"] = log
        emit_json(data)
        return
    if result.keyword_only:
        click.echo(f"keyword-only recall: {result.degraded_reason}", err=True)
    _tables(result)
    if log:
        click.echo("\nExplanation (every candidate):")
        emit_table(["decision", "id", "score", "lists", "components", "text"], [
            [c["reason"], c["id"], f"{c['score']:.3f}",
             " ".join(f"{k}#{v}" for k, v in c["lists"].items()),
             " ".join(f"{k}={v:.2f}" for k, v in c["components"].items() if v),
             _short(c["text"] or "(no longer stored)")]
            for c in log["candidates"]])


def _tables(result: RecallResult) -> None:
    """Facts, then evidence, as two tables."""
    if not result.facts and not result.items:
        click.echo("nothing recalled")
        return
    when = f"valid at {show_day(result.as_of)}" if result.as_of else "currently valid"
    click.echo(f"Facts ({when}):")
    if result.facts:
        emit_table(["#", "subject", "predicate", "object", "since", "until", "conf", "said by",
                    "turns", "before", "id"], [
            [f.label, f.subject, f.predicate, _short(f.object, 40), show_day(f.valid_from),
             show_day(f.valid_to), f"{f.confidence:.2f}", f.source,
             ",".join(f.turn_uids[:3]), _short(", ".join(f.superseded), 30), f.fact_id]
            for f in result.facts])
    else:
        click.echo("(none)")
    click.echo("\nEvidence:")
    if result.items:
        emit_table(["#", "id", "kind", "score", "date", "turns", "text"], [
            [item.label, item.item_id, item.kind, f"{item.score:.3f}",
             show_day(item.occurred_at), ",".join(item.turn_uids[:3]),
             _short(item.text)] for item in result.items])
    else:
        click.echo("(none)")


def _short(text: str, width: int = _TEXT_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
