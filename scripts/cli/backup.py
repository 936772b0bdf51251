"""``mnemo backup now|list``, ``mnemo restore`` and ``mnemo restore-drill``.

The same code the scheduled ``backup`` and ``restore_drill`` jobs run; a run from here is
a manual window (``manual:<uuid>``), so it always makes a new backup or drill.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from memory_core.clock import utcnow
from memory_core.db import open_ops, open_state
from memory_core.embedders.factory import make_embedder
from memory_core.errors import MnemoError
from memory_core.log import configure_logging
from memory_core.maintenance.backup import backup as run_backup
from memory_core.maintenance.backup_files import DB_FILES, find_backup, list_backups
from memory_core.maintenance.base import JobEnv
from memory_core.maintenance.drill import last_drill, recorded_drill
from memory_core.maintenance.drill import restore_drill as run_drill
from memory_core.maintenance.restore import restore as run_restore
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from scripts.cli import exit_codes
from scripts.cli.app import CONTEXT_SETTINGS, Ctx, emit_json, emit_table, handle_errors, json_option
from scripts.cli.dates import show_time
from scripts.cli.progress import progress_for, quiet_option

DRILL_FAILED_EXIT = exit_codes.DRILL_FAILED


@contextlib.contextmanager
def _job_env(settings: Settings) -> Iterator[JobEnv]:
    state, ops = open_state(settings), open_ops(settings)
    try:
        yield JobEnv(settings, state, ops, VectorIndex(make_embedder(settings)), utcnow(),
                     f"manual:{uuid.uuid4()}")
    finally:
        state.close()
        ops.close()


@click.group()
def backup() -> None:
    """Online backups of both databases, with per-tenant exports and a manifest.

    Backups go to MNEMO_BACKUP_DIR (default: backups in MNEMO_DATA_DIR); the newest
    MNEMO_BACKUP_KEEP are kept. The scheduler takes one every 6 hours.

    Example:

        mnemo backup now
    """


@backup.command()
@json_option
@quiet_option
@click.pass_obj
@handle_errors
def now(obj: Ctx, as_json: bool, quiet: bool) -> None:
    """Take a backup now: both databases (SQLite backup API, online), exports per tenant,
    a Postgres dump when a mirror is configured, then retention.

    Chat and workers keep running while it copies. The folder only gets its final name
    once complete. Progress (bytes copied, exports, checksums) goes to stderr; --quiet or
    --json silence it.

    Example:

        mnemo backup now --json
    """
    units = {phase: "B" for phase in (*DB_FILES.values(), "checksums")}
    with _job_env(obj.settings) as env, \
            progress_for("backup", as_json=as_json, quiet=quiet, units=units) as bar:
        report = run_backup(env, bar)
    path = obj.settings.backups_path / str(report.counts["backup"])
    if as_json:
        emit_json({"path": str(path), **report.counts})
        return
    click.echo(f"backup   {path}")
    emit_table(["what", "value"], [[k, v] for k, v in report.counts.items()
                                   if k not in ("backup", "existing")])


@backup.command(name="list")
@json_option
@click.pass_obj
@handle_errors
def list_(obj: Ctx, as_json: bool) -> None:
    """List the complete backups, oldest first, with the last restore drill of each.

    Example:

        mnemo backup list
    """
    backups = list_backups(obj.settings.backups_path)
    ops = open_ops(obj.settings)
    try:
        rows: list[dict[str, Any]] = [
            {"name": b.name, "path": str(b.path), "created_at": b.created_at,
             "window": b.window, "bytes": b.size_bytes,
             "tenants": len(b.manifest.get("exports", {})),
             "drill": last_drill(ops.conn, b.name)} for b in backups]
    finally:
        ops.close()
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo(f"no backups in {obj.settings.backups_path}: run `mnemo backup now`")
        return
    emit_table(["name", "created", "window", "size", "tenants", "last drill"],
               [[r["name"], show_time(r["created_at"]), r["window"], _size(r["bytes"]),
                 r["tenants"], _drill_text(r["drill"])] for r in rows])


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def _drill_text(drill: dict[str, Any] | None) -> str:
    if drill is None:
        return "-"
    return f"{'passed' if drill['ok'] else 'FAILED'} {drill['at']}"


@click.command()
@click.argument("backup_ref", metavar="BACKUP")
@click.option("--to", "target", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder to restore memory_state.db and memory_ops.db into.")
@click.option("--yes", is_flag=True, help="Overwrite the databases in a folder that is not empty.")
@click.option("--dry-run", is_flag=True, help="Verify the backup and show what would be "
              "written; write nothing.")
@json_option
@quiet_option
@click.pass_obj
@handle_errors
def restore(obj: Ctx, backup_ref: str, target: Path, yes: bool, dry_run: bool,
            as_json: bool, quiet: bool) -> None:
    """Restore BACKUP (a name from `mnemo backup list`, `latest`, or a backup folder's
    path) into the folder --to.

    The checksums are verified against the manifest first. A folder that is not empty is
    refused without --yes. A backup of the Postgres primary (MNEMO_STATE_BACKEND=postgres)
    restores its dump into MNEMO_POSTGRES_URL, whose schema mnemo_primary must be empty
    (a fresh database), and memory_ops.db into --to. Stop every mnemo process using that
    folder first; to bring a restore live, point MNEMO_DATA_DIR at it (or restore into the
    data folder). Progress (bytes verified, then copied) goes to stderr; --quiet or --json
    silence it.

    Example:

        mnemo restore latest --to /var/lib/mnemo-restored --dry-run
    """
    info = find_backup(obj.settings.backups_path, backup_ref)
    with _primary(obj.settings) as primary, progress_for(
            "restore", as_json=as_json, quiet=quiet, units={"verify": "B", "copy": "B"}) as bar:
        result = run_restore(info, target, overwrite=yes, dry_run=dry_run, on_progress=bar,
                             primary=primary)
    if as_json:
        emit_json(result.as_dict())
        return
    verb = "would restore" if dry_run else "restored"
    click.echo(f"{verb} backup {result.backup} into {result.target} (checksums verified)")
    if dry_run and not result.target_was_empty and not yes:
        click.echo("the folder is not empty: the restore would be refused without --yes")
    emit_table(["file", "size", "replaces an existing file"],
               [[f["name"], _size(f["bytes"]), "yes" if f["replaces"] else "no"]
                for f in result.files])


@contextlib.contextmanager
def _primary(settings: Settings) -> Iterator[Any]:
    """The Postgres primary a backup's primary dump is restored into (None on SQLite)."""
    if settings.state_backend != "postgres":
        yield None
        return
    from memory_core.db.primary import open_primary

    db = open_primary(settings)
    try:
        yield db
    finally:
        db.close()


