"""Heartbeats: each worker and scheduler process says it is alive in ``memory_ops.db``.

A process's row (``heartbeats``) is written by a timer thread (``Heartbeater``) every
``MNEMO_HEARTBEAT_INTERVAL_S``, never per message: what the hot path does is bump in-memory
counters (``Counters``), which the next beat writes. A clean shutdown marks the row stopped
(``stopped_at``); a killed process's row simply stops being renewed and goes stale, which is
what ``mnemo health`` and the liveness probes look for. Rows not renewed for
``MNEMO_HEARTBEAT_KEEP_S`` are deleted by the next beat of any process, so dead processes do
not haunt the health report for ever.

A worker's ``detail`` carries its StorageGuard's state (``{"storage": {"paused": ...,
"databases": {kind: state}, "reported": ...}}``): ``Heartbeat.paused_reason`` reads it, so
`mnemo health` can say "worker X paused: state db full". A paused worker is alive (it beats)
but not ready. The guard nudges the heartbeat when it pauses or resumes; on a database that
refuses the beat itself (the ops db read-only or full) the row goes stale instead, and the
``ops_db`` check says why.

Writing a beat is one short transaction; a beat that fails (a locked or read-only file) is
logged by its error type and retried at the next interval: a heartbeat never stops a worker.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog

from memory_core.clock import from_db, to_db, utcnow
from memory_core.db.sqlite import Connection, atomic
from memory_core.db.stores import Database

log = structlog.get_logger("mnemo.heartbeat")

WORKER, SCHEDULER = "worker", "scheduler"

_UPSERT = (
    "INSERT INTO heartbeats (process_id, role, host, pid, started_at, last_seen_at, queues, "
    "last_message_at, processed, failed, stopped_at, detail) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (process_id) DO UPDATE SET last_seen_at = excluded.last_seen_at, "
    "queues = excluded.queues, last_message_at = excluded.last_message_at, "
    "processed = excluded.processed, failed = excluded.failed, "
    "stopped_at = excluded.stopped_at, detail = excluded.detail"
)
_COLUMNS = ("process_id, role, host, pid, started_at, last_seen_at, queues, last_message_at, "
            "processed, failed, stopped_at, detail")


def new_process_id() -> str:
    """host:pid:random: unique even when a pid is reused after a restart."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class Counters:
    """What the hot path updates (under a lock, in memory) and the next beat writes."""

    processed: int = 0
    failed: int = 0
    last_message_at: datetime | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, at: datetime, *, failed: bool) -> None:
        with self._lock:
            self.processed += 1
            self.failed += int(failed)
            self.last_message_at = at

    def snapshot(self) -> tuple[int, int, datetime | None]:
        with self._lock:
            return self.processed, self.failed, self.last_message_at


@dataclass(frozen=True)
class Heartbeat:
    """One row of ``heartbeats``."""

    process_id: str
    role: str
    host: str
    pid: int
    started_at: datetime
    last_seen_at: datetime
    queues: tuple[str, ...] = ()
    last_message_at: datetime | None = None
    processed: int = 0
    failed: int = 0
    stopped_at: datetime | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def age_s(self, now: datetime) -> float:
        """Seconds since the last beat; 0 for a beat written after ``now`` was read (a
        probe's clock read races the beat it reads: "-0.0 s old")."""
        return max(0.0, (now - self.last_seen_at).total_seconds())

    def paused_reason(self) -> str | None:
        """Why this worker takes no messages ("state db full"), or None when it does."""
        storage = self.detail.get("storage") or {}
        if not storage.get("paused"):
            return None
        bad = [f"{kind} db {state}" for kind, state in sorted(storage.get("databases", {}).items())
               if state not in ("ok", "missing")]
        if bad:
            return ", ".join(bad)
        return f"a message met a {storage.get('reported') or 'storage'} fault"

    def is_fresh(self, now: datetime, stale_s: float) -> bool:
        """Running (not stopped) and renewed within ``stale_s`` seconds of ``now``."""
        return self.stopped_at is None and self.age_s(now) <= stale_s

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.__dict__)
        out["queues"] = list(self.queues)
        for name in ("started_at", "last_seen_at", "last_message_at", "stopped_at"):
            out[name] = None if out[name] is None else to_db(out[name])
        return out


