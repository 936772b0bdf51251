"""``mnemo memory sweep``: the retention sweep on demand (attached to the memory group)."""

from __future__ import annotations

from typing import Any

import click

from memory_core.clock import utcnow
from memory_core.db import open_state
from memory_core.embedders.factory import make_embedder
from memory_core.maintenance.common import tenants as all_tenants
from memory_core.maintenance.sweep import Expired, sweep
from memory_core.model.tenants import require_tenant
from memory_core.vectors import VectorIndex
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option
from scripts.cli.dates import show_time


@click.command("sweep")
@click.option("--tenant", "-t", default=None, help="Only this tenant (default: every tenant).")
@click.option("--dry-run", is_flag=True,
              help="List what would be removed (kinds, ids, dates); remove nothing.")
@click.option("--yes", is_flag=True, help="Confirm the removal.")
@json_option
@click.pass_obj
@handle_errors
def sweep_cmd(obj: Ctx, tenant: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Remove the memories past their retention date. Needs --yes or --dry-run.

    Beliefs and episodes whose expires_at has passed are no longer recalled; the sweep
    removes them through the verified delete path (primary, keyword and vector rows go, a
    digest-only tombstone stays; a delete that cannot be confirmed removes nothing). The
    daily session_purge job runs the same sweep. Output holds kinds, ids and dates, never
    memory text.

    Example:

        mnemo memory sweep --dry-run --tenant acme
    """
    if not yes and not dry_run:
        raise click.ClickException("sweep deletes memories: pass --yes to confirm, or "
                                   "--dry-run to list them first")
    settings = obj.settings
    state = open_state(settings)
    items: list[Expired] = []
    deleted: dict[str, int] = {}
    try:
        names = [require_tenant(state.conn, tenant)] if tenant else list(
            all_tenants(state.conn))
        index = VectorIndex(make_embedder(settings))
        now = utcnow()
        for name in names:
            report = sweep(state.conn, index, name, now, dry_run=dry_run, on_page=items.extend)
            for table, n in report.deleted.items():
                deleted[table] = deleted.get(table, 0) + n
    finally:
        state.close()
    _show(items, deleted, dry_run, as_json)


def _show(items: list[Expired], deleted: dict[str, int], dry_run: bool, as_json: bool) -> None:
    kinds: dict[str, int] = {}
    for item in items:
        kinds[item.kind] = kinds.get(item.kind, 0) + 1
    if as_json:
        out: dict[str, Any] = {"dry_run": dry_run, "items": [i.to_dict() for i in items],
                               "found": kinds, "deleted": {} if dry_run else deleted}
        emit_json(out)
        return
    if items:
        emit_table(["tenant", "kind", "id", "uid", "expires_at"],
                   [[i.tenant, i.kind, i.id, i.uid, show_time(i.expires_at)] for i in items])
        click.echo("")
    summary = ", ".join(f"{n} {k}(s)" for k, n in sorted(kinds.items())) or "nothing"
    if dry_run:
        click.echo(f"would remove {summary}")
    else:
        extra = deleted.get("entities", 0)
        click.echo(f"removed {summary}" + (f" and {extra} entity(ies) left without beliefs"
                                           if extra else ""))
