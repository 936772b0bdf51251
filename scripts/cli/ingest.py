"""``mnemo ingest``: enqueue a JSON Lines file of turns, as ``after_turn`` would."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import click

from memory_core.chat.post_turn import BadLine, TurnSender, check_turn_lines, checked_message
from memory_core.db import open_state
from memory_core.errors import UnknownTenantError
from memory_core.model.tenants import create_tenant, require_tenant
from memory_core.model.turns import CheckedTurn, is_recorded
from memory_core.progress import OnProgress, no_progress
from scripts.cli.app import Ctx, emit_json, handle_errors, json_option
from scripts.cli.exit_codes import BAD_INPUT
from scripts.cli.progress import progress_for, quiet_option

SHOWN_BAD_LINES = 50  # bad lines listed; the rest are counted


class BadInput(click.ClickException):
    """The file has bad lines (listed before this error); exit code 5."""

    exit_code = BAD_INPUT


def _refuse_bad_lines(file: Path, bad: list[BadLine], total: int, check: bool,
                      as_json: bool) -> None:
    """List the bad lines (up to SHOWN_BAD_LINES, then how many more) and end with exit 5:
    on stderr, or as one JSON object on stdout with --json."""
    shown, more = bad[:SHOWN_BAD_LINES], len(bad) - SHOWN_BAD_LINES
    if as_json:
        emit_json({"ok": False, "lines": total, "bad_count": len(bad), "enqueued": 0,
                   "bad_lines": [{"line": b.number, "reason": b.reason} for b in shown]})
    else:
        for b in shown:
            click.echo(str(b), err=True)
        if more > 0:
            click.echo(f"... and {more} more bad line(s)", err=True)
    fix = "fix them and run `mnemo ingest` again" if not check else "fix them first"
    raise BadInput(f"{len(bad)} bad line(s) in {file} (listed above): {fix}; nothing "
                   "was enqueued")


def _read(file: Path, default_tenant: str, max_turn_chars: int, check: bool,
          as_json: bool, on_progress: OnProgress = no_progress) -> list[CheckedTurn]:
    """Every line of ``file`` checked; the turns, or BadInput after listing the bad lines."""
    lines = file.read_bytes().splitlines()
    turns, bad = check_turn_lines(_counted(lines, len(lines), on_progress),
                                  default_tenant=default_tenant,
                                  max_turn_chars=max_turn_chars)
    if bad:
        _refuse_bad_lines(file, bad, len(lines), check, as_json)
    return turns


def _counted(lines: Iterable[bytes], total: int, on_progress: OnProgress) -> Iterator[bytes]:
    """``lines``, reporting each one read as phase ``read``."""
    for done, line in enumerate(lines, start=1):
        yield line
        on_progress("read", done, total)


def _tenants_ready(obj: Ctx, tenants: list[str], create: bool, turns: list[CheckedTurn],
                   on_progress: OnProgress = no_progress) -> tuple[list[str], list[bool]]:
    """Create (with --create-tenant) or require every tenant; the ones created, and for
    each turn whether it is recorded already (a reused turn_uid with other content is
    refused here, before anything is sent)."""
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
                raise UnknownTenantError(f"{e}, or pass --create-tenant",
                                         tenant=e.tenant) from None
        recorded = []
        for t in turns:
            recorded.append(is_recorded(state.conn, t))
            on_progress("check", len(recorded), len(turns))
    finally:
        state.close()
    return created, recorded


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tenant", metavar="TENANT",
              help="Tenant of lines that name none (default: MNEMO_TENANT).")
@click.option("--create-tenant", is_flag=True,
              help="Create the file's tenants first when they do not exist.")
@click.option("--check", is_flag=True,
              help="Only check every line of the file and list the bad ones; enqueue nothing.")
@click.option("--wait", is_flag=True, help="Then wait until the workers recorded every turn "
              "(progress on stderr; exit 1 if some ended in the dead letters).")
@json_option
@quiet_option
@click.pass_obj
@handle_errors
def ingest(obj: Ctx, file: Path, tenant: str | None, create_tenant: bool, check: bool,
           wait: bool, as_json: bool, quiet: bool) -> None:
    """Enqueue a file of turns for the workers, one JSON object per line.

    Each line has session_id, turn_uid, speaker, text, occurred_at (ISO-8601 with a zone)
    and optionally index and tenant. Every line is checked first: when any is bad, each
    bad line is listed with its number and reason (the first 50, then how many more),
    nothing is enqueued and the exit code is 5. --check does only that check (it reads the
    file, not memory: tenants and recorded turns are checked when ingesting). Run `mnemo up`
    (or `mnemo worker`) to process the turns. Ingesting the same file twice records and
    queues nothing twice: lines already recorded or already queued are skipped and counted.
    A turn_uid already recorded with different content is refused (nothing is enqueued).
    Progress (reading, checking, enqueuing) goes to stderr on a long file; --quiet or
    --json silence it. With --wait it then follows the turns until the workers recorded
    them all (Ctrl-C stops waiting; the turns stay queued).

    Example:

        mnemo ingest chats.jsonl --tenant acme --create-tenant
    """
    bar = progress_for("ingest", as_json=as_json, quiet=quiet)
    turns = _read(file, tenant or obj.settings.default_tenant, obj.settings.max_turn_chars,
                  check, as_json, bar)
    if check:
        _report_check(file, turns, as_json)
        return
    tenants = sorted({t.tenant for t in turns})
    created, recorded = _tenants_ready(obj, tenants, create_tenant, turns, bar)
    fresh = [t for t, done in zip(turns, recorded, strict=True) if not done]
    sender = TurnSender(obj.settings)
    enqueued = 0
    try:
        with bar:
            for number, t in enumerate(fresh, start=1):
                enqueued += sender.offer(checked_message(t))
                bar("enqueue", number, len(fresh))
    finally:
        sender.close()
    counts = {"enqueued": enqueued, "already_recorded": len(turns) - len(fresh),
              "already_queued": len(fresh) - enqueued}
    lost = []
    if wait:
        from scripts.cli.ingest_wait import wait_recorded

        with bar:
            lost = wait_recorded(obj.settings, fresh, bar)
        counts.update(recorded=len(fresh) - len(lost), not_recorded=len(lost))
    if as_json:
        emit_json({**counts, "tenants": tenants, "created_tenants": created})
    else:
        click.echo(f"enqueued {enqueued} turn(s) for tenant(s) {', '.join(tenants) or '-'}"
                   + (f"; created {', '.join(created)}" if created else "")
                   + f"; skipped {counts['already_recorded']} already recorded, "
                   f"{counts['already_queued']} already queued")
        if wait:
            click.echo(f"recorded {counts['recorded']} of {len(fresh)} turn(s)")
    if lost:
        raise click.ClickException(
            f"{len(lost)} turn(s) were not recorded and the turns queue is empty (first: "
            f"turn_uid {lost[0].turn_uid!r}): see `mnemo queue dead --queue turns`")


def _report_check(file: Path, turns: list[CheckedTurn], as_json: bool) -> None:
    tenants = sorted({t.tenant for t in turns})
    if as_json:
        emit_json({"ok": True, "turns": len(turns), "tenants": tenants, "bad_count": 0,
                   "bad_lines": [], "enqueued": 0})
    else:
        click.echo(f"{file}: {len(turns)} turn(s) for tenant(s) "
                   f"{', '.join(tenants) or '-'}, every line valid; nothing enqueued (--check)")
