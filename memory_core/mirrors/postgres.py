"""The Postgres mirror: turns, episodes (with their vectors), entities and beliefs (with their
bi-temporal fields), kept current from the outbox.

Everything lives in the schema ``mnemo``. Every table's key is ``(tenant, uid)`` — the state
db's own uids, tenant first — so the mirror can be compared with the state db row by row and
can later become the primary store. The schema is created and migrated by the sink
(``MIGRATIONS``; the version is in ``mnemo.schema_version``), under an advisory lock so two
workers opening at once do not race. A schema newer than this code is refused.

Episode vectors use pgvector's ``vector`` type when the extension is installed in the database
(or can be created there) when the schema is first made, otherwise ``real[]``; which one is
recorded in ``mnemo.meta`` (``vector_type``).

Connections come from ``ConnectionPool`` and are built by ``postgres_connect_kwargs`` from the
parsed URL (never its text); a libpq environment variable refuses the connection. Errors are
wrapped: ``MirrorUnavailable`` (cannot connect, connection lost, serialization failure or
deadlock: retry) or ``MirrorError`` (retrying cannot help), each naming the canonical URL, the
error type and the SQLSTATE, never the driver's message (it may quote row values).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg
import structlog
from psycopg import sql

from memory_core.backends import BackendURL, postgres_connect_kwargs
from memory_core.errors import ConfigurationError
from memory_core.mirrors.pg_pool import ConnectionPool
from memory_core.mirrors.sink import KINDS, MirrorError, MirrorUnavailable, Record
from memory_core.settings import Settings

log = structlog.get_logger("mnemo.mirror")

SCHEMA = "mnemo"
_LOCK_KEY = 0x6D6E656D6F  # pg_advisory_xact_lock key for migrations ("mnemo")

# kind -> (table, key column, [(column, sql type, converter to the db)])
_TS = "timestamptz"


def _ts(value: Any) -> Any:
    """The state db's fixed-width UTC text as a datetime (``fromisoformat`` reads it, and is
    ten times faster than ``clock.from_db``'s strptime; the result is the same)."""
    return datetime.fromisoformat(value) if value is not None else None


def _same(value: Any) -> Any:
    return value


COLUMNS: dict[str, tuple[str, str, list[tuple[str, str, Callable[[Any], Any]]]]] = {
    "turn": ("turns", "turn_uid", [
        ("session_id", "text NOT NULL", _same), ("idx", "integer NOT NULL", _same),
        ("speaker", "text NOT NULL", _same), ("occurred_at", f"{_TS} NOT NULL", _ts),
        ("text", "text NOT NULL", _same), ("recorded_at", f"{_TS} NOT NULL", _ts)]),
    "entity": ("entities", "entity_id", [
        ("name", "text NOT NULL", _same), ("kind", "text NOT NULL", _same),
        ("aliases", "text[] NOT NULL", list), ("created_at", f"{_TS} NOT NULL", _ts),
        ("updated_at", f"{_TS} NOT NULL", _ts)]),
    "episode": ("episodes", "episode_uid", [
        ("session_id", "text NOT NULL", _same), ("tier", "text NOT NULL", _same),
        ("text", "text NOT NULL", _same), ("occurred_at", f"{_TS} NOT NULL", _ts),
        ("importance", "double precision NOT NULL", _same),
        ("created_at", f"{_TS} NOT NULL", _ts), ("updated_at", f"{_TS} NOT NULL", _ts),
        ("expires_at", _TS, _ts), ("turn_uids", "text[] NOT NULL", list),
        ("vector", "VECTOR", _same)]),
    "belief": ("beliefs", "belief_uid", [
        ("subject_id", "text NOT NULL", _same), ("predicate", "text NOT NULL", _same),
        ("object_text", "text NOT NULL", _same), ("object_entity_id", "text", _same),
        ("negated", "boolean NOT NULL", bool), ("text", "text NOT NULL", _same),
        ("valid_from", f"{_TS} NOT NULL", _ts), ("valid_to", _TS, _ts),
        ("stated_valid_to", _TS, _ts), ("recorded_at", f"{_TS} NOT NULL", _ts),
        ("retired_at", _TS, _ts), ("status", "text NOT NULL", _same),
        ("source", "text NOT NULL", _same), ("confidence", "double precision NOT NULL", _same),
        ("turn_uid", "text", _same), ("expires_at", _TS, _ts)]),
}
TABLES = tuple(COLUMNS[k][0] for k in KINDS if k in COLUMNS)


