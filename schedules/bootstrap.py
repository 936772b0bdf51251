"""The single bootstrap: ``start_memory_worker()`` registers the eight schedules and runs them.

Nothing else registers schedules. The scheduler process does no database or model work beyond
the lease and the window claims: a firing only claims its window, writes its ledger row in
``memory_ops.db`` and enqueues the job by name (``memory_core.jobs.build_message``).

What runs, in threads of the calling process:

- an APScheduler 3.x ``BackgroundScheduler`` (UTC) with one job per schedule, each on the
  table's trigger object, ``coalesce=True`` (several due run times fire once),
  ``misfire_grace_time=None`` (a late firing still fires: its window claim decides whether
  anything is sent) and ``max_instances=1``. It starts paused;
- a ``Leadership`` thread (``schedules.leader``). On gaining the lease it re-sends windows
  claimed but never sent, catches up missed windows (``Firer.catch_up``) and resumes the
  scheduler; on losing it, pauses it. A firing also checks leadership before it claims.

APScheduler reads the wall clock itself; the firing's window comes from ``clock()`` (the
table's pure functions), and tests drive ``Firer`` with their own times instead.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from apscheduler.schedulers.background import BackgroundScheduler

from memory_core.brokers import make_broker
from memory_core.brokers.factory import BrokerEnqueuer, Enqueuer
from memory_core.clock import utcnow
from memory_core.db.leases import Leases
from memory_core.db.stores import Database, open_ops
from memory_core.heartbeats import SCHEDULER, Heartbeater
from memory_core.settings import Settings
from schedules.firing import Firer
from schedules.leader import Leadership, make_leases
from schedules.table import BY_ID, SCHEDULES, Schedule

log = structlog.get_logger("mnemo.scheduler")

DAY_S = 86_400


def register(scheduler: Any, fire: Callable[[str], None],
             schedules: tuple[Schedule, ...] = SCHEDULES) -> None:
    """Add one APScheduler job per schedule: ``fire(schedule_id)`` on its trigger."""
    for schedule in schedules:
        scheduler.add_job(fire, trigger=schedule.build_trigger(), id=schedule.id,
                          name=schedule.id, kwargs={"schedule_id": schedule.id},
                          coalesce=True, misfire_grace_time=None, max_instances=1,
                          replace_existing=True)


def firing_enqueuer(settings: Settings, *, namespace: str = "mnemo") -> Enqueuer:
    """What firings send through: the broker itself, no spool. A firing that cannot reach
    Redis fails (its window stays claimed, and the leader sends it again) rather than wait
    in a local spool that only workers of this host relay."""
    return BrokerEnqueuer(make_broker(settings, namespace=namespace))


def new_holder() -> str:
    """This scheduler's id in the leases: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class SchedulerService:
    """A running scheduler: stop it with ``stop()``."""

    scheduler: BackgroundScheduler
    leadership: Leadership
    firer: Firer
    ops: Database
    enqueuer: Enqueuer
    heartbeater: Heartbeater | None = None

    @property
    def holder(self) -> str:
        return self.leadership.holder

    def stop(self) -> None:
        """Give the lease up (a standby takes over at its next try), stop, close."""
        self.leadership.stop()
        self.scheduler.shutdown(wait=True)
        if self.heartbeater is not None:
            self.heartbeater.stop()  # marks this scheduler's heartbeat stopped
        self.enqueuer.close()
        self.ops.close()
        log.info("scheduler_stopped", holder=self.holder)


def start_memory_worker(settings: Settings, *, namespace: str = "mnemo",
                        clock: Callable[[], datetime] = utcnow,
                        holder: str | None = None, leases: Leases | None = None,
                        enqueuer: Enqueuer | None = None,
                        lease_now: Callable[[], float] | None = None) -> SchedulerService:
    """Register the eight schedules with APScheduler and start standing for leader.

    ``namespace``: the Redis key prefix (broker and leases). ``clock``, ``holder``,
    ``leases``, ``enqueuer``, ``lease_now``: injected by tests. Raises StoreError when
    ``memory_ops.db`` cannot be opened; a Redis outage is not an error here (the scheduler
    stands by until it can hold the lease).
    """
    ops = open_ops(settings)
    leases = leases or make_leases(settings, ops, namespace=namespace)
    enqueuer = enqueuer or firing_enqueuer(settings, namespace=namespace)
    holder = holder or new_holder()
    firer = Firer(ops, leases, enqueuer, holder,
                  claim_ttl_s=settings.schedule_history_days * DAY_S)
    scheduler = BackgroundScheduler(timezone=UTC, daemon=True)
    lease_s = settings.scheduler_lease_seconds
    lock = threading.Lock()  # catch-up and firings never interleave

    def fire(schedule_id: str) -> None:
        with lock:
            if leadership.is_leader:
                firer.fire_current(BY_ID[schedule_id], clock())

    def on_acquire() -> None:
        with lock:
            firer.redrive(clock(), timedelta(seconds=lease_s))
            firer.catch_up(clock())
        scheduler.resume()

    def on_tick() -> None:
        with lock:
            firer.redrive(clock(), timedelta(seconds=lease_s))

    leadership = Leadership(leases, holder, lease_s, on_acquire=on_acquire,
                            on_lose=scheduler.pause, on_tick=on_tick, lease_now=lease_now)
    register(scheduler, fire)
    scheduler.start(paused=True)
    leadership.start()
    heartbeater = Heartbeater(ops, SCHEDULER, interval_s=settings.heartbeat_interval_s,
                              keep_s=settings.heartbeat_keep_s,
                              detail=lambda: {"holder": holder,
                                              "leader": leadership.is_leader})
    heartbeater.start()
    log.info("scheduler_started", holder=holder, schedules=len(SCHEDULES), lease_s=lease_s,
             broker=settings.broker_kind)
    return SchedulerService(scheduler, leadership, firer, ops, enqueuer, heartbeater)


def run_scheduler(settings: Settings, stop: threading.Event,
                  on_started: Callable[[], None] | None = None) -> None:
    """``mnemo scheduler``: run until ``stop`` is set (SIGTERM / SIGINT); ``on_started``
    is called once the scheduler runs."""
    service = start_memory_worker(settings)
    try:
        if on_started is not None:
            on_started()
        stop.wait()
    finally:
        service.stop()
