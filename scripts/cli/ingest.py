"""``mnemo ingest``: enqueue a JSON Lines file of turns, as ``after_turn`` would."""

from __future__ import annotations

from pathlib import Path

import click

from memory_core.chat.post_turn import TurnSender, checked_message, parse_turn_lines
from memory_core.db import open_state
from memory_core.errors import InvalidInputError, UnknownTenantError
from memory_core.model.tenants import create_tenant, require_tenant
from scripts.cli.app import Ctx, emit_json, handle_errors, json_option


def _tenants_ready(obj: Ctx, tenants: list[str], create: bool) -> list[str]:
    """Create (with --create-tenant) or require every tenant; the ones created."""
    state = open_state(obj.settings)
    created = []
    try:
        for tenant in tenants:
            if create:
                if create_tenant(state.conn, tenant):
                    created.append(tenant)
                continue
            try:
                require_tenant(state.conn, tenant)
            except UnknownTenantError as e:
                raise UnknownTenantError(f"{e}, or pass --create-tenant") from None
    finally:
        state.close()
    return created


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tenant", metavar="TENANT",
              help="Tenant of lines that name none (default: MNEMO_TENANT).")
@click.option("--create-tenant", is_flag=True,
              help="Create the file's tenants first when they do not exist.")
@json_option
@click.pass_obj
@handle_errors
def ingest(obj: Ctx, file: Path, tenant: str | None, create_tenant: bool,
           as_json: bool) -> None:
    """Enqueue a file of turns for the workers, one JSON object per line.

    Each line has session_id, turn_uid, speaker, text, occurred_at (ISO-8601 with a zone)
    and optionally index and tenant. Every line is checked first: a bad line is reported
    with its number and nothing is enqueued. Run `mnemo up` (or `mnemo worker`) to process
    the turns; ingesting the same file twice records nothing twice.

    Example:

        mnemo ingest chats.jsonl --tenant acme --create-tenant
    """
    default_tenant = tenant or obj.settings.default_tenant
    try:
        with file.open(encoding="utf-8") as f:
            turns = parse_turn_lines(f, default_tenant=default_tenant,
                                     max_turn_chars=obj.settings.max_turn_chars)
    except UnicodeDecodeError as e:
        raise InvalidInputError(f"{file} is not UTF-8 text (byte {e.start}): save it as "
                                "UTF-8") from None
    tenants = sorted({t.tenant for t in turns})
    created = _tenants_ready(obj, tenants, create_tenant)
    messages = [checked_message(t) for t in turns]
    sender = TurnSender(obj.settings)
    try:
        for message in messages:
            sender.send(message)
    finally:
        sender.close()
    if as_json:
        emit_json({"enqueued": len(messages), "tenants": tenants, "created_tenants": created})
        return
    click.echo(f"enqueued {len(messages)} turn(s) for tenant(s) {', '.join(tenants) or '-'}"
               + (f"; created {', '.join(created)}" if created else ""))
