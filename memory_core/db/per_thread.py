"""One connection per thread, for both state stores (SQLite ``Database``, Postgres
``PgDatabase``): opened on first use, replaced when stale, all closed together.

A thread's connection is replaced only outside a transaction, so a unit of work keeps the
connection it began with to its commit. The replaced one is closed by its thread once no
caller holds it any more: the replacement can be asked for at any point of another
function's work, which may still be using the old connection.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class _Connection(Protocol):
    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


C = TypeVar("C", bound=_Connection)

# The references to a retired connection that no caller holds: ``_close_retired``'s name
# for it, ``_all`` and ``sys.getrefcount``'s own argument.
_UNHELD_REFS = 3


def _never(_conn: object) -> bool:
    return False


def _first_generation() -> int:
    return 0


class ThreadConnections(Generic[C]):
    """One connection per thread from ``connect``, opened on first use.

    ``generation()``: a number that, once changed, replaces every thread's connection at its
    next use outside a transaction (SQLite's ``reopen_connections``). ``broken(conn)``: a
    connection to replace at once (a Postgres connection its server ended: psycopg reports
    its transaction state as unknown, so waiting for the transaction to end kept the
    thread on the dead connection for good).
    """

    def __init__(self, connect: Callable[[], C], *,
                 generation: Callable[[], int] = _first_generation,
                 broken: Callable[[C], bool] = _never) -> None:
        self._connect = connect
        self._generation = generation
        self._broken = broken
        self._local = threading.local()
        self._all: list[C] = []
        self._lock = threading.Lock()

    def get(self) -> C:
        """This thread's connection."""
        local = self._local
        conn: C | None = getattr(local, "conn", None)
        if conn is not None and (self._broken(conn) or (
                not conn.in_transaction and local.generation != self._generation())):
            local.retired.append(conn)
            conn = None
        if conn is None:
            local.generation = self._generation()
            conn = self._connect()
            local.conn = conn
            local.retired = getattr(local, "retired", [])
            with self._lock:
                self._all.append(conn)
        if local.retired:
            self._close_retired()
        return conn

    def _close_retired(self) -> None:
        """Close this thread's replaced connections that no caller holds any more."""
        retired: list[C] = self._local.retired
        kept = []
        while retired:
            conn = retired.pop()
            if sys.getrefcount(conn) > _UNHELD_REFS:
                kept.append(conn)
                continue
            with self._lock:
                self._all.remove(conn)
            conn.close()
        retired.extend(kept)

    def close(self) -> None:
        """Close every connection handed out (a thread's next ``get`` opens a new one)."""
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
        self._local = threading.local()