@click.command(name="restore-drill")
@json_option
@click.pass_obj
@handle_errors
def restore_drill(obj: Ctx, as_json: bool) -> None:
    """Restore the latest backup into a scratch folder and check it: sha256, PRAGMA
    integrity_check, schema versions and row counts against the manifest.

    The result is recorded (see `mnemo backup list`). Exit code 3 when the drill fails.

    Example:

        mnemo restore-drill --json
    """
    with _job_env(obj.settings) as env:
        report = run_drill(env)
        detail = recorded_drill(env.ops.conn, env.window)
    if as_json:
        emit_json({**report.counts, "failures": (detail or {}).get("failures", [])})
    else:
        outcome = "passed" if report.counts["ok"] else "FAILED"
        click.echo(f"restore drill {outcome}: backup {report.counts['backup']}")
        for failure in (detail or {}).get("failures", []):
            click.echo(f"  - {failure}")
    if not report.counts["ok"]:
        sys.exit(DRILL_FAILED_EXIT)


def standalone(command: click.Command, prog_name: str) -> None:
    """Run one command as its own program (the cron scripts in scripts/)."""
    try:
        settings = Settings.from_env()
    except MnemoError as e:
        raise SystemExit(f"Error: {e}") from e
    configure_logging(settings)
    extra: dict[str, Any] = dict(CONTEXT_SETTINGS)
    command.main(prog_name=prog_name, obj=Ctx(settings), **extra)
