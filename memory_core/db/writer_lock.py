"""The writers' queue across processes: an ``flock`` on a file beside each SQLite database.

SQLite's busy handler is a sleep loop: a writer that finds the write lock taken sleeps 1, 2,
5, 10, 15, 20, 25 ms... and tries again, so the lock often lies free while the waiters of
the other worker process sleep, and the threads of the process that holds it, which queue
on its in-process lock (``sqlite.write_lock``) and wake at once, take it again and again.
Measured with 2 worker processes x 8 threads on LoCoMo turns (hash embedder): the state
db's write lock was held 65 % of the time, each process's waiting writer spent half the
run asleep in the busy handler, and the pool used 1.1 of the 2 cores.

So before ``BEGIN IMMEDIATE`` a writer takes an exclusive ``flock`` on ``<db>-writer.lock``
(made next to the database on first use, never holding data): the kernel queues the
waiters of every process and wakes the next as soon as the holder lets go. A process that
dies holding it loses it with its file descriptor, so it is never stale.

It only orders writers; SQLite's own lock still guards the data. Whatever goes wrong with
it, a writer goes on without it and meets SQLite's lock as before: a lock file that cannot
be made (a read-only folder) or a file system without ``flock`` means no queue, and a wait
longer than the busy timeout (a holder stopped in a transaction) gives up on the queue, so
the write then fails with SQLite's "database is locked" after its own busy timeout, as it
always did — never a wait without end.

A ``WriterLock`` is both queues of one file in one process: the threads of the process queue
first on its ``local`` lock (they wake at once when it is let go), and only the thread
holding that takes the ``flock``, since the threads share the lock file's descriptors
(``flock`` locks belong to them). ``held`` takes the two in that order; ``sqlite.write_lock``
calls it around every write. One per file and process: a child made by ``fork`` gets its
own, so it never waits for a lock that a thread of its parent held when it forked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

SUFFIX = "-writer.lock"


@dataclass(eq=False)
class _Wait:
    """One blocking wait handed to the process's waiter thread."""

    answered: threading.Event = field(default_factory=threading.Event)
    granted: bool = False
    abandoned: bool = False


