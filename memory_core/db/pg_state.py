"""The state store on PostgreSQL (``MNEMO_STATE_BACKEND=postgres``): a connection adapter
that speaks the subset of the ``sqlite3`` API the state code uses.

``PgConnection`` has ``execute``/``executemany`` (returning a cursor with ``fetchone``,
``fetchall``, iteration, ``rowcount``, ``lastrowid``, ``description``) and
``in_transaction``; every statement goes through ``dialect.to_postgres``. It is in autocommit
mode, as the SQLite connections are: ``db.sqlite.atomic`` opens transactions with ``BEGIN
IMMEDIATE``, which here is ``BEGIN`` plus the store's write lock (``WRITE_LOCK_KEY``, a
transaction-scoped advisory lock): writers take turns as they do on one SQLite file, so the
belief rules see the same serial order on every host — applying turns in any order on any
number of workers gives the beliefs one worker gives. ``COMMIT`` first writes the full-text
postings of the rows the transaction changed (``pg_fts.flush``: the tokens are made in
Python, exactly as for SQLite). Savepoints work as in SQLite.

Rows with an ``id`` (``ID_TABLES``) get it from a bigint identity; an ``INSERT`` into one of
them returns it (``RETURNING id``), which is the cursor's ``lastrowid``. NUMERIC results
(``sum`` of integers) come back as ``int`` when whole, else ``float``, and booleans are sent
as 0/1, as SQLite does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import Loader

from memory_core.db import dialect
from memory_core.db.dialect import ID_TABLES, SCHEMA, is_postgres

__all__ = ["ID_TABLES", "SCHEMA", "WRITE_LOCK_KEY", "PgConnection", "PgCursor",
           "is_postgres"]

WRITE_LOCK_KEY = 0x6D6E656D6F5752  # pg_advisory_xact_lock: one writer at a time ("mnemoWR")


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
        raw.adapters.register_loader("numeric", _NumericLoader)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        head = sql.lstrip()[:8].upper()
        if head.startswith("COMMIT"):
            from memory_core.db import pg_fts  # the postings of this transaction's rows

            pg_fts.flush(self)
        r, args = dialect.to_postgres(sql, params)
        text = r.sql
        returning = (r.insert_table in ID_TABLES and "RETURNING" not in text.upper())
        if returning:
            text += " RETURNING id"
        cur = self.raw.cursor()
        cur.execute(text, _args(args))
        if head.startswith("BEGIN") and "IMMEDIATE" in sql.upper():
            self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
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
