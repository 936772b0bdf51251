"""A background WAL checkpointer for latency-critical writers.

A connection opened with ``autocheckpoint=False`` never pays for a checkpoint (which copies and
fsyncs pages: milliseconds) inside a write; this thread checkpoints for it instead. Durability
is unchanged: a commit is durable in the WAL (``synchronous=NORMAL``) whoever checkpoints
later, and a PASSIVE checkpoint is what SQLite's automatic one does.

The worker processes' state db (``workers.context``): with the checkpoint inside the commit,
``memory_state.db``'s write lock was held ~1 ms per turn longer (1.3 of 2.8 ms of SQL per turn,
``bench/pipeline.py``), and that lock is what bounds the whole pool.
"""

from __future__ import annotations

import threading

import structlog

from memory_core.db.sqlite import sqlite_module
from memory_core.db.stores import Database

log = structlog.get_logger(__name__)


class WalCheckpointer(threading.Thread):
    """Checkpoints the WAL of a database whose writer connections do not (PASSIVE: never
    blocks them), at most every ``interval_s`` and only after writes. Started on the first
    write; a failure is logged and retried on the next round.

    ``watch=True``: writes need not be noted (``note_write``): every round it checks the
    database's ``data_version`` (it changes with any other connection's commit, of any
    process) and checkpoints when it moved. For a process whose writes happen all over (the
    workers); start it with ``start()``."""

    def __init__(self, db: Database, interval_s: float = 0.5, *, watch: bool = False) -> None:
        super().__init__(name="mnemo-wal-checkpoint", daemon=True)
        self.db = db
        self.interval_s = interval_s
        self.watch = watch
        self.dirty = threading.Event()
        self.stopped = threading.Event()
        self._start_lock = threading.Lock()

    def note_write(self) -> None:
        self.dirty.set()
        if self.ident is None:
            with self._start_lock:
                if self.ident is None and not self.stopped.is_set():
                    self.start()

    def run(self) -> None:
        conn = self.db.connect()  # its own connection, closed on exit
        seen = None
        try:
            while not self.stopped.wait(self.interval_s):
                if self.watch:
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    if version != seen:
                        seen = version
                        self.dirty.set()
                if self.dirty.is_set():
                    self.dirty.clear()
                    try:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    except sqlite_module().Error as e:
                        log.warning("wal_checkpoint_failed", error=type(e).__name__)
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopped.set()
        if self.ident is not None:
            self.join(timeout=5)
