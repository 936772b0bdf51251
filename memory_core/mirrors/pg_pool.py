"""A small psycopg connection pool for the Postgres mirror.

Why not ``psycopg_pool``: it is not in mnemo's dependency set, and the mirror needs only this
much — a worker process ships one batch per thread at a time, so the pool hands out at most
``max_size`` connections, keeps the idle ones for the next batch, and discards any connection
that broke or was left inside a transaction. No background thread, no health-check loop:
a broken idle connection is found by the next use, whose error makes the batch retry.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import psycopg
from psycopg import pq


class ConnectionPool:
    def __init__(self, connect: Callable[[], psycopg.Connection], max_size: int = 4) -> None:
        self._connect = connect
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_size)

    @contextlib.contextmanager
    def connection(self, timeout_s: float = 30.0) -> Iterator[psycopg.Connection]:
        """A connection for the block; returned to the pool when the block ends cleanly and
        the connection is idle, closed otherwise. Raises TimeoutError when all are in use."""
        if not self._slots.acquire(timeout=timeout_s):
            raise TimeoutError("all mirror connections are in use")
        conn: psycopg.Connection | None = None
        try:
            with self._lock:
                while self._idle and conn is None:
                    candidate = self._idle.pop()
                    if candidate.closed:
                        continue
                    conn = candidate
            if conn is None:
                conn = self._connect()
            ok = False
            try:
                yield conn
                ok = True
            finally:
                keep = (ok and not conn.closed
                        and conn.info.transaction_status == pq.TransactionStatus.IDLE)
                if keep:
                    with self._lock:
                        self._idle.append(conn)
                else:
                    conn.close()
        finally:
            self._slots.release()

    def close(self) -> None:
        """Close the idle connections (the pool stays usable: it connects again)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

