"""Numbered migrations and the recorded schema version of each database.

Each database records its kind (``state`` or ``ops``) in ``meta`` and its version in
``PRAGMA user_version`` and ``schema_migrations``. ``migrate()`` applies what is pending in
one ``BEGIN IMMEDIATE`` transaction (SQLite DDL is transactional), so it is idempotent and a
crash leaves the old version intact. A database newer than this code is refused.

Adding a migration: append a ``Migration`` to the store's list; never edit a released one.
A test compares the migrated schema with the metadata in ``schema_*.py``. Migration 1 creates
the tables from the *current* metadata, so on a new database the later migrations find their
columns and indexes already there: each later step checks before it changes anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import MetaData
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from memory_core.clock import to_db, utcnow
from memory_core.db import changes, entity_kinds, schema_ops, schema_state
from memory_core.db import fts as fts_index
from memory_core.db.sqlite import Connection, atomic
from memory_core.errors import SchemaTooNewError, StoreError


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[Any], None]


def create_tables(metadata: MetaData, names: Sequence[str]) -> Callable[[Any], None]:
    """A migration step creating the named tables (and their indexes) from ``metadata``."""
    dialect = sqlite_dialect.dialect()

    def apply(conn: Connection) -> None:
        for name in names:
            table = metadata.tables[name]
            conn.execute(str(CreateTable(table).compile(dialect=dialect)))
            for index in table.indexes:
                conn.execute(str(CreateIndex(index).compile(dialect=dialect)))

    return apply


def _fts_ddl(fts: str, base: str) -> list[str]:
    tokenize = schema_state.FTS_TOKENIZE
    return [
        f"CREATE VIRTUAL TABLE {fts} USING fts5(text, content='{base}', "
        f"content_rowid='id', tokenize='{tokenize}')",
        f"CREATE TRIGGER {fts}_ai AFTER INSERT ON {base} BEGIN "
        f"INSERT INTO {fts}(rowid, text) VALUES (new.id, new.text); END",
        f"CREATE TRIGGER {fts}_ad AFTER DELETE ON {base} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, text) VALUES ('delete', old.id, old.text); END",
        f"CREATE TRIGGER {fts}_au AFTER UPDATE OF text ON {base} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, text) VALUES ('delete', old.id, old.text); "
        f"INSERT INTO {fts}(rowid, text) VALUES (new.id, new.text); END",
    ]


def _create_fts(conn: Connection) -> None:
    for fts, base in schema_state.FTS_TABLES.items():
        for ddl in _fts_ddl(fts, base):
            conn.execute(ddl)


def _columns(conn: Any, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info('{table}')")]


def add_column(table: str, column: str, ddl: str) -> Callable[[Any], None]:
    """A step adding ``column`` (``ddl``: its type and default) unless it is there."""
    def apply(conn: Any) -> None:
        if column not in _columns(conn, table):
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")

    return apply


def create_indexes(metadata: MetaData, table: str) -> Callable[[Any], None]:
    """A step creating the indexes of ``table`` in ``metadata`` that do not exist yet."""
    dialect = sqlite_dialect.dialect()

    def apply(conn: Any) -> None:
        for index in metadata.tables[table].indexes:
            exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND "
                                  "name = ?", (index.name,)).fetchone()
            if not exists:
                conn.execute(str(CreateIndex(index).compile(dialect=dialect)))

    return apply


def create_missing_tables(metadata: MetaData, names: Sequence[str]) -> Callable[[Any], None]:
    """``create_tables`` for the named tables that do not exist yet (migration 1 makes its
    tables from today's metadata, so a later step may find its table already there)."""
    def apply(conn: Any) -> None:
        missing = [n for n in names if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (n,)).fetchone()]
        create_tables(metadata, missing)(conn)

    return apply


