"""Firing a window: claim it, record it, enqueue its job. Nothing else happens here.

``Firer`` holds no clock: every method takes ``now``, so tests step through fire times.

- ``fire_current(schedule, now)``: what an APScheduler firing does. The window ``now`` falls
  in is claimed (a lease named ``window:<key>`` held for ``claim_ttl_s``, through the
  ``Leases`` store: ``memory_ops.db``, or Redis when Redis is the broker); the winner records
  a ``claimed`` ledger row and sends the job's message, whose id is derived from the window
  key, then marks the row ``enqueued``. A second scheduler, a restart or a repeated firing
  of the same window loses the claim and sends nothing. With the SQLite store the claim and
  the row are one transaction.
- ``catch_up(now)``: on becoming leader. Per schedule, when the ledger's latest window is
  older than the current one, the windows in between were missed: they are recorded as ONE
  ``missed`` row (the first missed window's key, their number in ``missed_count``) in the
  transaction of the current window's claim, and the current window is fired once (kind
  ``catch_up``). A schedule with no history anywhere (a first start) is not caught up: it
  fires from its next fire time on.
- ``redrive(now)``: a ``claimed`` row older than ``grace`` means the scheduler died (or the
  broker failed) between the claim and the send: the message is sent again, same id.
- ``fire_manual``: ``mnemo schedules fire``: a ``manual:<uuid>`` window, no claim needed.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from memory_core.brokers.factory import Enqueuer
from memory_core.db.leases import Leases, SqliteLeases
from memory_core.db.sqlite import atomic
from memory_core.db.stores import Database
from memory_core.errors import MnemoError
from memory_core.jobs import build_message
from memory_core.maintenance import firings
from schedules.table import SCHEDULES, Schedule, Window, get_schedule, window_at, windows_between

log = structlog.get_logger("mnemo.scheduler")

_JUST_BEFORE = timedelta(microseconds=1)


@dataclass(frozen=True)
class Missed:
    first: Window
    count: int


def send(ops: Database, enqueuer: Enqueuer, schedule: Schedule, key: str) -> str:
    """Enqueue ``schedule``'s job for window ``key`` (message id from the key); mark it sent."""
    message = build_message(schedule.job, window=key, **schedule.kwargs)
    message = dataclasses.replace(message, message_id=firings.message_id_for(key))
    enqueuer.send(message)
    firings.mark_enqueued(ops.conn, schedule.id, key)
    return message.message_id


def fire_manual(ops: Database, enqueuer: Enqueuer, schedule: Schedule, now: datetime) -> str:
    """Enqueue ``schedule``'s job now under a fresh ``manual:<uuid>`` window; its key."""
    key = firings.manual_key()
    with atomic(ops.conn) as conn:
        firings.record_claimed(conn, schedule.id, key, kind=firings.MANUAL, window_start=None,
                               fired_at=now)
    try:
        send(ops, enqueuer, schedule, key)
    except BaseException:
        # The operator is told it failed: a leader must not send it later behind their back.
        firings.forget_unsent(ops.conn, schedule.id, key)
        raise
    log.info("schedule_fired", schedule=schedule.id, window=key, kind=firings.MANUAL)
    return key


