"""``mnemo db``: schema versions and migrations."""

from __future__ import annotations

from typing import Any

import click

from memory_core.db import stores as stores_mod
from memory_core.db.migrations import latest_version
from scripts.cli.app import Ctx, emit_json, emit_table, handle_errors, json_option


@click.group()
def db() -> None:
    """Schema versions and migrations of the two databases.

    Example:

        mnemo db migrate
    """


@db.command()
@json_option
@click.pass_obj
@handle_errors
def migrate(obj: Ctx, as_json: bool) -> None:
    """Create or upgrade memory_state.db and memory_ops.db to this version's schema.

    Idempotent: running it again applies nothing. A database newer than this mnemo is
    refused, untouched. The workers run the same at start; the chat process (Memory.open)
    never migrates: it refuses a database that is missing or behind until this has run.

    Example:

        MNEMO_DATA_DIR=/var/lib/mnemo mnemo db migrate
    """
    rows: list[dict[str, Any]] = [{"database": m.where, "version": m.version,
             "applied": [f"{a.version:04d} {a.name}" for a in m.applied]}
            for m in stores_mod.migrate_stores(obj.settings)]
    if as_json:
        emit_json(rows)
        return
    emit_table(["database", "version", "applied now"],
               [[r["database"], r["version"], "; ".join(r["applied"]) or "-"] for r in rows])


@db.command()
@json_option
@click.pass_obj
@handle_errors
def version(obj: Ctx, as_json: bool) -> None:
    """Show each database's schema version and the version this mnemo writes.

    Example:

        mnemo db version --json
    """
    rows = []
    kinds: tuple[str, ...] = ("state", "ops")
    if obj.settings.state_backend == "postgres":
        rows.append(_primary_version(obj))
        kinds = ("ops",)
    for kind in kinds:
        path = getattr(obj.settings, f"{kind}_db_path")
        if not path.exists():
            rows.append({"database": str(path), "version": None, "latest": latest_version(kind)})
            continue
        database = stores_mod.Database(path, kind, busy_timeout_ms=obj.settings.busy_timeout_ms)
        rows.append({"database": str(path), "version": database.version(),
                     "latest": latest_version(kind)})
        database.close()
    if as_json:
        emit_json(rows)
        return
    emit_table(["database", "version", "latest"],
               [[r["database"], r["version"] if r["version"] is not None else "missing",
                 r["latest"]] for r in rows])


def _primary_version(obj: Ctx) -> dict[str, Any]:
    """The Postgres primary's row of ``db version`` (read only, never migrated here)."""
    from memory_core.db import primary
    from memory_core.db.pg_store import LATEST, PgDatabase

    database = PgDatabase(primary.primary_url(obj.settings), obj.settings.postgres_password,
                          readonly=True)
    try:
        return {"database": database.where, "version": database.version(), "latest": LATEST}
    finally:
        database.close()
