"""The state store on PostgreSQL: ``PgDatabase``, the ``Database`` of the Postgres primary.

Everything lives in the schema ``mnemo_primary`` (the mirror's is ``mnemo``; the two never
share a table). The tables are the SQLite state tables (``schema_state.metadata``, compiled
for PostgreSQL: integers are ``bigint``, row ids ``bigserial``), plus the full-text postings
(``pg_fts``) and the vector tables (``vectors``, made when the embedder is recorded).
Datetimes keep the state db's fixed-width UTC text, so every comparison and order is the
same on both engines.

The schema is created and migrated under a transaction-scoped advisory lock (two workers
starting at once do not race), then the store-wide write lock (no writer in flight); its
version is in ``schema_migrations``, and ``meta`` records ``kind`` = ``state`` and
``vector_type`` — pgvector's ``vector`` when the extension is
installed or can be created, else ``real[]`` (dense search is then an exact scan). A schema
newer than this code is refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import Index
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

from memory_core.backends import BackendURL, postgres_connect_kwargs
from memory_core.clock import to_db, utcnow
from memory_core.db import entity_kinds, pg_fts, schema_state
from memory_core.db import fts as fts_index
from memory_core.db.per_thread import ThreadConnections
from memory_core.db.pg_state import SCHEMA, PgConnection, write_lock_sql
from memory_core.errors import SchemaTooNewError, StoreError

_MIGRATE_LOCK = 0x6D6E656D6F4D47  # "mnemoMG"
# (version, name); the steps are in ``_migrate``. Append, never edit a released one.
MIGRATIONS = ((1, "state tables, full-text postings, vector type"),
              (2, "SQLite's julianday() and sum(boolean) for the maintenance jobs' SQL"),
              (3, "SQLite's json_group_array() for the backup's exports"),
              (4, "keyword search from the postings' index alone (row lengths, INCLUDE)"),
              (5, "the maintenance jobs' partial indexes made partial, as in SQLite"),
              (6, "entity kinds from the beliefs' roles (person, place, organization, ...)"))
# SQLite functions the state code calls that PostgreSQL lacks, made in the schema.
_COMPAT = ["CREATE OR REPLACE FUNCTION julianday(t text) RETURNS double precision "
           "LANGUAGE sql STABLE AS $$ SELECT extract(epoch FROM t::timestamptz)::float8 "
           "/ 86400.0 + 2440587.5 $$",
           # SQLite's sum() of a comparison counts the true ones
           "CREATE OR REPLACE FUNCTION bool_sum_step(n int8, b boolean) RETURNS int8 "
           "LANGUAGE sql IMMUTABLE AS $$ SELECT n + CASE WHEN b THEN 1 ELSE 0 END $$",
           "CREATE AGGREGATE sum(boolean) (SFUNC = bool_sum_step, STYPE = int8, "
           "INITCOND = '0')"]
# SQLite's json_group_array(text): the values as one JSON array, in text (as SQLite gives it).
_JSON_ARRAY = ["CREATE OR REPLACE FUNCTION json_group_array_final(v text[]) RETURNS text "
               "LANGUAGE sql IMMUTABLE AS $$ SELECT array_to_json(v)::text $$",
               "CREATE AGGREGATE json_group_array(text) (SFUNC = array_append, STYPE = text[], "
               "FINALFUNC = json_group_array_final, INITCOND = '{}')"]
LATEST = MIGRATIONS[-1][0]


def table_ddl() -> list[str]:
    """The state tables and their indexes, from the SQLite schema's metadata."""
    dialect = postgresql.dialect()
    out = []
    for table in schema_state.metadata.sorted_tables:
        sql = str(CreateTable(table).compile(dialect=dialect))
        sql = re.sub(r"\bSERIAL\b", "BIGSERIAL", re.sub(r"\bINTEGER\b", "BIGINT", sql))
        out.append(sql)
        out += [_index_ddl(i) for i in table.indexes]
    return out


def _index_ddl(index: Index) -> str:
    """``CREATE INDEX`` for the primary, partial where the SQLite schema's index is (its
    ``sqlite_where``: the PostgreSQL compiler reads only ``postgresql_where``)."""
    sql = str(CreateIndex(index).compile(dialect=postgresql.dialect()))
    where = index.dialect_options["sqlite"]["where"]
    return sql if where is None else f"{sql} WHERE {where}"


def _partial_index_ddl() -> list[str]:
    """Migration 5: the partial indexes, made again partial (migration 1 built them whole)."""
    out = []
    for table in schema_state.metadata.sorted_tables:
        for index in table.indexes:
            if index.dialect_options["sqlite"]["where"] is not None:
                out += [f"DROP INDEX IF EXISTS {index.name}", _index_ddl(index)]
    return out


def _has_pgvector(conn: psycopg.Connection[Any]) -> bool:
    """Install pgvector in the database when it can be; whether it is there."""
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error:
        return False
    return True


def _apply(conn: psycopg.Connection[Any], version: int, statements: list[str]) -> None:
    """Run migration ``version``'s statements and record it (in the caller's transaction)."""
    for statement in statements:
        conn.execute(statement)
    conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES "
                 "(%s, %s, %s)", (version, dict(MIGRATIONS)[version], to_db(utcnow())))


