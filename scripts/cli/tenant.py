"""``mnemo tenant``: create and list tenants."""

from __future__ import annotations

import click

from memory_core.db import migrate_stores, open_state
from memory_core.model.tenants import create_tenant, list_tenants
from scripts.cli.app import Ctx, emit_json, handle_errors, json_option
from scripts.cli.data_dir import require_data_dir


@click.group()
def tenant() -> None:
    """Tenants: every memory belongs to exactly one; nothing crosses them.

    Example:

        mnemo tenant add acme
    """


@tenant.command("add")
@click.argument("name")
@json_option
@click.pass_obj
@handle_errors
def add(obj: Ctx, name: str, as_json: bool) -> None:
    """Create tenant NAME (idempotent).

    Example:

        mnemo tenant add acme
    """
    migrate_stores(obj.settings)  # set-up: afterwards a chat process can open memory
    db = open_state(obj.settings, migrate=False)
    created = create_tenant(db.conn, name)
    db.close()
    if as_json:
        emit_json({"tenant": name, "created": created})
    else:
        click.echo(f"tenant {name} {'created' if created else 'already exists'}")


@tenant.command("list")
@json_option
@click.pass_obj
@handle_errors
def list_(obj: Ctx, as_json: bool) -> None:
    """List the tenants.

    Example:

        mnemo tenant list --json
    """
    require_data_dir(obj.settings)
    db = open_state(obj.settings)
    names = list_tenants(db.conn)
    db.close()
    if as_json:
        emit_json(names)
    else:
        for name in names:
            click.echo(name)