def _create_v1(cur: psycopg.Cursor[Any], vector_type: str) -> None:
    cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.meta (key text PRIMARY KEY, "
                "value text NOT NULL)")
    cur.execute(f"INSERT INTO {SCHEMA}.meta VALUES ('vector_type', %s) ON CONFLICT DO NOTHING",
                (vector_type,))
    for kind, (table, key, cols) in COLUMNS.items():
        defs = ", ".join(f"{c} {t.replace('VECTOR', vector_type)}" for c, t, _ in cols)
        cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.{table} (tenant text NOT NULL, "
                    f"{key} text NOT NULL, {defs}, PRIMARY KEY (tenant, {key}))")
        del kind
    cur.execute(f"CREATE INDEX IF NOT EXISTS beliefs_subject ON {SCHEMA}.beliefs "
                "(tenant, subject_id, predicate, status)")
    cur.execute(f"CREATE INDEX IF NOT EXISTS beliefs_object ON {SCHEMA}.beliefs "
                "(tenant, object_entity_id)")
    cur.execute(f"CREATE INDEX IF NOT EXISTS turns_session ON {SCHEMA}.turns "
                "(tenant, session_id, idx)")
    cur.execute(f"CREATE INDEX IF NOT EXISTS episodes_session ON {SCHEMA}.episodes "
                "(tenant, session_id)")


# (version, name, step(cursor, vector_type)); append, never edit a released one.
MIGRATIONS: tuple[tuple[int, str, Callable[[psycopg.Cursor[Any], str], None]], ...] = (
    (1, "turns, episodes (vectors), entities, beliefs (bi-temporal)", _create_v1),
)
LATEST = MIGRATIONS[-1][0]

_RETRYABLE_CLASSES = ("08", "40", "53", "57")  # connection, rollback, resources, operator
_SCHEMA_GONE = ("42P01", "3F000")  # undefined table, invalid schema name


