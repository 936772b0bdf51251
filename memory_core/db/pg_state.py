"""The state store on PostgreSQL (``MNEMO_STATE_BACKEND=postgres``): a connection adapter
that speaks the subset of the ``sqlite3`` API the state code uses.

``PgConnection`` has ``execute``/``executemany`` (returning a cursor with ``fetchone``,
``fetchall``, iteration, ``rowcount``, ``lastrowid``, ``description``) and
``in_transaction``; every statement goes through ``dialect.to_postgres``. It is in autocommit
mode, as the SQLite connections are: ``db.sqlite.atomic`` opens write transactions with
``begin_write``, which takes transaction-scoped advisory locks (``write_lock_sql``):

- a write that names its tenants (``atomic(conn, tenants=...)``: the write path, deletion)
  takes the store lock (``WRITE_LOCK_KEY``) *shared*, then each tenant's own lock
  (``tenant_lock_key``, a stable 64-bit hash) exclusively, in ascending key order. Writers of
  one tenant take turns, as on one SQLite file, so the belief rules see one serial order per
  tenant — and every rule reads and writes one tenant's rows, so applying turns in any order
  on any number of workers still gives the beliefs one worker gives. Writers of different
  tenants run at once;
- any other write (``BEGIN IMMEDIATE``: maintenance over all tenants, reconsolidation
  partitions, the outbox horizon, restore) takes the store lock *exclusively*: it waits for
  the tenant writers in flight and holds back new ones.

Every transaction takes the store lock first and tenant locks in one ascending order, and
never adds a lock later (``require_held``), so two writers cannot deadlock on them.
``COMMIT`` first writes the full-text postings of the rows the transaction changed
(``pg_fts.flush``: the tokens are made in Python, exactly as for SQLite). Savepoints work as
in SQLite.

Rows with an ``id`` (``ID_TABLES``) get it from a bigint identity; an ``INSERT`` into one of
them returns it (``RETURNING id``), which is the cursor's ``lastrowid``. NUMERIC results
(``sum`` of integers) come back as ``int`` when whole, else ``float``, and booleans are sent
as 0/1, as SQLite does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import Loader

from memory_core.db import dialect
from memory_core.db.dialect import ID_TABLES, SCHEMA, is_postgres
from memory_core.errors import StoreError

__all__ = ["ID_TABLES", "SCHEMA", "WRITE_LOCK_KEY", "PgConnection", "PgCursor",
           "is_postgres", "tenant_lock_key", "write_lock_sql"]

WRITE_LOCK_KEY = 0x6D6E656D6F5752  # the store lock ("mnemoWR"): shared by tenant writers


def tenant_lock_key(tenant: str) -> int:
    """The advisory lock key of ``tenant``: the first 8 bytes of its blake2b, signed (a
    bigint). Stable across processes and versions; a collision only makes two tenants take
    turns."""
    digest = hashlib.blake2b(tenant.encode(), digest_size=8, person=b"mnemo-tenant").digest()
    return int.from_bytes(digest, "big", signed=True)


def write_lock_sql(tenants: Iterable[str] | None) -> str:
    """The statement that takes a write transaction's advisory locks (see the module):
    literal integers only, so it can go in one round trip with ``BEGIN``."""
    if tenants is None:
        return f"SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})"
    keys = sorted({tenant_lock_key(t) for t in tenants})
    # A SELECT list is evaluated left to right: the store lock, then the tenants in order.
    locks = [f"pg_advisory_xact_lock_shared({WRITE_LOCK_KEY})"]
    locks += [f"pg_advisory_xact_lock({k})" for k in keys]
    return "SELECT " + ", ".join(locks)


class _NumericLoader(Loader):
    """NUMERIC as SQLite would return it: an int when whole, else a float."""

    def load(self, data: Any) -> Any:
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


class PgCursor:
    """What ``execute`` returns: the ``sqlite3.Cursor`` subset the state code reads."""

    def __init__(self, cur: psycopg.Cursor[Any], lastrowid: int | None = None) -> None:
        self._cur = cur
        self.lastrowid = lastrowid

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    @property
    def description(self) -> Any:
        return self._cur.description

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._cur.fetchone() if self._cur.description is not None else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._cur.fetchall() if self._cur.description is not None else []

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        return self._cur.fetchmany(size) if self._cur.description is not None else []

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._cur.close()


def _args(params: Any) -> Any:
    if isinstance(params, dict):
        return {k: int(v) if isinstance(v, bool) else v for k, v in params.items()}
    return [int(a) if isinstance(a, bool) else a for a in params]


class PgConnection:
    """A psycopg connection behind the ``sqlite3.Connection`` subset the state code uses."""

    dialect = "postgres"

    def __init__(self, raw: psycopg.Connection[Any], *, readonly: bool = False) -> None:
        self.raw = raw
        self.readonly = readonly
        self.held: frozenset[str] | None = None  # the open write's tenants; None: the store
        raw.adapters.register_loader("numeric", _NumericLoader)

    def begin_write(self, tenants: Iterable[str] | None) -> None:
        """Open a write transaction holding the locks for ``tenants`` (None: the whole
        store), in one round trip."""
        self.held = None if tenants is None else frozenset(tenants)
        self.raw.execute(f"BEGIN; {write_lock_sql(self.held)}")

    def require_held(self, tenants: Iterable[str]) -> None:
        """Refuse a savepoint writing a tenant the open transaction did not lock: taking its
        lock now could deadlock (locks are taken up front, in one order)."""
        if self.held is not None and not self.held.issuperset(tenants):
            raise StoreError(
                f"a write for {len(set(tenants) - self.held)} more tenant(s) inside a "
                "transaction locked for others: name every tenant when it begins (a bug in "
                "mnemo)")

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        head = sql.lstrip()[:16].upper()
        if head.startswith("COMMIT") and not self.readonly:  # a reader has nothing to index
            from memory_core.db import pg_fts  # the postings of this transaction's rows

            pg_fts.flush(self)
        elif head.startswith("BEGIN IMMEDIATE"):
            self.begin_write(None)  # a write that named no tenant: the whole store
            return PgCursor(self.raw.cursor())
        r, args = dialect.to_postgres(sql, params)
        text = r.sql
        returning = (r.insert_table in ID_TABLES and "RETURNING" not in text.upper())
        if returning:
            text += " RETURNING id"
        cur = self.raw.cursor()
        cur.execute(text, _args(args))
        lastrowid = None
        if returning:
            row = cur.fetchone()
            lastrowid = int(row[0]) if row else None
        return PgCursor(cur, lastrowid)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> PgCursor:
        rows = list(seq)
        r, _ = dialect.to_postgres(sql, None)
        cur = self.raw.cursor()
        if rows:
            batch = [_args(dialect.to_postgres(sql, p)[1]) for p in rows]
            cur.executemany(r.sql, batch)
        return PgCursor(cur)

    def create_function(self, *args: Any, **kwargs: Any) -> None:
        """SQLite's user functions have no use here (the postings are made at commit)."""

    def close(self) -> None:
        self.raw.close()

    @property
    def closed(self) -> bool:
        return self.raw.closed
