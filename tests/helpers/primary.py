"""The Postgres primary in tests: fresh databases on a real server, stores over them, and a
reset between hypothesis examples (a new database per example would take most of the time).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from memory_core.backends import BackendURL
from memory_core.db.pg_state import SCHEMA
from memory_core.db.pg_store import PgDatabase
from memory_core.embedders import HashEmbedder
from memory_core.model.tenants import create_tenant
from memory_core.vectors import VectorIndex
from tests.helpers.memory import Store
from tests.helpers.postgres import fresh_database

KEEP_META = ("kind", "vector_type", "fts_tokens")


@contextlib.contextmanager
def fresh_databases(server: BackendURL, n: int, *,
                    icu_locale: str | None = None) -> Iterator[list[BackendURL]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(fresh_database(server, prefix="mnemo_primary",
                                                  icu_locale=icu_locale))
               for _ in range(n)]


def reset(db: PgDatabase) -> None:
    """Empty every table of the primary's schema (the schema itself stays)."""
    raw = db.conn.raw
    for (name,) in raw.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s AND "
                               "tablename LIKE '%%\\_vec\\_g%%'", (SCHEMA,)).fetchall():
        raw.execute(f"DROP TABLE {name}")  # the next store may embed with another dimension
    tables = [r[0] for r in raw.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename NOT IN "
        "('meta', 'schema_migrations')", (SCHEMA,)).fetchall()]
    if tables:
        raw.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    raw.execute("DELETE FROM meta WHERE key <> ALL(%s)", (list(KEEP_META),))


def make_pg_store(url: BackendURL, tenants: tuple[str, ...] = ("t1",), dim: int = 32,
                  db: PgDatabase | None = None) -> Store:
    """A tenant-ready store on the primary at ``url`` (``db``: reuse and reset that one)."""
    if db is None:
        db = PgDatabase(url, None)
        db.migrate()
    else:
        reset(db)
    for tenant in tenants:
        create_tenant(db.conn, tenant)
    index = VectorIndex(HashEmbedder(dim=dim))
    index.ensure(db.conn)
    return Store(db, index)  # type: ignore[arg-type]


def rows(db: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in db.conn.execute(sql, params).fetchall()]


def write_turn_in_child(url: BackendURL, tenant: str, turn_uid: str, pids: Any) -> None:
    """A separate process's writer (``multiprocessing`` target): put its server pid on
    ``pids``, then write one turn of ``tenant`` through the write path."""
    from memory_core.model.turns import TurnInput
    from memory_core.write.pipeline import process_turns
    from tests.helpers.memory import day

    db = PgDatabase(url, None)
    try:
        pids.put(db.conn.raw.info.backend_pid)
        process_turns(db, VectorIndex(HashEmbedder(dim=32)),  # type: ignore[arg-type]
                      [TurnInput(tenant, "s1", turn_uid, "user", "I live in Lisbon", day(2))])
    finally:
        db.close()