class PostgresSink:
    """``MirrorSink`` over a Postgres database (see the module)."""

    name = "postgres"
    kinds = frozenset(KINDS)

    def __init__(self, url: BackendURL, password: str | None, *, pool_size: int = 4,
                 connect_timeout_s: int = 5) -> None:
        self.url = url
        self._password = password
        self._timeout = connect_timeout_s
        self.pool = ConnectionPool(self._connect, max_size=pool_size)
        self.vector_type: str | None = None
        self.schema_version: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> PostgresSink:
        url = settings.postgres_backend
        if url is None:
            raise ConfigurationError("the Postgres mirror needs MNEMO_POSTGRES_URL")
        return cls(url, settings.postgres_password, pool_size=settings.worker_threads)

    def __repr__(self) -> str:
        return f"PostgresSink({self.url.canonical})"

    def _connect(self) -> psycopg.Connection:
        kwargs = postgres_connect_kwargs(self.url, self._password,
                                         connect_timeout_s=self._timeout)
        return psycopg.connect(**kwargs)

    def _wrap(self, what: str, e: Exception) -> Exception:
        state = getattr(e, "sqlstate", None)
        detail = f"{type(e).__name__}" + (f", SQLSTATE {state}" if state else "")
        if state in _SCHEMA_GONE:  # dropped behind our back: the next open makes it again
            self.schema_version = self.vector_type = None
            state = "40000"  # retryable
        retry = (isinstance(e, psycopg.OperationalError | psycopg.InterfaceError | TimeoutError)
                 or (state or "")[:2] in _RETRYABLE_CLASSES)
        if retry:
            return MirrorUnavailable(
                f"Postgres mirror at {self.url.canonical} could not {what} ({detail}): the "
                "shipping is retried; check that the server is up and reachable")
        return MirrorError(
            f"Postgres mirror at {self.url.canonical} refused to {what} ({detail}): check the "
            "mirror database (`mnemo mirror status`) and the server log")

    # --- MirrorSink ---------------------------------------------------------------------

    def open(self) -> None:
        """Create or migrate the schema, once per sink object (``ship_changes`` calls it on
        every run); a schema dropped behind its back is made again on the next run."""
        if self.schema_version is None:
            self._run("open its schema", self._migrate)

    def apply(self, records: Sequence[Record]) -> None:
        if not records:
            return
        if self.schema_version is None:
            self.open()

        def run(conn: psycopg.Connection) -> None:
            with conn.transaction(), conn.cursor() as cur:
                self._apply(cur, records)

        self._run(f"apply a batch of {len(records)} records", run)

    def _run(self, what: str, fn: Callable[[psycopg.Connection], None]) -> None:
        """``fn`` on a pooled connection, in its own transaction. A connection that broke
        (the server restarted while it sat idle) empties the pool and ``fn`` runs once more
        on a new one: it is all or nothing and idempotent, so a second run is safe."""
        for attempt in (1, 2):
            try:
                with self.pool.connection() as conn:
                    fn(conn)
                return
            except psycopg.OperationalError as e:
                self.pool.close()
                if attempt == 2:
                    raise self._wrap(what, e) from None
            except (psycopg.Error, TimeoutError) as e:
                raise self._wrap(what, e) from None

    def close(self) -> None:
        self.pool.close()

    # --- schema ---------------------------------------------------------------------------

    def _migrate(self, conn: psycopg.Connection) -> None:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version (version integer "
                        "PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL "
                        "DEFAULT now())")
            cur.execute(f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.schema_version")
            row = cur.fetchone()
            current = int(row[0]) if row else 0
            if current > LATEST:
                raise MirrorError(
                    f"the Postgres mirror at {self.url.canonical} has schema version {current}, "
                    f"newer than this mnemo's {LATEST}: upgrade mnemo on this host")
            vector_type = self._vector_type(cur) if current == 0 else self._recorded_type(cur)
            for version, name, step in MIGRATIONS:
                if version > current:
                    step(cur, vector_type)
                    cur.execute(f"INSERT INTO {SCHEMA}.schema_version (version, name) VALUES "
                                "(%s, %s)", (version, name))
                    log.info("mirror_schema_migrated", sink=self.name, version=version,
                             url=self.url.canonical)
            self.vector_type = vector_type
            self.schema_version = max(current, LATEST)

    def _vector_type(self, cur: psycopg.Cursor[Any]) -> str:
        """``vector`` when pgvector is installed here or can be created, else ``real[]``."""
        cur.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        if cur.fetchone():
            return "vector"
        cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if not cur.fetchone():
            return "real[]"
        cur.execute("SAVEPOINT pgvector")
        try:
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege:
            cur.execute("ROLLBACK TO SAVEPOINT pgvector")
            log.warning("mirror_pgvector_not_created", sink=self.name, url=self.url.canonical,
                        fix="CREATE EXTENSION vector as a superuser, before the first ship")
            return "real[]"
        cur.execute("RELEASE SAVEPOINT pgvector")
        return "vector"

    def _recorded_type(self, cur: psycopg.Cursor[Any]) -> str:
        cur.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'vector_type'")
        row = cur.fetchone()
        found = str(row[0]) if row else "real[]"
        if found not in ("vector", "real[]"):
            raise MirrorError(f"the Postgres mirror at {self.url.canonical} records an unknown "
                              "vector type in mnemo.meta: restore it to 'vector' or 'real[]'")
        return found

    # --- apply ----------------------------------------------------------------------------

    def _apply(self, cur: psycopg.Cursor[Any], records: Sequence[Record]) -> None:
        for r in records:
            if r.kind == "tenant":
                for table in TABLES:
                    cur.execute(sql.SQL("DELETE FROM {} WHERE tenant = %s").format(
                        sql.Identifier(SCHEMA, table)), (r.tenant,))
        for kind, (table, key, cols) in COLUMNS.items():
            mine = [r for r in records if r.kind == kind]
            gone = [(r.tenant, r.key) for r in mine if r.row is None]
            if gone:
                cur.executemany(sql.SQL("DELETE FROM {} WHERE tenant = %s AND {} = %s").format(
                    sql.Identifier(SCHEMA, table), sql.Identifier(key)), gone)
            rows = [self._values(r, cols) for r in mine if r.row is not None]
            if rows:
                cur.executemany(self._upsert_sql(table, key, cols), rows)

    def _values(self, r: Record, cols: list[tuple[str, str, Callable[[Any], Any]]]
                ) -> list[Any]:
        assert r.row is not None
        values: list[Any] = [r.tenant, r.key]
        for column, _, convert in cols:
            value = r.row[column]
            if column == "vector" and value is not None:
                # As text, cast in SQL: psycopg's list dumper costs milliseconds a vector.
                inner = ",".join(map(repr, value))
                value = f"[{inner}]" if self.vector_type == "vector" else f"{{{inner}}}"
            values.append(convert(value) if value is not None else None)
        return values

    def _upsert_sql(self, table: str, key: str,
                    cols: list[tuple[str, str, Callable[[Any], Any]]]) -> sql.Composed:
        names = [c for c, _, _ in cols]
        marks = [sql.SQL("%s::{}").format(sql.SQL(self.vector_type or "real[]"))
                 if c == "vector" else sql.Placeholder() for c in names]
        target = sql.Identifier(SCHEMA, table)
        return sql.SQL(
            "INSERT INTO {t} AS m (tenant, {k}, {cols}) VALUES (%s, %s, {marks}) "
            "ON CONFLICT (tenant, {k}) DO UPDATE SET ({cols}) = ({excluded}) "
            "WHERE ({current}) IS DISTINCT FROM ({excluded})").format(
            t=target, k=sql.Identifier(key),
            cols=sql.SQL(", ").join(sql.Identifier(c) for c in names),
            marks=sql.SQL(", ").join(marks),
            excluded=sql.SQL(", ").join(sql.SQL("EXCLUDED.{}").format(sql.Identifier(c))
                                        for c in names),
            current=sql.SQL(", ").join(sql.SQL("m.{}").format(sql.Identifier(c))
                                       for c in names))
