"""Stop taking messages while a database is read-only, full or damaged; resume after.

``StorageGuard`` is a middleware with one thread of its own. It probes ``storage_status``

- at boot, before the first messages;
- when a message fails with a storage fault (``memory_core.db.faults.fault_of``), or with a
  SQLite I/O error that names none (``io_fault``: a write refused by the kernel, EPERM on an
  immutable file, gives SQLITE_IOERR_WRITE, not SQLITE_READONLY);
- periodically while messages keep succeeding, every ``check_s`` (``MNEMO_STORAGE_CHECK_S``)
  or, when one probe took longer (``quick_check`` reads the whole file), every 100 times
  the CPU time the last probe took: the probe costs at most 1% of one thread's CPU, however
  big the databases grow (time waiting for the disk on a cold cache is not counted: it is
  not taken from the worker threads). A database damaged in pages no message touches is
  found this way;
- every ``interval_s`` (``MNEMO_STORAGE_RETRY_S``) while paused.

A probe that finds a database read-only, full or damaged pauses the Dramatiq Worker
(consumers stop fetching, worker threads stop taking work after their current message),
logs one ``storage_paused`` line naming the database, its state and the fix (never a
message's content), and the Worker resumes (``storage_resumed``) once every database is
``ok``. Pausing runs on the guard's thread because ``Worker.pause`` waits for every worker
thread to notice, which a worker thread cannot do for itself.

Messages already handed to this process wait, leased, until the resume; their leases run
out when the ops database cannot be written, and another process may take them (actors are
idempotent). ``StorageGuard.state()`` goes into the worker's heartbeat (``workers.middleware.
Heartbeats``, which also beats at once when the guard pauses or resumes), so `mnemo health`
reports the paused worker and `mnemo health --worker --ready` fails while it is paused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from dramatiq.broker import Broker, MessageProxy
from dramatiq.middleware import Middleware

from memory_core.db.faults import (
    DAMAGED,
    FULL,
    READONLY,
    StorageStatus,
    fault_of,
    fix_for,
    io_fault,
)
from memory_core.db.stores import reopen_connections

log = structlog.get_logger("mnemo.worker")

Probe = Callable[[], dict[str, StorageStatus]]

FAULTS = (READONLY, FULL, DAMAGED)
PROBE_BUDGET = 0.01  # the periodic probe's share of one thread's time, at most
IO = "io"  # a message met an I/O error naming no fault: probe now, pause only if it finds one


class StorageGuard(Middleware):
    """Pauses the Worker on a storage fault and resumes it when ``probe`` finds none."""

    def __init__(self, probe: Probe, *, interval_s: float = 5.0, check_s: float | None = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.probe = probe
        self.interval_s = interval_s  # while paused
        self.check_s = check_s  # while running (None: only at boot and on a failed message)
        self.clock = clock
        self._next_check = 0.0  # when the next periodic probe is due (clock())
        self.last_cost_s = 0.0  # CPU seconds the last probe took (this thread's time)
        self._worker: Any = None
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._tripped: str | None = None
        self._paused = False
        self._reported: str | None = None  # the fault a message met, for state()
        self._last: dict[str, StorageStatus] = {}
        self._listeners: list[Callable[[], None]] = []

    # -- Dramatiq hooks -------------------------------------------------------------------

    def after_worker_boot(self, broker: Broker, worker: Any) -> None:
        self._worker = worker
        self._tripped = "boot"  # probe once before the first messages
        self._thread = threading.Thread(target=self._run, name="mnemo-storage-guard",
                                        daemon=True)
        self._thread.start()

    def before_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, self.interval_s))

    def after_process_message(self, broker: Broker, message: MessageProxy, *,
                              result: Any = None, exception: BaseException | None = None
                              ) -> None:
        fault = fault_of(exception) or (IO if io_fault(exception) else None)
        if fault is not None:
            with self._lock:
                self._tripped = self._tripped or fault
            self._wake.set()

    # -- state ----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """``{"paused": bool, "databases": {kind: state}, "reported": fault | None}`` as last
        probed; ``reported`` is the fault a message met when the probe finds none."""
        with self._lock:
            return {"paused": self._paused,
                    "databases": {k: s.state for k, s in self._last.items()},
                    "reported": self._reported if self._paused else None}

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on the guard's thread) after each pause and resume."""
        self._listeners.append(listener)

    # -- the guard's thread ---------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                due, self._tripped = self._tripped, None
                paused = self._paused
            periodic = self.check_s is not None and self.clock() >= self._next_check
            if due is not None or paused or periodic:
                started = time.thread_time()  # what the probe takes from the workers: CPU
                self.check(reported=due)
                self.last_cost_s = time.thread_time() - started
                if self.check_s is not None:
                    self._next_check = self.clock() + self.period_s()
            with self._lock:
                paused = self._paused
            wait = self.interval_s
            if not paused:
                wait = (max(0.0, self._next_check - self.clock()) if self.check_s is not None
                        else self.interval_s)
            self._wake.wait(wait)
            self._wake.clear()

    def period_s(self) -> float:
        """Seconds from one periodic probe to the next: ``check_s``, or 100 times what the
        last probe cost when that is longer (the probe's share stays under 1%)."""
        return max(self.check_s or 0.0, self.last_cost_s / PROBE_BUDGET)

    def check(self, reported: str | None = None) -> bool:
        """Probe now; pause or resume the Worker to match. True when all is ok.

        ``reported``: the fault a message met (or ``boot``, or ``io`` for an I/O error that
        names no fault). A message's fault that the probe cannot see (a lock-step race, a
        fault that cleared) still pauses for one interval; an ``io`` error pauses only when
        the probe finds a fault.
        """
        try:
            statuses = self.probe()
        except Exception as e:  # a probe that cannot run is no proof the storage is fine
            log.warning("storage_probe_failed", error=type(e).__name__)
            return False
        # A missing file is not a fault here: the worker migrated at start, and a worker
        # whose actors use one database only may run before the other exists.
        bad = [s for s in statuses.values() if s.state in FAULTS]
        with self._lock:
            self._last = statuses
            paused = self._paused
        if bad or (reported in FAULTS and not paused):
            if not paused:
                self._pause(bad, reported)
            return False
        if paused:
            reopen_connections()  # those opened during the fault are read-only for good
            self._worker.resume()
            log.info("storage_resumed")
            self._set_paused(False)
        return True

    def _pause(self, bad: list[StorageStatus], reported: str | None) -> None:
        # Said first: Worker.pause stops the worker threads after their current message at
        # once, but waits for each consumer to see an empty fetch, which a steady stream of
        # messages can put off for seconds.
        if bad:  # one line for the whole pause, whatever the number of databases at fault
            first = bad[0]
            log.error("storage_paused", databases={s.kind: s.state for s in bad},
                      path=str(first.path), detail=first.detail, fix=first.fix)
        else:
            log.error("storage_paused", databases={}, reported=reported,
                      detail="a message met this fault; the probe finds none now",
                      fix=fix_for(reported or "", self._any_path()))
        self._set_paused(True, reported)
        self._worker.pause()

    def _any_path(self) -> str:
        """A database path the probe saw (its folder is the data dir), for a fix's wording."""
        with self._lock:
            paths = [str(s.path) for s in self._last.values()]
        return paths[0] if paths else "MNEMO_DATA_DIR/memory_ops.db"

    def _set_paused(self, paused: bool, reported: str | None = None) -> None:
        with self._lock:
            self._paused = paused
            self._reported = reported
        for listener in self._listeners:
            try:
                listener()
            except Exception as e:  # a listener (a heartbeat) never stops the guard
                log.warning("storage_listener_failed", error=type(e).__name__)


def storage_guard_of(broker: Broker) -> StorageGuard | None:
    """The broker's StorageGuard, if it has one (for a heartbeat's ``storage`` field)."""
    for middleware in broker.middleware:
        if isinstance(middleware, StorageGuard):
            return middleware
    return None