def _time(text: str | None) -> datetime | None:
    return None if text is None else from_db(text)


def _row(r: Sequence[Any]) -> Heartbeat:
    return Heartbeat(r[0], r[1], r[2], int(r[3]), from_db(r[4]), from_db(r[5]),
                     tuple(json.loads(r[6])) if r[6] else (), _time(r[7]), int(r[8]),
                     int(r[9]), _time(r[10]), json.loads(r[11]) if r[11] else {})


def write(conn: Connection, beat: Heartbeat, *, prune_before: datetime | None = None) -> None:
    """Insert or renew ``beat``'s row; delete rows last seen before ``prune_before``."""
    with atomic(conn) as c:
        c.execute(_UPSERT, (
            beat.process_id, beat.role, beat.host, beat.pid, to_db(beat.started_at),
            to_db(beat.last_seen_at), json.dumps(list(beat.queues)),
            None if beat.last_message_at is None else to_db(beat.last_message_at),
            beat.processed, beat.failed,
            None if beat.stopped_at is None else to_db(beat.stopped_at),
            json.dumps(beat.detail, sort_keys=True) if beat.detail else None))
        if prune_before is not None:
            c.execute("DELETE FROM heartbeats WHERE last_seen_at < ?", (to_db(prune_before),))


def read_all(conn: Connection, role: str | None = None) -> list[Heartbeat]:
    """Every heartbeat (of ``role``), newest first."""
    where, args = ("WHERE role = ?", (role,)) if role else ("", ())
    rows = conn.execute(f"SELECT {_COLUMNS} FROM heartbeats {where} "
                        "ORDER BY last_seen_at DESC", args).fetchall()
    return [_row(r) for r in rows]


class Heartbeater:
    """A daemon thread renewing one process's heartbeat every ``interval_s``.

    ``queues`` and ``detail`` are callables read at each beat (a worker's queues are known
    only once its actors are declared; a scheduler's leadership changes). ``clock``: tests.
    """

    def __init__(self, db: Database, role: str, *, interval_s: float, keep_s: float,
                 counters: Counters | None = None,
                 queues: Callable[[], Sequence[str]] = tuple,
                 detail: Callable[[], dict[str, Any]] = dict,
                 clock: Callable[[], datetime] = utcnow,
                 process_id: str | None = None) -> None:
        self.db = db
        self.role = role
        self.interval_s = interval_s
        self.keep = timedelta(seconds=keep_s)
        self.counters = counters or Counters()
        self.queues = queues
        self.detail = detail
        self.clock = clock
        self.process_id = process_id or new_process_id()
        self.started_at = clock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def current(self, *, stopped: bool = False) -> Heartbeat:
        now = self.clock()
        processed, failed, last = self.counters.snapshot()
        return Heartbeat(self.process_id, self.role, socket.gethostname(), os.getpid(),
                         self.started_at, now, tuple(sorted(self.queues())), last, processed,
                         failed, now if stopped else None, self.detail())

    def beat(self, *, stopped: bool = False) -> bool:
        """Write one beat now; False (and a log line) when the database refused it."""
        beat = self.current(stopped=stopped)
        try:
            write(self.db.conn, beat, prune_before=beat.last_seen_at - self.keep)
        except Exception as e:  # a beat must never take its process down
            log.warning("heartbeat_write_failed", role=self.role, error=type(e).__name__)
            return False
        return True

    def nudge(self) -> None:
        """Beat now (on the timer thread) rather than at the next interval: what ``detail``
        says has changed."""
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.beat()

    def start(self) -> None:
        """Beat once now, then every ``interval_s`` in a daemon thread."""
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"mnemo-heartbeat-{self.role}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and mark the row stopped (a clean shutdown)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 5)
        self.beat(stopped=True)
