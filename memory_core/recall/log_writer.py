"""The recall log's database writes, off the chat path.

``Memory.recall`` builds the explanation's JSON on its own thread (``explain``: ~0.3 ms
for ~130 candidates) and hands it to this writer; a background thread inserts it and trims
the tenant to its newest ``keep`` rows. SQLite releases the GIL while it writes, so the
caller does not wait for the write, nor for the disk when the machine's I/O is slow (side by
side at 100k memories: p50 7.12 -> 6.91 ms, p95 9.09 -> 8.21 ms). Building the JSON here
instead is slower for the next recall: Python on this thread holds the GIL while the
caller's thread wants it back from each SQLite call (back to back at 100k, p95 9.9-11.8 ms
built by the caller against 12.5-14.0 here).

Ids are given at ``submit``: the time in milliseconds shifted left 22 bits plus 22 random
bits, increasing within a process, so the log stays in time order across the chat
processes sharing one ops db. Two processes pick the same id only if they recall in the
same millisecond and draw the same 22 bits (about one in four million); that row, like one
that cannot be written, is skipped with a warning: recall never fails or waits for its
log. When ``max_pending`` rows are waiting (the ops db is stuck), new ones are dropped the
same way. ``flush`` waits for what was submitted (the CLI does before it reads the log
back); ``close`` flushes and stops.
"""

from __future__ import annotations

import queue
import secrets
import threading
import time

import structlog

from memory_core.db.checkpoint import WalCheckpointer
from memory_core.db.sqlite import sqlite_module
from memory_core.db.stores import Database
from memory_core.recall.explain import write_recall_log

log = structlog.get_logger(__name__)
RANDOM_BITS = 22
_STOP = None


class RecallLogWriter:
    """One background thread writing one ``Memory``'s recall-log rows."""

    def __init__(self, db: Database, keep: int, *, max_pending: int = 1000) -> None:
        self.db = db
        self.keep = keep
        self._queue: queue.Queue[tuple[int, str, str, str, str] | None] = queue.Queue(
            maxsize=max_pending)
        # The writes never pay for a WAL checkpoint: this thread does them in the background.
        self._checkpointer = WalCheckpointer(db)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._last_id = 0
        self._closed = False

    def next_id(self) -> int:
        with self._lock:
            new = (time.time_ns() // 1_000_000) << RANDOM_BITS | secrets.randbits(RANDOM_BITS)
            self._last_id = max(new, self._last_id + 1)
            return self._last_id

    def submit(self, tenant: str, query_digest: str, strategy: str, body: str) -> int | None:
        """Queue one row (``body``: the explanation's JSON); returns its id, or None when
        it was dropped (too many waiting, or closed)."""
        if self._closed:
            return None
        log_id = self.next_id()
        try:
            self._queue.put_nowait((log_id, tenant, query_digest, strategy, body))
        except queue.Full:
            log.warning("recall_log_dropped", tenant=tenant, reason="too many rows waiting")
            return None
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="mnemo-recall-log")
                    self._thread.start()
        return log_id

    def flush(self) -> None:
        """Wait until every submitted row is written (or skipped)."""
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join(timeout=30)
        self._checkpointer.stop()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                log_id, tenant, query_digest, strategy, body = item
                try:
                    write_recall_log(self.db.conn, tenant, query_digest, strategy, body,
                                     self.keep, log_id=log_id)
                    self._checkpointer.note_write()
                except sqlite_module().Error as e:  # an id another process took, a stuck db
                    log.warning("recall_log_failed", tenant=tenant, error=type(e).__name__)
            finally:
                self._queue.task_done()

