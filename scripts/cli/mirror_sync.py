"""``mnemo mirror sync`` and ``mnemo mirror reconcile`` (on the mirror group).

``sync`` backfills a mirror from the state db (``memory_core.mirrors.backfill``);
``reconcile`` compares each mirror with the state db and repairs the drift
(``memory_core.mirrors.reconcile``; also ``scripts/reconcile_memory_mirror.py``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from memory_core.db import open_ops, open_state
from memory_core.db.sqlite import sqlite_module
from memory_core.errors import ConfigurationError, MnemoError
from memory_core.mirrors.backfill import sync as backfill
from memory_core.mirrors.outbox import configured_mirrors, make_sink
from memory_core.mirrors.readers import reader_for
from memory_core.mirrors.reconcile import DriftReport, reconcile, record_drift
from memory_core.mirrors.sink import MirrorSink
from memory_core.settings import Settings
from scripts.cli import exit_codes
from scripts.cli.app import Ctx, click_error, emit_json, emit_table, handle_errors, json_option
from scripts.cli.mirror import mirror
from scripts.cli.progress import Progress, progress_for, quiet_option

SINK_NAMES = ("postgres", "neo4j")
_URL_VAR = {"postgres": "MNEMO_POSTGRES_URL", "neo4j": "MNEMO_NEO4J_URL"}


def open_sink(settings: Settings, name: str) -> MirrorSink:
    """The configured sink ``name`` (not connected yet); ConfigurationError otherwise."""
    if name not in configured_mirrors(settings):
        raise ConfigurationError(f"the {name} mirror is not configured: set {_URL_VAR[name]} "
                                 "(docs/configuration.md)")
    return make_sink(settings, name)


@contextmanager
def _stores(settings: Settings) -> Iterator[tuple[Any, Any]]:
    state, ops = open_state(settings), open_ops(settings)
    try:
        yield state, ops
    finally:
        state.close()
        ops.close()


def _check_tenant(state: Any, tenant: str | None) -> None:
    """Refuse a ``--tenant`` the state db does not know (None: every tenant)."""
    if tenant is not None and state.conn.execute(
            "SELECT 1 FROM tenants WHERE tenant = ?", (tenant,)).fetchone() is None:
        raise ConfigurationError(f"unknown tenant {tenant!r}: see `mnemo tenant list`")


@mirror.command()
@click.option("--sink", "sink_name", type=click.Choice(SINK_NAMES), required=True,
              help="The mirror to fill.")
@click.option("--tenant", default=None, help="Only this tenant (the cursor does not move).")
@json_option
@quiet_option
@click.pass_obj
@handle_errors
def sync(obj: Ctx, sink_name: str, tenant: str | None, as_json: bool, quiet: bool) -> None:
    """Backfill a mirror with every existing entity and belief (dead ones are sent too, so
    the mirror drops them). Safe to run again, and while the workers ship. Progress
    (records shipped, rate, ETA) goes to stderr; --quiet or --json silence it. A sync of
    every tenant moves the mirror's cursor to the outbox head it started from.

    Example:

        mnemo mirror sync --sink neo4j --tenant acme
    """
    sink = open_sink(obj.settings, sink_name)
    try:
        with _stores(obj.settings) as (state, ops), \
                progress_for(f"sync {sink_name}", as_json=as_json, quiet=quiet) as bar:
            _check_tenant(state, tenant)
            report = backfill(state.conn, ops.conn, sink,
                              None if tenant is None else [tenant], bar)
    finally:
        sink.close()
    if as_json:
        emit_json(report.as_dict())
        return
    emit_table(["tenant", "entities", "beliefs"],
               [[t, c["entities"], c["beliefs"]] for t, c in report.per_tenant.items()])
    moved = f"; cursor at {report.cursor}" if report.cursor is not None else ""
    click.echo(f"synced {sink_name} in {report.duration_ms} ms{moved}")


class ReconcileError(click.ClickException):
    exit_code = exit_codes.RECONCILE_ERROR


def _reconcile_one(settings: Settings, name: str, tenant: str | None,
                   dry_run: bool, bar: Progress) -> DriftReport:
    sink = open_sink(settings, name)
    try:
        reader = reader_for(sink)
        if reader is None:
            raise ConfigurationError(f"the {name} mirror cannot be read back by this mnemo: "
                                     "reconcile another one with --sink")
        with _stores(settings) as (state, ops):
            _check_tenant(state, tenant)
            report = reconcile(state.conn, reader, None if tenant is None else [tenant],
                               dry_run=dry_run, on_progress=bar)
            if tenant is None:
                record_drift(ops.conn, report)
        return report
    finally:
        sink.close()


@mirror.command(name="reconcile")
@click.option("--dry-run", is_flag=True, help="Report the drift, change nothing.")
@click.option("--sink", "sink_name", type=click.Choice(SINK_NAMES), default=None,
              help="Only this mirror (default: every configured one).")
@click.option("--tenant", default=None, help="Only this tenant.")
@json_option
@quiet_option
@click.pass_obj
def reconcile_cmd(obj: Ctx, dry_run: bool, sink_name: str | None, tenant: str | None,
                  as_json: bool, quiet: bool) -> None:
    """Compare each mirror with the state db: dead facts still live in the mirror, missing
    facts, stale versions. Without --dry-run the drift is repaired (an idempotent apply of
    the current state) and checked again. Exit 0: clean, or all repaired; 1: drift found by
    --dry-run, or left after the repair; 2: an error (a mirror down, a bad option).
    Ids and counts only, never memory text. Progress (beliefs compared, rate, ETA) goes to
    stderr; --quiet or --json silence it.

    Example:

        mnemo mirror reconcile --dry-run --sink neo4j --json
    """
    try:
        names = [sink_name] if sink_name else list(configured_mirrors(obj.settings))
        if not names:
            raise ConfigurationError("no mirror is configured (set MNEMO_POSTGRES_URL or "
                                     "MNEMO_NEO4J_URL): there is nothing to reconcile")
        reports = []
        for n in names:
            with progress_for(f"reconcile {n}", as_json=as_json, quiet=quiet) as bar:
                reports.append(_reconcile_one(obj.settings, n, tenant, dry_run, bar))
    except (MnemoError, sqlite3.Error, sqlite_module().Error) as e:
        raise ReconcileError(click_error(e).message) from e
    if as_json:
        emit_json({"mirrors": [r.as_dict() for r in reports]})
    else:
        emit_table(["mirror", "tenant", "expected", "held", "dead", "missing", "stale"],
                   [[r.sink, t.tenant, *[t.counts()[k] for k in
                                         ("expected", "held", "dead", "missing", "stale")]]
                    for r in reports for t in r.tenants])
        for r in reports:
            done = (f"{r.drift} would be repaired" if dry_run else
                    f"{r.repaired} repaired, {r.left} left")
            click.echo(f"{r.sink}: {r.drift} drifted fact(s), {done}")
    drifted = any(r.left for r in reports)
    raise SystemExit(exit_codes.RECONCILE_DRIFT if drifted else exit_codes.RECONCILE_CLEAN)
