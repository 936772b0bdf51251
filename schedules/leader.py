"""The leader lease: any number of schedulers run, one fires, the others stand by.

Every scheduler process runs a ``Leadership`` thread that tries to claim the lease
``scheduler-leader`` every ``ttl_s / 3`` seconds. The holder renews it on each try; the others
fail until the holder stops renewing (it died, or lost its store), and then the first to try
after the lease lapses takes it: a standby takes over within ``ttl_s`` plus one try interval.

Leadership is believed only while the last renewal is younger than the lease (measured on this
process's monotonic clock from before the claim was sent), so a leader cut off from its store
stops firing no later than its lease lapses for the others. Even then the window claims keep a
window from running twice (``schedules.firing``).

The lease store: Redis when Redis is the broker (schedulers on several hosts share it),
``memory_ops.db`` otherwise (``make_leases``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from memory_core.db.leases import Leases, SqliteLeases
from memory_core.db.stores import Database
from memory_core.errors import MnemoError
from memory_core.settings import Settings

log = structlog.get_logger("mnemo.scheduler")

LEADER_LEASE = "scheduler-leader"


def make_leases(settings: Settings, ops: Database, *, namespace: str = "mnemo") -> Leases:
    """Redis leases when Redis is the broker; else the leases table of ``ops``."""
    if settings.broker_kind == "redis":
        from memory_core.brokers.redis import redis_client
        from memory_core.brokers.redis_leases import RedisLeases

        return RedisLeases(redis_client(settings), namespace=namespace)
    return SqliteLeases(ops)


class Leadership:
    """Claims and renews the leader lease in a thread; calls back on gaining and losing it.

    ``on_acquire`` runs in this thread when the lease is won (``is_leader`` is already
    true); if it raises, the lease is given back and the next try starts over. ``on_lose``
    runs when a renewal fails.
    ``lease_now`` (SQLite leases only): the lease store's clock, for tests.
    """

    def __init__(self, leases: Leases, holder: str, ttl_s: float, *,
                 on_acquire: Callable[[], None], on_lose: Callable[[], None],
                 on_tick: Callable[[], None] | None = None,
                 lease_now: Callable[[], float] | None = None) -> None:
        self.leases = leases
        self.holder = holder
        self.ttl_s = float(ttl_s)
        self.interval_s = self.ttl_s / 3
        self.on_acquire = on_acquire
        self.on_lose = on_lose
        self.on_tick = on_tick
        self.lease_now = lease_now
        self._leader = False
        self._valid_until = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        return self._leader and time.monotonic() < self._valid_until

    def _claim(self) -> bool:
        now = None if self.lease_now is None else self.lease_now()
        try:
            return self.leases.claim(LEADER_LEASE, self.holder, self.ttl_s, now=now)
        except MnemoError as e:  # the store is unreachable: as good as not holding it
            log.warning("leader_lease_unreachable", error=type(e).__name__)
            return False

    def tick(self) -> bool:
        """One try: claim or renew, then gain or lose leadership. Returns ``is_leader``."""
        sent = time.monotonic()
        if not self._claim():
            if self._leader:
                self._leader = False
                log.warning("scheduler_leader_lost", holder=self.holder)
                self.on_lose()
            return False
        self._valid_until = sent + self.ttl_s
        if not self._leader:
            self._leader = True  # before on_acquire: what it resumes may fire at once
            try:
                self.on_acquire()
            except Exception as e:
                self._leader = False
                log.error("scheduler_leader_start_failed", error=type(e).__name__)
                self._give_up()
                return False
            log.info("scheduler_leader_acquired", holder=self.holder, lease_s=self.ttl_s)
        elif self.on_tick is not None:
            self.on_tick()
        return True

    def _run(self) -> None:
        while True:
            try:
                self.tick()
            except Exception as e:  # a failing tick must not end the scheduler's thread
                log.error("scheduler_tick_failed", error=type(e).__name__)
            if self._stop.wait(self.interval_s):
                return

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mnemo-leader", daemon=True)
        self._thread.start()

    def _give_up(self) -> None:
        try:
            self.leases.release(LEADER_LEASE, self.holder)
        except MnemoError as e:
            log.warning("leader_lease_release_failed", error=type(e).__name__)

    def stop(self) -> None:
        """Stop trying; give the lease up so a standby takes over at its next try."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 10)
        was_leader, self._leader = self._leader, False
        if was_leader:
            self.on_lose()
        self._give_up()