class Firer:
    """Claims, records and sends windows for one scheduler process (``holder``)."""

    def __init__(self, ops: Database, leases: Leases, enqueuer: Enqueuer, holder: str, *,
                 claim_ttl_s: float, schedules: tuple[Schedule, ...] = SCHEDULES) -> None:
        self.ops = ops
        self.leases = leases
        self.enqueuer = enqueuer
        self.holder = holder
        self.claim_ttl_s = claim_ttl_s
        self.schedules = schedules
        # The claim can join the ledger's transaction only on the same connection.
        self._claims_in_ops = isinstance(leases, SqliteLeases) and leases.db is ops

    def _record(self, conn: Any, window: Window, kind: str, now: datetime,
                missed: Missed | None) -> None:
        if missed is not None:
            firings.record_missed(conn, window.schedule_id, missed.first.key,
                                  missed.first.start, missed.count, now)
        firings.record_claimed(conn, window.schedule_id, window.key, kind=kind,
                               window_start=window.start, fired_at=now)

    def _claim_and_record(self, window: Window, kind: str, now: datetime,
                          missed: Missed | None) -> bool:
        name = firings.claim_name(window.key)
        # One holder per attempt: a lease renews its holder's own claim, and a window must
        # not be won twice even by the same process.
        holder = f"{self.holder}/{uuid.uuid4().hex[:8]}"
        if self._claims_in_ops:
            with atomic(self.ops.conn) as conn:
                if not self.leases.claim(name, holder, self.claim_ttl_s):
                    return False
                self._record(conn, window, kind, now, missed)
            return True
        if not self.leases.claim(name, holder, self.claim_ttl_s):
            return False
        try:
            with atomic(self.ops.conn) as conn:
                self._record(conn, window, kind, now, missed)
        except BaseException:
            try:  # give the window back, so the next firing or leader can send it
                self.leases.release(name, holder)
            except MnemoError as e:
                log.error("window_claim_release_failed", window=window.key,
                          error=type(e).__name__)
            raise
        return True

    def fire_window(self, schedule: Schedule, window: Window, *, kind: str, now: datetime,
                    missed: Missed | None = None) -> bool:
        """Claim, record and send ``window``; False when another firing already has it."""
        if not self._claim_and_record(window, kind, now, missed):
            log.debug("window_already_fired", schedule=schedule.id, window=window.key)
            return False
        send(self.ops, self.enqueuer, schedule, window.key)
        log.info("schedule_fired", schedule=schedule.id, window=window.key, kind=kind,
                 missed=missed.count if missed else 0)
        return True

    def fire_current(self, schedule: Schedule, now: datetime) -> bool:
        """Fire the window ``now`` falls in (what an APScheduler firing calls)."""
        return self.fire_window(schedule, window_at(schedule, now), kind=firings.SCHEDULED,
                                now=now)

    def _last_known(self, schedule: Schedule, current: Window) -> datetime | None:
        last = firings.last_window_start(self.ops.conn, schedule.id)
        if last is not None:
            return last
        # No local history. If anyone claimed the previous window (a scheduler on another
        # host, with its own ledger), the schedule is running and the current window is due.
        previous = window_at(schedule, current.start - _JUST_BEFORE)
        if self.leases.holder_of(firings.claim_name(previous.key)) is not None:
            return previous.start
        return None

    def catch_up(self, now: datetime) -> dict[str, int]:
        """Fire each schedule's current window if it is overdue; record the missed ones.

        Returns {schedule id: windows missed} for the schedules caught up.
        """
        caught: dict[str, int] = {}
        for schedule in self.schedules:
            current = window_at(schedule, now)
            last = self._last_known(schedule, current)
            if last is None or last >= current.start:
                continue  # a first start, or the current window is already known
            count, first = 0, None
            for window in windows_between(schedule, last, current.start - _JUST_BEFORE):
                count += 1
                first = first or window
            missed = Missed(first, count) if first is not None else None
            if self.fire_window(schedule, current, kind=firings.CATCH_UP, now=now,
                                missed=missed):
                caught[schedule.id] = count
        if caught:
            log.info("schedules_caught_up", missed=caught)
        return caught

    def redrive(self, now: datetime, grace: timedelta = timedelta(seconds=30)) -> int:
        """Send again the windows claimed but never confirmed sent; how many."""
        rows = firings.unsent(self.ops.conn, now - grace)
        for row in rows:
            send(self.ops, self.enqueuer, get_schedule(row.schedule_id), row.window_key)
            log.warning("window_resent", schedule=row.schedule_id, window=row.window_key)
        return len(rows)
