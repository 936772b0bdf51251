"""``mnemo mirror promote``: switch the memory from its SQLite file to the Postgres primary
(``memory_core/mirrors/promote.py``). Importing this module adds the command to the mirror
group (with ``sync`` and ``reconcile``)."""

from __future__ import annotations

import click

from memory_core.mirrors.promote import promote as run_promote
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option
from scripts.cli.mirror_sync import mirror
from scripts.cli.progress import quiet_option

__all__ = ["mirror"]


@mirror.command()
@click.option("--dry-run", is_flag=True, help="Check and count only; copy and switch nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@quiet_option
@click.pass_obj
@handle_errors
def promote(obj: Ctx, dry_run: bool, yes: bool, as_json: bool, quiet: bool) -> None:
    """Switch this memory from memory_state.db to the Postgres primary at MNEMO_POSTGRES_URL.

    Stop the workers and chat processes first and run it with MNEMO_STATE_BACKEND=sqlite.
    Refuses while `mnemo mirror reconcile --dry-run` finds drift, during a vector reindex,
    or when the primary already holds another memory. Copies every state table, the
    embedder record and the vectors in one transaction, checks every count (and the
    full-text statistics) against the file, then records the switch on both sides: a
    process started on the file with MNEMO_STATE_BACKEND=sqlite is refused from then on.
    Restart everything with MNEMO_STATE_BACKEND=postgres. Exit 0 promoted (or, with
    --dry-run, promotable), 1 refused or failed (nothing switched).

    Example:

        mnemo mirror promote --dry-run && mnemo mirror promote --yes
    """
    if not dry_run and not yes and not click.confirm(
            "Switch this memory to the Postgres primary (stop its processes first)?"):
        raise click.ClickException("not promoted (answer yes, or pass --yes)")
    report = run_promote(obj.settings, dry_run=dry_run,
                         progress=None if as_json or quiet else _say)
    if as_json:
        emit_json(report.as_dict())
        return
    emit_table(["table", "rows"], sorted(report.rows.items()))
    what = "would be promoted (dry run)" if dry_run else "promoted"
    click.echo(f"{what} to {report.target}; mirrors reconciled clean: "
               f"{', '.join(report.mirrors_checked) or 'none configured'}")
    if report.promoted:
        click.echo("now set MNEMO_STATE_BACKEND=postgres for every process of this memory")


def _say(step: str) -> None:
    """A step of the promotion, on stderr (silent with --json or --quiet)."""
    click.echo(step, err=True)