def _rebuild_beliefs(conn: Any) -> None:
    """Give ``beliefs`` the ``expired`` status and the access columns (state version 2).

    SQLite cannot change a CHECK constraint in place: the table is rebuilt under its
    current definition with the same row ids (so FTS and vector rows still match), and the
    FTS triggers are made again on the new table. A table that already has both is left.
    """
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND "
                       "name = 'beliefs'").fetchone()[0]
    old = _columns(conn, "beliefs")
    if "'expired'" in sql and "access_count" in old:
        return
    conn.execute("ALTER TABLE beliefs RENAME TO beliefs_v1")  # the triggers follow it
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND "
                                "tbl_name = 'beliefs_v1' AND sql IS NOT NULL").fetchall():
        conn.execute(f"DROP INDEX {name}")  # their names are reused by the new table
    create_tables(schema_state.metadata, ["beliefs"])(conn)
    cols = ", ".join(c for c in old if c in _columns(conn, "beliefs"))
    conn.execute(f"INSERT INTO beliefs ({cols}) SELECT {cols} FROM beliefs_v1")
    conn.execute("DROP TABLE beliefs_v1")  # and its triggers
    for ddl in _fts_ddl("beliefs_fts", "beliefs")[1:]:
        conn.execute(ddl)


def _tenant_fts(conn: Any) -> None:
    """Give every tenant its own keyword statistics (state version 3).

    The first indexes (migration 1) share one vocabulary and one set of bm25 statistics
    between all tenants: another tenant's rows changed a tenant's ranking, and a search
    walked every tenant's matches. They are dropped (with their triggers) and made again
    as ``db.fts`` describes, then filled from the base rows with ``fts_stats``.
    """
    create_missing_tables(schema_state.metadata, ["fts_stats"])(conn)
    for name, base in schema_state.FTS_TABLES.items():
        for suffix in ("ai", "ad", "au"):
            conn.execute(f"DROP TRIGGER IF EXISTS {name}_{suffix}")
        conn.execute(f"DROP TABLE IF EXISTS {name}_v")
        conn.execute(f"DROP TABLE IF EXISTS {name}_i")
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        for statement in fts_index.ddl(name, base):
            conn.execute(statement)
        fts_index.fill(conn, name, base)
    fts_index.record_version(conn)


def _run_all(conn: Any, statements: list[str]) -> None:
    for statement in statements:
        conn.execute(statement)


def _steps(*steps: Callable[[Any], None]) -> Callable[[Any], None]:
    def apply(conn: Connection) -> None:
        for step in steps:
            step(conn)

    return apply


STATE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "memory model: tenants, turns, episodes, entities, beliefs, outbox", _steps(
        create_tables(schema_state.metadata, [
            "meta", "schema_migrations", "tenants", "turns", "episodes", "episode_turns",
            "entities", "entity_aliases", "entity_merges", "entity_merges_archive", "beliefs",
            "hygiene_rejections", "outbox", "applied_jobs", "tombstones",
        ]),
        _create_fts,
    )),
    Migration(2, "maintenance: expired beliefs, access counts, decay time, expiry indexes",
              _steps(
                  _rebuild_beliefs,
                  add_column("episodes", "decayed_at", "TEXT"),
                  create_indexes(schema_state.metadata, "episodes"),
              )),
    Migration(3, "keyword search per tenant: tenant-namespaced FTS tokens and statistics",
              _tenant_fts),
    Migration(4, "recall change log: recall_changes and the triggers writing it",
              changes.install),
    Migration(5, "entity kinds from the beliefs' roles (person, place, organization, ...)",
              lambda conn: _run_all(conn, entity_kinds.backfill_sql(to_db(utcnow())))),
)

