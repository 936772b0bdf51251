"""Which engine holds the memory, and the guard that keeps every process on the right one.

``MNEMO_STATE_BACKEND=postgres`` opens the Postgres primary (``pg_store.PgDatabase``,
schema ``mnemo_primary`` at ``MNEMO_POSTGRES_URL``). The ops database (queue, spool,
heartbeats, recall log, mirror cursors) stays a SQLite file per host in either case.

``mnemo mirror promote`` (``promote.py``) copies a SQLite memory into the primary and then
records the switch on both sides: ``promoted_to`` (the primary's canonical URL) in the SQLite
file's ``meta``, ``promoted_from`` in the primary's. A process started with
``MNEMO_STATE_BACKEND=sqlite`` on a promoted file is refused (``refuse_if_promoted``), naming
the setting to use — it would otherwise write to a copy nobody reads any more.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_core.db.meta import get_meta
from memory_core.errors import ConfigurationError, StoreError
from memory_core.settings import Settings

if TYPE_CHECKING:
    from memory_core.db.pg_store import PgDatabase
    from memory_core.db.stores import Migrated

PROMOTED_TO = "promoted_to"
PROMOTED_FROM = "promoted_from"


def primary_url(settings: Settings) -> Any:
    """The primary's parsed URL (``MNEMO_POSTGRES_URL``); a clear error when unset."""
    url = settings.postgres_backend
    if url is None:
        raise ConfigurationError("MNEMO_STATE_BACKEND=postgres needs MNEMO_POSTGRES_URL")
    return url


def open_primary(settings: Settings, *, migrate: bool = True,
                 readonly: bool = False) -> PgDatabase:
    """The Postgres primary; its schema migrated forward unless ``migrate=False`` (then only
    checked, as ``open_state`` does for the file)."""
    from memory_core.db.pg_store import PgDatabase

    refuse_unpromoted_file(settings)
    db = PgDatabase(primary_url(settings), settings.postgres_password, readonly=readonly)
    try:
        if migrate:
            db.migrate()
        db.require_current()
    except BaseException:
        db.close()
        raise
    return db


def migrate_primary(settings: Settings) -> Migrated:
    """``migrate_stores``'s step for the primary."""
    from memory_core.db.pg_store import PgDatabase
    from memory_core.db.stores import Migrated

    db = PgDatabase(primary_url(settings), settings.postgres_password)
    try:
        applied = db.migrate()
        db.require_current()
        return Migrated("state", db.where, db.version(), tuple(applied))
    finally:
        db.close()


def refuse_unpromoted_file(settings: Settings) -> None:
    """Refuse the primary while this host's data dir holds a SQLite memory with turns that
    was never promoted: its processes would split the memory between two stores."""
    path = Path(settings.state_db_path)
    if not path.exists():
        return
    from memory_core.db.sqlite import connect

    conn = connect(path, busy_timeout_ms=settings.busy_timeout_ms, readonly=True)
    try:
        has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone()
        if not has_meta or promoted_to(conn) is not None:
            return
        row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'turns'").fetchone()
        if row and conn.execute("SELECT 1 FROM turns LIMIT 1").fetchone():
            raise StoreError(
                f"{path} holds a memory that was not promoted to the Postgres primary: run "
                "`mnemo mirror promote` (with MNEMO_STATE_BACKEND=sqlite) first, or set "
                "MNEMO_STATE_BACKEND=sqlite, or point MNEMO_DATA_DIR elsewhere")
    finally:
        conn.close()


def promoted_to(conn: Any) -> str | None:
    return get_meta(conn, PROMOTED_TO)


def refuse_if_promoted(conn: Any, settings: Settings) -> None:
    """Refuse a SQLite state file whose memory was switched to the Postgres primary."""
    target = promoted_to(conn)
    if target is not None:
        raise StoreError(
            f"{Path(settings.state_db_path)} was promoted to the Postgres primary at {target} "
            "(`mnemo mirror promote`): set MNEMO_STATE_BACKEND=postgres and "
            f"MNEMO_POSTGRES_URL={target} for every process of this memory")
