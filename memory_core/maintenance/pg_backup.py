"""Backing up, restoring and drilling the Postgres primary (``MNEMO_STATE_BACKEND=postgres``).

A backup of the primary is a logical dump of its schema ``mnemo_primary``: every table's
rows in PostgreSQL's ``COPY`` text format, one file per table under ``primary/`` in the
backup folder, all read in one ``REPEATABLE READ`` transaction (``snapshot``), so the files
are one consistent state however busy the writers are (and the tenant exports are read from
that same snapshot). No ``pg_dump`` is needed: the dump goes through the connection mnemo
already has. The full-text postings, row lengths and counters are left out — they are made
from the rows (the primary's trigger and ``pg_fts.flush``) — so a restore indexes the
restored rows exactly as writes do.

A restore (``load``) goes into an *empty* primary schema only (a fresh database, or one
whose schema was dropped), or one this same backup was restored into (``restored_from``: a
rerun after a crash between the primary's commit and the ops file's copy goes on): one
transaction under the store-wide write lock copies the rows with their ids, moves the id
sequences past them, recreates the vector tables (converting between pgvector's ``vector``
and ``real[]`` when the two databases differ), checks every table's rows against the
manifest and commits, which builds the postings. The drill
(``check``) loads every file into temporary tables shaped like the primary's and compares
the rows with the manifest, touching nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from memory_core.db import pg_fts, pg_vectors, schema_state
from memory_core.db.pg_state import ID_TABLES, SCHEMA, PgConnection
from memory_core.db.pg_store import LATEST, PgDatabase
from memory_core.maintenance.backup_files import BackupError, RestoreRefusedError

DUMP_DIR = "primary"
ENGINE = "postgres"
# Made from the rows on restore, never dumped.
_DERIVED = frozenset({"fts_stats", "fts_pending"} | {f"{b}_fts_{s}" for b in pg_fts.TEXT_TABLES
                                                      for s in ("p", "len")})
RESTORED_FROM = "restored_from"  # meta: the backup a restore loaded (a rerun skips it)
_KEEP_META = ("kind", "vector_type", RESTORED_FROM)  # the target database's own
_CHUNK = 1 << 20


@contextlib.contextmanager
def snapshot(db: PgDatabase) -> Iterator[PgConnection]:
    """A connection reading one consistent state of the primary (read only) until exit."""
    conn = db.connect()
    try:
        conn.raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield conn
    finally:
        with contextlib.suppress(Exception):
            conn.raw.execute("ROLLBACK")
        conn.close()


def _tables(conn: PgConnection) -> list[str]:
    rows = conn.raw.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY "
                            "tablename", (SCHEMA,)).fetchall()
    return [str(r[0]) for r in rows if str(r[0]) not in _DERIVED]


def _scalar(conn: PgConnection, sql: str) -> Any:
    row = conn.raw.execute(sql).fetchone()
    return row[0] if row else None


def _meta(conn: PgConnection) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.raw.execute("SELECT key, value FROM meta")}


def dump(conn: PgConnection, folder: Path) -> dict[str, Any]:
    """Write every table of the snapshot ``conn`` into ``folder/primary``; the manifest's
    entry for the state database (engine, schema, version, vector type and rows per table)."""
    out = folder / DUMP_DIR
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for table in _tables(conn):
        rows = 0
        with open(out / f"{table}.copy", "wb") as f, conn.raw.cursor() as cur, \
                cur.copy(f"COPY {table} TO STDOUT") as copy:
            for data in copy:
                f.write(data)
                rows += bytes(data).count(b"\n")  # text format: one line a row
        counts[table] = rows
    meta = _meta(conn)
    return {"engine": ENGINE, "dir": DUMP_DIR, "schema": SCHEMA,
            "schema_version": int(_scalar(conn, "SELECT max(version) FROM schema_migrations")
                                  or 0),
            "vector_type": meta.get("vector_type", "real[]"),
            "vector_dim": int(meta["embedder_dim"]) if "embedder_dim" in meta else None,
            "tables": counts}


def _copy_in(conn: PgConnection, table: str, path: Path) -> None:
    with open(path, "rb") as f, conn.raw.cursor() as cur, \
            cur.copy(f"COPY {table} FROM STDIN") as copy:
        while chunk := f.read(_CHUNK):
            copy.write(chunk)


def _vector_cast(kind: str) -> str:
    """SQL turning a staged text vector (either engine's spelling) into ``kind``."""
    if kind == "vector":
        return "translate(embedding, '{}', '[]')::vector"
    return "translate(embedding, '[]', '{}')::real[]"


def _load_vectors(conn: PgConnection, table: str, path: Path, dim: int) -> None:
    pg_vectors.create_table(conn, table, dim)
    stage = f"stage_{table}"
    conn.raw.execute(f"CREATE TEMP TABLE {stage} (rowid bigint, tenant text, embedding text) "
                     "ON COMMIT DROP")
    _copy_in(conn, stage, path)
    conn.raw.execute(f"INSERT INTO {table} (rowid, tenant, embedding) SELECT rowid, tenant, "
                     f"{_vector_cast(pg_vectors.vector_type(conn))} FROM {stage}")


def _load_meta(conn: PgConnection, path: Path) -> None:
    conn.raw.execute("CREATE TEMP TABLE stage_meta (key text, value text) ON COMMIT DROP")
    _copy_in(conn, "stage_meta", path)
    conn.raw.execute("INSERT INTO meta (key, value) SELECT key, value FROM stage_meta WHERE "
                     "key <> ALL(%s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                     (list(_KEEP_META),))


def restored_from(db: PgDatabase) -> str | None:
    """The name of the backup the primary was restored from (``meta``), if any."""
    row = db.conn.raw.execute("SELECT value FROM meta WHERE key = %s",
                              (RESTORED_FROM,)).fetchone()
    return str(row[0]) if row else None


def refuse_occupied(db: PgDatabase) -> None:
    """Refuse to restore over a primary that holds anything (RestoreRefusedError)."""
    conn = db.conn
    busy = [t for t in _tables(conn) if t not in ("meta", "schema_migrations")
            and _scalar(conn, f"SELECT EXISTS (SELECT 1 FROM {t})")]
    if busy:
        raise RestoreRefusedError(
            f"the Postgres primary schema {SCHEMA} at {db.url.canonical} is not empty "
            f"({len(busy)} tables hold rows, e.g. {busy[0]}): restore into an empty database, "
            f"or back it up and DROP SCHEMA {SCHEMA} CASCADE first; nothing was restored")


def _check_version(entry: dict[str, Any]) -> None:
    if int(entry["schema_version"]) > LATEST:
        raise BackupError(f"the backup's Postgres primary has schema version "
                          f"{entry['schema_version']}, newer than this mnemo knows ({LATEST}): "
                          "restore it with a newer mnemo")


def load(db: PgDatabase, folder: Path, entry: dict[str, Any]) -> dict[str, int]:
    """Restore the dump in ``folder`` (a backup) into the empty primary ``db``; its rows per
    table. Raises RestoreRefusedError (not empty), BackupError (newer schema, counts)."""
    _check_version(entry)
    db.migrate()
    if restored_from(db) == folder.name:
        return {}  # a rerun after a crash past the commit: the ops file is what is left
    refuse_occupied(db)
    src, want = folder / entry["dir"], entry["tables"]
    conn = db.conn
    conn.begin_write(None)  # no writer of any tenant while the memory arrives
    try:
        for table in [t.name for t in schema_state.metadata.sorted_tables]:
            if table in want and table not in ("meta", "schema_migrations"):
                _copy_in(conn, table, src / f"{table}.copy")
                if table in ID_TABLES:
                    conn.raw.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                     f"greatest((SELECT max(id) FROM {table}), 1))")
        if "meta" in want:
            _load_meta(conn, src / "meta.copy")
        for table in sorted(t for t in want if "_vec_g" in t):
            _load_vectors(conn, table, src / f"{table}.copy", int(entry["vector_dim"]))
        got = {t: int(_scalar(conn, f"SELECT count(*) FROM {t}"))
               for t in want if t not in ("meta", "schema_migrations")}
        wrong = [t for t in sorted(got) if got[t] != want[t]]
        if wrong:
            raise BackupError(f"restored table {wrong[0]} has {got[wrong[0]]} rows, the "
                              f"manifest says {want[wrong[0]]}: nothing was restored")
        conn.raw.execute("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO "
                         "UPDATE SET value = excluded.value", (RESTORED_FROM, folder.name))
        conn.execute("COMMIT")  # builds the full-text postings of the restored rows
    except BaseException:
        with contextlib.suppress(Exception):
            conn.raw.execute("ROLLBACK")
        raise
    return got


def check(db: PgDatabase, folder: Path, entry: dict[str, Any]) -> list[str]:
    """The restore drill of a primary dump: each file loaded into a temporary table shaped
    like the primary's, its rows compared with the manifest; the failures (nothing kept)."""
    failures: list[str] = []
    conn = db.connect()
    try:
        conn.raw.execute("BEGIN")
        live = set(_tables(conn))
        for table, rows in sorted(entry["tables"].items()):
            path = folder / entry["dir"] / f"{table}.copy"
            shape = (f"(LIKE {SCHEMA}.{table})" if table in live and "_vec_g" not in table
                     else "(rowid bigint, tenant text, embedding text)")
            if "_vec_g" not in table and table not in live:
                failures.append(f"{DUMP_DIR}/{table}.copy: no such table in this mnemo's "
                                "schema")
                continue
            conn.raw.execute(f"CREATE TEMP TABLE drill_{table} {shape} ON COMMIT DROP")
            try:
                with conn.raw.transaction():  # a savepoint: one bad file fails alone
                    _copy_in(conn, f"drill_{table}", path)
            except OSError as e:
                failures.append(f"{DUMP_DIR}/{table}.copy: cannot be read "
                                f"({type(e).__name__})")
                continue
            except psycopg.Error as e:  # the server refused the file's contents
                failures.append(f"{DUMP_DIR}/{table}.copy: the server refused its rows "
                                f"({type(e).__name__})")
                continue
            got = int(_scalar(conn, f"SELECT count(*) FROM drill_{table}"))
            if got != rows:
                failures.append(f"{DUMP_DIR}/{table}.copy: {got} rows loaded, manifest "
                                f"says {rows}")
    finally:
        with contextlib.suppress(Exception):
            conn.raw.execute("ROLLBACK")
        conn.close()
    return failures
