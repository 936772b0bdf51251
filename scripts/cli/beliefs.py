"""``mnemo beliefs`` and ``mnemo entities``: what memory knows about a tenant (read-only),
``mnemo beliefs invalidate`` to mark a wrong belief never true, and ``mnemo beliefs
reextract`` to draw a tenant's beliefs again with the current extractor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

import click

from memory_core.clock import to_db, utcnow
from memory_core.db import open_state
from memory_core.db.sqlite import Connection
from memory_core.embedders.factory import make_embedder
from memory_core.model.beliefs import invalidate_belief
from memory_core.model.tenants import list_tenants, require_tenant
from memory_core.recall.inspect import split_item_id
from memory_core.recall.knowledge import (
    MAX_ROWS,
    BeliefView,
    belief_history,
    list_beliefs,
    list_entities,
)
from memory_core.vectors import VectorIndex
from memory_core.vocabulary import INVALIDATED
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option
from scripts.cli.data_dir import require_data_dir
from scripts.cli.dates import date_option, show_day, stored
from scripts.cli.progress import progress_for, quiet_option

if TYPE_CHECKING:  # the module loads the extractor: imported where the command runs
    from memory_core.write.reextract import Change, ReextractReport

tenant_option = click.option("--tenant", "-t", default=None,
                             help="Tenant (default: MNEMO_TENANT).")


@contextmanager
def _reading(obj: Ctx, tenant: str | None) -> Iterator[tuple[Connection, str]]:
    """A read-only connection to the state database and the tenant, which must exist."""
    tenant = tenant or obj.settings.default_tenant
    require_data_dir(obj.settings)
    db = open_state(obj.settings, migrate=False, readonly=True)
    try:
        require_tenant(db.conn, tenant)  # the error names `mnemo tenant list`
        yield db.conn, tenant
    finally:
        db.close()


def _rows(beliefs: list[BeliefView]) -> list[list[object]]:
    return [[b.subject, b.predicate, ("not " if b.negated else "") + b.object,
             show_day(b.valid_from), show_day(b.valid_to) or "-", b.status,
             f"{b.confidence:.2f}", b.source, b.turn_uid or "-", f"belief:{b.belief_uid}"]
            for b in beliefs]


# The id is what `mnemo memory explain` and `mnemo beliefs invalidate` take.
_HEADERS = ["subject", "predicate", "object", "valid from", "valid to", "status", "conf",
            "source", "turn", "id"]


@click.group()
def beliefs() -> None:
    """What memory believes about a tenant: subject, predicate, object, when, from which turn.

    Example:

        mnemo beliefs list --tenant acme --subject Ana
    """


@beliefs.command("list")
@tenant_option
@click.option("--subject", "-s", default=None,
              help="Only this subject: an entity's name or alias, any case.")
@click.option("--predicate", "-p", default=None, help="Only this predicate (e.g. lives_in).")
@date_option("--as-of", help="The beliefs valid at this world time instead of now")
@click.option("--include-superseded", is_flag=True,
              help="Every status too: superseded, invalidated, expired, pending review "
              "(with --as-of: those whose validity covers it).")
@json_option
@click.pass_obj
@handle_errors
def list_(obj: Ctx, tenant: str | None, subject: str | None, predicate: str | None,
          as_of: datetime | None, include_superseded: bool, as_json: bool) -> None:
    """The beliefs memory holds for a tenant: by default the currently valid ones.

    Current means what recall treats as true now: active (or in conflict with a more
    trusted belief), valid now, not expired. With --as-of, the ones valid at that world
    time as memory knows it now (superseded values included for the time they held).
    Dates are shown as YYYY-MM-DD (UTC); --json gives full times. Read-only.

    Example:

        mnemo beliefs list --tenant acme --predicate lives_in --as-of 2024-03-01
    """
    with _reading(obj, tenant) as (conn, name):
        found = list_beliefs(conn, name, now=to_db(utcnow()), subject=subject,
                             predicate=predicate, as_of=stored(as_of),
                             include_history=include_superseded)
    if len(found) >= MAX_ROWS:
        click.echo(f"mnemo: the first {MAX_ROWS} beliefs only: narrow the list with --subject "
                   "or --predicate", err=True)
    if as_json:
        emit_json([b.to_dict() for b in found])
    elif found:
        emit_table(_HEADERS, _rows(found))
    else:
        click.echo("no beliefs" + (" valid then" if as_of else ""))


@beliefs.command("invalidate")
@click.argument("belief")
@tenant_option
@click.option("--yes", is_flag=True, help="Confirm: the belief is marked never true.")
@json_option
@click.pass_obj
@handle_errors
def invalidate(obj: Ctx, belief: str, tenant: str | None, yes: bool, as_json: bool) -> None:
    """Mark BELIEF never true: a wrong memory is no longer recalled or listed as current.

    BELIEF is an id shown by `mnemo beliefs list` or `mnemo recall --explain`
    (belief:b_..., or the uid alone). The belief keeps its place in the history (status
    invalidated, `--include-superseded` lists it); a value it had replaced is current again;
    a wrong name of the user is no longer the user's name. The mirrors get the change.
    Running it again changes nothing. Needs --yes.

    Example:

        mnemo beliefs invalidate belief:b_3f2a... --tenant acme --yes
    """
    kind, uid = split_item_id(belief)
    if kind not in (None, "belief"):
        raise click.ClickException(f"{belief!r} is {kind} memory, not a belief: only beliefs "
                                   "are invalidated (see `mnemo beliefs list`)")
    if not yes:
        raise click.ClickException("invalidate marks a belief never true: pass --yes to "
                                   f"confirm (see it first: `mnemo memory explain belief:{uid}`)")
    tenant = tenant or obj.settings.default_tenant
    require_data_dir(obj.settings)
    state = open_state(obj.settings, migrate=False)
    try:
        index = VectorIndex(make_embedder(obj.settings))
        index.claim(state.conn, f"the data in {state.path}")  # texts it re-renders are embedded
        outcome = invalidate_belief(state.conn, index, tenant, uid)
    finally:
        state.close()
    result = {"belief": f"belief:{outcome.belief_uid}", "previous_status": outcome.previous_status,
              "status": INVALIDATED, "current_again": [f"belief:{u}" for u in outcome.reopened]}
    if as_json:
        emit_json(result)
    elif outcome.previous_status == INVALIDATED:
        click.echo(f"{result['belief']} was already invalidated; nothing changed")
    else:
        click.echo(f"{result['belief']} invalidated (was {outcome.previous_status})")
        for again in result["current_again"]:
            click.echo(f"current again: {again}")


SHOWN_CHANGES = 50  # rows of the change table (--json lists every change)


@beliefs.command("reextract")
@tenant_option
@click.option("--all-tenants", is_flag=True, help="Every tenant, one after the other.")
@click.option("--dry-run", is_flag=True, help="Only show what would change; write nothing.")
@click.option("--yes", is_flag=True, help="Confirm: beliefs are added and invalidated.")
@json_option
@quiet_option
@click.pass_obj
@handle_errors
def reextract_cmd(obj: Ctx, tenant: str | None, all_tenants: bool, dry_run: bool, yes: bool,
                  as_json: bool, quiet: bool) -> None:
    """Draw a tenant's beliefs again from its recorded turns, with the current extractor.

    Beliefs are drawn once, when a turn is recorded: after an upgrade whose extractor reads
    turns better, a store keeps what the older rules drew. This re-reads every turn whose
    extraction ran: an extracted belief the extractor no longer draws from its turn is
    invalidated (history keeps it; a value it had replaced is current again), and a belief
    it draws now that is not stored is added, by the same rules as the workers' step.
    Beliefs stated by the user or an operator, imported ones and invalidated ones are left
    alone; so are turns the workers have not extracted yet. The mirrors get the changes.
    Idempotent and resumable: run it again and it changes nothing, or finishes a run that
    was stopped. Needs --yes, or --dry-run to see the changes first. Progress on stderr.

    Example:

        mnemo beliefs reextract --tenant acme --dry-run
    """
    from memory_core.write.reextract import reextract  # loads the extractor

    if not (dry_run or yes):
        raise click.ClickException("reextract adds and invalidates beliefs: pass --yes to "
                                   "confirm, or --dry-run to see the changes first")
    if all_tenants and tenant is not None:
        raise click.ClickException("--tenant and --all-tenants name different sets: pass one")
    require_data_dir(obj.settings)
    state = open_state(obj.settings, migrate=False, readonly=dry_run)
    reports: list[ReextractReport] = []
    try:
        names = list_tenants(state.conn) if all_tenants \
            else [tenant or obj.settings.default_tenant]
        index = VectorIndex(make_embedder(obj.settings))
        if not dry_run:
            index.claim(state.conn, f"the data in {state.path}")  # new beliefs are embedded
        with progress_for("reextract", as_json=as_json, quiet=quiet) as bar:
            for name in names:
                reports.append(reextract(state, index, name, dry_run=dry_run,
                                         on_progress=bar))
    finally:
        state.close()
    if as_json:
        found = [_report_json(r) for r in reports]
        emit_json({"tenants": found} if all_tenants else found[0])
        return
    for report in reports:
        _show_report(report, tenant_column=all_tenants)


def _changes(report: ReextractReport) -> list[tuple[str, Change]]:
    return [("add", c) for c in report.added] + [("invalidate", c) for c in report.invalidated]


def _report_json(report: ReextractReport) -> dict[str, object]:
    return {**report.summary(), "changes": [{"change": kind, **c.to_dict()}
                                            for kind, c in _changes(report)]}


def _show_report(report: ReextractReport, *, tenant_column: bool) -> None:
    changes = _changes(report)
    verb = ("would add", "would invalidate") if report.dry_run else ("added", "invalidated")
    click.echo((f"{report.tenant}: " if tenant_column else "")
               + f"{report.turns} turns read ({report.not_extracted} not extracted yet: the "
               f"workers draw them); {verb[0]} {len(report.added)}, {verb[1]} "
               f"{len(report.invalidated)}, refused {report.rejected}"
               + ("" if report.dry_run else f"; current again {report.current_again}"))
    if changes:
        emit_table(["change", "turn", "subject", "predicate", "object", "id"],
                   [[kind, c.turn_uid, c.subject, c.predicate,
                     ("not " if c.negated else "") + c.object_text,
                     f"belief:{c.belief_uid}" if c.belief_uid else "-"]
                    for kind, c in changes[:SHOWN_CHANGES]])
    if len(changes) > SHOWN_CHANGES:
        click.echo(f"... and {len(changes) - SHOWN_CHANGES} more (--json lists them all)")


@beliefs.command("history")
@tenant_option
@click.argument("subject")
@click.argument("predicate")
@json_option
@click.pass_obj
@handle_errors
def history(obj: Ctx, tenant: str | None, subject: str, predicate: str, as_json: bool) -> None:
    """The values SUBJECT has had for PREDICATE, oldest first, with validity and turns.

    Every status is listed: the value that held until it was superseded, a value that was
    invalidated, one kept as a conflict. SUBJECT is an entity's name or alias, any case
    ("I" or "user" for the person memory is about).

    Example:

        mnemo beliefs history --tenant acme Ana lives_in
    """
    with _reading(obj, tenant) as (conn, name):
        chain = belief_history(conn, name, subject, predicate)
    if as_json:
        emit_json([b.to_dict() for b in chain])
    elif chain:
        emit_table(_HEADERS, _rows(chain))
    else:
        click.echo(f"no {predicate} beliefs about {subject}")


@click.group()
def entities() -> None:
    """The entities memory knows for a tenant: people, places, things, with aliases.

    Example:

        mnemo entities list --tenant acme
    """


@entities.command("list")
@tenant_option
@json_option
@click.pass_obj
@handle_errors
def entities_list(obj: Ctx, tenant: str | None, as_json: bool) -> None:
    """The entities of a tenant with kind, aliases and belief counts, by name.

    "beliefs" counts the beliefs recall can show that touch the entity (as subject or
    object); "history" counts every belief about it, superseded ones included. Read-only.

    Example:

        mnemo entities list --tenant acme --json
    """
    with _reading(obj, tenant) as (conn, name):
        found = list_entities(conn, name)
    if as_json:
        emit_json([e.to_dict() for e in found])
        return
    emit_table(["name", "kind", "aliases", "beliefs", "history", "id"],
               [[e.name, e.kind, ", ".join(e.aliases) or "-", e.beliefs,
                 e.beliefs_as_subject, e.entity_id] for e in found])