def _migrate(conn: psycopg.Connection[Any]) -> list[int]:
    """Apply the pending migrations in one transaction; their numbers."""
    vector_type = "vector" if _has_pgvector(conn) else "real[]"
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(f"SET LOCAL search_path = {SCHEMA}")
        exists = conn.execute("SELECT to_regclass(%s)",
                              (f"{SCHEMA}.schema_migrations",)).fetchone()
        version = 0
        if exists and exists[0]:
            row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
            version = int(row[0] or 0) if row else 0
        if version > LATEST:
            raise SchemaTooNewError(f"the Postgres state schema {SCHEMA} has version {version}, "
                                    f"this mnemo knows {LATEST}: upgrade mnemo")
        if version < LATEST:  # no writer of any tenant in flight while the tables change
            conn.execute(write_lock_sql(None))
        if version < 1:
            _apply(conn, 1, table_ddl() + pg_fts.ddl(SCHEMA))
            conn.execute("INSERT INTO meta (key, value) VALUES ('kind', 'state'), "
                         "('vector_type', %s)", (vector_type,))
        if version < 2:
            _apply(conn, 2, _COMPAT)
            conn.execute("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO "
                         "UPDATE SET value = excluded.value",
                         (fts_index.META_KEY, fts_index.TOKENS_VERSION))
        steps = {3: _JSON_ARRAY, 4: pg_fts.index_ddl(), 5: _partial_index_ddl(),
                 6: entity_kinds.backfill_sql(to_db(utcnow()))}
        for number, statements in steps.items():
            if version < number:
                _apply(conn, number, statements)
    return list(range(version + 1, LATEST + 1))


class PgDatabase:
    """The state store in a Postgres database (``Database``'s interface; kind ``state``)."""

    kind = "state"

    def __init__(self, url: BackendURL, password: str | None, *, readonly: bool = False,
                 connect_timeout_s: int = 5) -> None:
        self.url = url
        self._password = password
        self.readonly = readonly
        self._timeout = connect_timeout_s
        self._conns = ThreadConnections(self.connect, broken=lambda conn: conn.closed)

    @property
    def where(self) -> str:
        """The canonical URL and the schema, for messages that name the store."""
        return f"{self.url.canonical}#{SCHEMA}"

    @property
    def path(self) -> Path:
        """Not a file: ``where`` as a path, for code written for a file (a ``Path`` folds
        the URL's ``//``: show ``where`` to a user)."""
        return Path(self.where)

    def _raw(self) -> psycopg.Connection[Any]:
        kwargs = postgres_connect_kwargs(self.url, self._password,
                                         connect_timeout_s=self._timeout)
        try:
            return psycopg.connect(**kwargs, autocommit=True)
        except psycopg.Error as e:
            state = getattr(e, "sqlstate", None)
            raise StoreError(
                f"cannot connect to the Postgres state store at {self.url.canonical} "
                f"({type(e).__name__}{', SQLSTATE ' + state if state else ''}): check that "
                "the server is up, MNEMO_POSTGRES_URL and MNEMO_POSTGRES_PASSWORD") from None

    def connect(self) -> PgConnection:
        raw = self._raw()
        # pgvector's type and operators live in the schema it was installed in (public,
        # usually): visible after the primary's own tables.
        row = raw.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE "
                          "extname = 'vector'").fetchone()
        path = [SCHEMA] + ([str(row[0])] if row and str(row[0]) != SCHEMA else [])
        raw.execute(f"SET search_path = {', '.join(path)}")
        if self.readonly:
            raw.execute("SET default_transaction_read_only = on")
        return PgConnection(raw, readonly=self.readonly)

    @property
    def conn(self) -> PgConnection:
        return self._conns.get()

    def migrate(self) -> list[Any]:
        """Apply pending migrations (idempotent); what was applied, as ``Migration``s."""
        from memory_core.db.migrations import Migration

        raw = self._raw()
        try:
            done = _migrate(raw)
        finally:
            raw.close()
        names = dict(MIGRATIONS)
        return [Migration(v, names[v], lambda conn: None) for v in done]

    def version(self) -> int:
        row = self.conn.raw.execute("SELECT to_regclass(%s)",
                                    (f"{SCHEMA}.schema_migrations",)).fetchone()
        if not row or not row[0]:
            return 0
        got = self.conn.raw.execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(got[0] or 0) if got else 0

    def require_current(self) -> None:
        version = self.version()
        if version > LATEST:
            raise SchemaTooNewError(f"the Postgres state schema {SCHEMA} at "
                                    f"{self.url.canonical} has version {version}, this mnemo "
                                    f"knows {LATEST}: upgrade mnemo")
        if version < LATEST:
            raise StoreError(f"the Postgres state schema {SCHEMA} at {self.url.canonical} has "
                             f"version {version}, this mnemo needs {LATEST}: run `mnemo db "
                             "migrate` or start the workers")

    def vacuum_analyze(self) -> None:
        """``VACUUM (ANALYZE)`` every table of the schema, after a bulk load (a promote):
        without the planner's statistics a search plans as if the tables were empty (seconds
        per recall at 100k), and without the visibility map the postings' index-only scans
        read the table after all. Outside a transaction (VACUUM cannot run in one)."""
        raw = self._raw()
        try:
            tables = [r[0] for r in raw.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
                (SCHEMA,)).fetchall()]
            for table in tables:
                raw.execute(f'VACUUM (ANALYZE) {SCHEMA}."{table}"')
        finally:
            raw.close()

    def vector_type(self) -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'vector_type'").fetchone()
        return str(row[0]) if row else "real[]"

    def close(self) -> None:
        self._conns.close()

    def __repr__(self) -> str:
        return f"PgDatabase({self.url.canonical}, schema {SCHEMA})"