OPS_MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "queue, spool, audit, recall log, schedules, operations", create_tables(
        schema_ops.metadata, [
            "meta", "schema_migrations", "queue_messages", "spool", "audit_log", "recall_log",
            "schedule_firings", "leases", "heartbeats", "backup_manifests", "restore_drills",
            "digests", "mirror_cursors",
        ])),
    Migration(2, "recall log: applied_at (what macro_sleep has reinforced)", _steps(
        add_column("recall_log", "applied_at", "TEXT"),
        create_indexes(schema_ops.metadata, "recall_log"),
    )),
    Migration(3, "firing ledger: kind, window start, misses, attempts, counts; weekly reports",
              _steps(
                  add_column("schedule_firings", "kind", "TEXT DEFAULT 'scheduled' NOT NULL"),
                  add_column("schedule_firings", "window_start", "TEXT"),
                  add_column("schedule_firings", "missed_count", "INTEGER DEFAULT '0' NOT NULL"),
                  add_column("schedule_firings", "started_at", "TEXT"),
                  add_column("schedule_firings", "attempts", "INTEGER DEFAULT '0' NOT NULL"),
                  add_column("schedule_firings", "counts", "TEXT"),
                  create_indexes(schema_ops.metadata, "schedule_firings"),
                  create_missing_tables(schema_ops.metadata, ["firing_reports"]),
              )),
    Migration(4, "heartbeats: queues, last message, counts, clean stop, detail", _steps(
        add_column("heartbeats", "queues", "TEXT"),
        add_column("heartbeats", "last_message_at", "TEXT"),
        add_column("heartbeats", "processed", "INTEGER DEFAULT '0' NOT NULL"),
        add_column("heartbeats", "failed", "INTEGER DEFAULT '0' NOT NULL"),
        add_column("heartbeats", "stopped_at", "TEXT"),
        add_column("heartbeats", "detail", "TEXT"),
    )),
    Migration(5, "turn journal: what after_turn sent to Redis, until the turn is recorded",
              create_missing_tables(schema_ops.metadata, ["turn_journal"])),
    Migration(6, "mirror cursors: the last shipping error", _steps(
        add_column("mirror_cursors", "last_error", "TEXT"),
        add_column("mirror_cursors", "last_error_at", "TEXT"),
    )),
    Migration(7, "mirror cursors: the last reconcile's drift", _steps(
        add_column("mirror_cursors", "drift", "TEXT"),
        add_column("mirror_cursors", "drift_checked_at", "TEXT"),
    )),
)

MIGRATIONS: dict[str, tuple[Migration, ...]] = {"state": STATE_MIGRATIONS, "ops": OPS_MIGRATIONS}


def latest_version(kind: str) -> int:
    return MIGRATIONS[kind][-1].version


def current_version(conn: Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _recorded_kind(conn: Connection) -> str | None:
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'store_kind'").fetchone()
    return row[0] if row else None


def check_version(conn: Connection, kind: str, path: str) -> int:
    """The database's version; raise SchemaTooNewError or StoreError when it is not ours."""
    version = current_version(conn)
    latest = latest_version(kind)
    if version > latest:
        raise SchemaTooNewError(
            f"{path} has schema version {version}, newer than this mnemo knows ({latest}): "
            "upgrade mnemo (`pip install -U mnemo`) or point MNEMO_DATA_DIR at a database "
            "made by this version"
        )
    recorded = _recorded_kind(conn)
    if version > 0 and recorded != kind:
        raise StoreError(
            f"{path} is not a mnemo {kind} database (it records {recorded!r}): check "
            "MNEMO_DATA_DIR; memory_state.db and memory_ops.db must not be swapped"
        )
    return version


def migrate(conn: Connection, kind: str, path: str) -> list[Migration]:
    """Apply the pending migrations of a ``state`` or ``ops`` database; return them.

    Idempotent: a second call applies nothing. Raises SchemaTooNewError for a newer database.
    """
    pending: list[Migration] = []
    with atomic(conn):
        version = check_version(conn, kind, path)
        pending = [m for m in MIGRATIONS[kind] if m.version > version]
        for migration in pending:
            migration.apply(conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, to_db(utcnow())),
            )
            conn.execute(f"PRAGMA user_version = {int(migration.version)}")
        if pending and pending[0].version == 1:
            conn.execute("INSERT INTO meta (key, value) VALUES ('store_kind', ?)", (kind,))
    return pending