class WriterLock:
    """The writers' queues of one database file, for one process: ``local`` for its threads,
    the ``flock`` for all processes.

    Two descriptors of the lock file: the caller's thread tries ``fast`` without blocking;
    the waiter thread blocks on ``slow``. They are separate open files, so they exclude each
    other like two processes: a grant the waiter lets go (abandoned) never releases a lock a
    caller took meanwhile."""

    def __init__(self, db_path: Path) -> None:
        self.path = db_path.with_name(db_path.name + SUFFIX)
        self.local = threading.Lock()  # this process's threads queue here first
        self._fast: int | None = None
        self._slow: int | None = None
        self._held: int | None = None  # touched only by the thread holding the in-process lock
        self._broken = False
        self._mutex = threading.Lock()
        self._waits: queue.SimpleQueue[_Wait | None] = queue.SimpleQueue()
        self._waiter: threading.Thread | None = None
        self._users = 0  # open connections using it (guarded by the registry's lock)
        self._pending = 0  # waits handed to the waiter thread and not yet answered
        self._closed = False
        self.key = (str(db_path), os.getpid())  # its entry in the registry

    @contextlib.contextmanager
    def held(self, timeout_s: float) -> Iterator[None]:
        """Hold ``local``, then the ``flock``, around a write; each is waited for at most
        ``timeout_s``, then gone on without (SQLite's own lock still guards the data)."""
        local = self.local.acquire(timeout=timeout_s)
        queued = local and self.acquire(timeout_s)
        try:
            yield
        finally:
            if queued:
                self.release()
            if local:
                self.local.release()

    def acquire(self, timeout_s: float) -> bool:
        """Take the ``flock`` (the caller holds ``local``), waiting at most ``timeout_s``.
        False: go on without it (no lock file, no ``flock``, or the wait timed out)."""
        if self._broken or not self._open():
            return False
        assert self._fast is not None
        try:
            fcntl.flock(self._fast, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._held = self._fast
            return True
        except BlockingIOError:
            pass
        except OSError as e:
            return self._give_up(e)
        if self._wait(timeout_s):
            self._held = self._slow
            return True
        return False

    def release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            fcntl.flock(held, fcntl.LOCK_UN)

    def _wait(self, timeout_s: float) -> bool:
        """A blocking ``flock`` on the waiter thread (the kernel wakes it when the holder lets
        go); this thread waits for it with a timeout. An abandoned grant is let go by the
        waiter thread itself."""
        wait = _Wait()
        self._ensure_waiter()
        with self._mutex:
            self._pending += 1
        self._waits.put(wait)
        answered = wait.answered.wait(timeout_s)
        with self._mutex:
            if wait.granted or answered:  # answered without the lock: flock failed
                return wait.granted
            wait.abandoned = True
        log.warning("sqlite_writer_queue_timeout", lock=str(self.path), waited_s=timeout_s)
        return False

    def _ensure_waiter(self) -> None:
        with self._mutex:
            if self._waiter is None or not self._waiter.is_alive():
                self._waiter = threading.Thread(target=self._serve, daemon=True,
                                                name=f"mnemo-writer-lock-{self.path.name}")
                self._waiter.start()

    def _serve(self) -> None:
        while True:
            wait = self._waits.get()
            if wait is None:
                return
            assert self._slow is not None
            try:
                fcntl.flock(self._slow, fcntl.LOCK_EX)
            except OSError as e:
                self._give_up(e)  # the caller goes on without the lock
            else:
                with self._mutex:
                    if wait.abandoned:
                        fcntl.flock(self._slow, fcntl.LOCK_UN)
                    else:
                        wait.granted = True
            wait.answered.set()
            with self._mutex:
                self._pending -= 1
                if self._closed and self._pending == 0:
                    self._close_descriptors()
                    return

    def close(self) -> None:
        """Its last connection closed: let the descriptors go (at once, or when the waiter
        thread has answered its last wait) and stop the waiter thread."""
        with self._mutex:
            self._closed = True
            if self._pending == 0:
                self._close_descriptors()
                self._waits.put(None)

    def _close_descriptors(self) -> None:
        for fd in (self._fast, self._slow):
            if fd is not None:
                os.close(fd)
        self._fast = self._slow = None
        self._broken = True  # a late caller goes on without it

    def _open(self) -> bool:
        if self._fast is None:
            try:
                fast = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as e:
                return self._give_up(e)
            try:
                self._slow = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as e:
                os.close(fast)
                return self._give_up(e)
            self._fast = fast
        return True

    def _give_up(self, e: OSError) -> bool:
        if not self._broken:
            self._broken = True
            log.warning("sqlite_writer_queue_off", lock=str(self.path), error=type(e).__name__,
                        reason="writers of other processes meet SQLite's busy handler")
        return False


_locks: dict[tuple[str, int], WriterLock] = {}
_locks_guard = threading.Lock()


def writer_lock(db_path: Path) -> WriterLock:
    """This process's writers' queues for ``db_path``, for one more connection: one per file
    and process (a child made by ``fork`` gets its own, not its parent's descriptors nor its
    parent's ``local`` lock); give it back with ``forget`` when the connection closes."""
    key = (str(db_path.resolve()), os.getpid())
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = WriterLock(Path(key[0]))
        lock._users += 1
        return lock


def forget(lock: WriterLock) -> None:
    """A connection using ``lock`` closed; the last one closes its descriptors (a process
    that opens and closes many stores keeps no lock file open)."""
    with _locks_guard:
        lock._users -= 1
        if lock._users > 0:
            return
        if _locks.get(lock.key) is lock:
            del _locks[lock.key]
    lock.close()
