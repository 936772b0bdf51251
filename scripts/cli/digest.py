"""``mnemo digest``: what memory learned, changed and dropped in a day."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import click

from memory_core.clock import utcnow
from memory_core.maintenance.digest import compute_digest, digest_day, read_digest
from memory_core.model.tenants import require_tenant
from scripts.cli.app import Ctx, chat_view, emit_json, emit_table, handle_errors, json_option
from scripts.cli.dates import date_option


def _day(moment: datetime | None) -> date:
    return digest_day(utcnow()) if moment is None else moment.date()  # a UTC datetime


def _names(conn: Any, tenant: str, body: dict[str, Any]) -> dict[str, str]:
    """Entity names of the ids the digest mentions, looked up now (gone: not listed)."""
    ids = set(body["learned"]["entity_ids"]) | {m["into"] for m in body["changed"]["merges"]}
    names = {}
    for entity_id in sorted(ids):
        row = conn.execute("SELECT name FROM entities WHERE tenant = ? AND entity_id = ?",
                           (tenant, entity_id)).fetchone()
        if row is not None:
            names[entity_id] = row[0]
    return names


@click.command()
@click.option("--tenant", "-t", default=None, help="Tenant (default: MNEMO_TENANT).")
@date_option("--date", "day", help="The UTC day of this date or time (default: yesterday, "
             "the last complete day)")
@json_option
@click.pass_obj
@handle_errors
def digest(obj: Ctx, tenant: str | None, day: datetime | None, as_json: bool) -> None:
    """What memory learned, changed and dropped in a day, for one tenant.

    Shows the digest the daily_digest job stored for that day; for a day it has not
    digested (today, or before the job ran) it is computed now and marked "live". The
    digest holds counts, predicates and ids; entity names are looked up when shown.

    Example:

        mnemo digest --tenant acme --date 2024-05-01 --json
    """
    tenant = tenant or obj.settings.default_tenant
    when = _day(day)
    with chat_view(obj.settings) as (state, ops):
        require_tenant(state.conn, tenant)
        body = read_digest(ops.conn, tenant, when)
        stored = body is not None
        if body is None:
            body = compute_digest(state.conn, tenant, when)
        names = _names(state.conn, tenant, body)
    if as_json:
        emit_json({**body, "stored": stored, "names": names})
    else:
        _show(body, stored, names)


def _show(body: dict[str, Any], stored: bool, names: dict[str, str]) -> None:
    learned, changed, dropped = body["learned"], body["changed"], body["dropped"]
    click.echo(f"digest of {body['tenant']} for {body['day']} (UTC)"
               + ("" if stored else " - live, not stored"))
    click.echo("")
    rows = [["learned", k, learned[k]] for k in ("turns", "episodes", "entities", "beliefs",
                                                  "anchors")]
    rows += [["changed", k, changed[k]] for k in ("superseded", "invalidated", "conflicts",
                                                   "entities_merged")]
    rows += [["dropped", f"deleted ({reason})", sum(kinds.values())]
             for reason, kinds in sorted(dropped["deleted"].items())]
    rows += [["dropped", k, dropped[k]] for k in ("commitments_expired", "reviews_expired")]
    emit_table(["section", "what", "count"], rows)
    for title, counts in (("new beliefs by predicate", learned["by_predicate"]),
                          ("superseded by predicate", changed["superseded_by_predicate"]),
                          ("expired by predicate", dropped["expired_by_predicate"])):
        if counts:
            click.echo(f"\n{title}: " + ", ".join(f"{p} {n}" for p, n in sorted(counts.items())))
    if learned["entity_ids"]:
        click.echo("\nnew entities: " + ", ".join(
            f"{names[e]} ({e})" if e in names else e for e in learned["entity_ids"]))
