"""The leader lease: one scheduler fires, the others stand by and take over when it dies.

Lease rules with an injected lease clock (SQLite), the Redis leases against the real Redis,
the bootstrap's catch-up on gaining the lease, and a real ``mnemo scheduler`` killed with
SIGKILL whose standby takes over once its lease lapses, never before (both lease stores).
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from apscheduler.schedulers.base import STATE_RUNNING

from memory_core.brokers.redis_leases import RedisLeases
from memory_core.db import open_ops
from memory_core.db.leases import SqliteLeases
from memory_core.db.stores import Database
from memory_core.errors import BrokerError, InvalidInputError
from memory_core.settings import Settings
from schedules.bootstrap import start_memory_worker
from schedules.leader import LEADER_LEASE, Leadership
from schedules.table import SCHEDULES, fire_times, window_at
from tests.conftest import REPO
from tests.helpers.queue_env import RedisServer, drop_namespace, stop_process, wait_for
from tests.helpers.schedule_env import SchedTarget, ledger

pytest_plugins = ("tests.helpers.queue_fixtures",)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _leadership(leases, holder: str, clock: Clock | None, events: list[str]) -> Leadership:
    return Leadership(leases, holder, 9.0, lease_now=clock,
                      on_acquire=lambda: events.append(f"{holder} acquire"),
                      on_lose=lambda: events.append(f"{holder} lose"))


def test_one_leader_others_stand_by_and_take_over_after_the_lease(ops_db: Database) -> None:
    leases = SqliteLeases(ops_db)
    clock, events = Clock(1000.0), []
    a = _leadership(leases, "a", clock, events)
    b = _leadership(leases, "b", clock, events)
    assert a.tick() and a.is_leader
    assert not b.tick() and not b.is_leader
    clock.t += 3  # a renews every third of the lease
    assert a.tick() and not b.tick()
    clock.t += 8.9  # a died after its last renewal at 1003: the lease runs to 1012
    assert not b.tick()
    clock.t += 0.2
    assert b.tick() and b.is_leader
    assert events == ["a acquire", "b acquire"]
    assert not a.tick() and not a.is_leader  # a comes back: it lost the lease
    assert events[-1] == "a lose"
    b.stop()  # gives the lease up: a takes it at its next try, lease not yet lapsed
    assert a.tick()
    assert leases.holder_of(LEADER_LEASE, now=clock.t) == "a"


def test_a_leader_that_cannot_start_gives_the_lease_back(ops_db: Database) -> None:
    leases = SqliteLeases(ops_db)
    clock = Clock(1000.0)

    def broken() -> None:
        raise RuntimeError("catch-up failed")

    a = Leadership(leases, "a", 9.0, lease_now=clock, on_acquire=broken, on_lose=lambda: None)
    assert not a.tick() and not a.is_leader
    assert leases.holder_of(LEADER_LEASE, now=clock.t) is None


@pytest.fixture
def redis_leases(redis_url: str) -> Iterator[RedisLeases]:
    namespace = f"mnemo-test-{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(redis_url)
    yield RedisLeases(client, namespace=namespace)
    client.close()
    drop_namespace(redis_url, namespace)


def test_redis_leases_keep_the_lease_contract(redis_leases: RedisLeases) -> None:
    leases = redis_leases
    assert leases.holder_of("lead") is None
    assert leases.claim("lead", "a", 30.0)
    assert not leases.claim("lead", "b", 30.0)
    assert leases.claim("lead", "a", 30.0)  # renewed
    assert 29_000 < leases.client.pttl(leases.key("lead")) <= 30_000
    assert leases.holder_of("lead") == "a"
    assert not leases.release("lead", "b")
    assert leases.release("lead", "a")
    assert leases.claim("lead", "b", 30.0)
    # Forever: no expiry, never taken over, the holder's renewal keeps it forever.
    assert leases.claim("window:w1", "s1", None)
    assert leases.client.pttl(leases.key("window:w1")) == -1
    assert not leases.claim("window:w1", "s2", None)
    assert not leases.claim("window:w1", "s2", 5.0)
    # Expiry runs on the Redis server's clock: a short lease lapses and is taken over.
    assert leases.claim("short", "a", 0.05)
    wait_for(lambda: leases.holder_of("short") is None, 5, interval=0.01)
    assert leases.claim("short", "b", 30.0)
    with pytest.raises(InvalidInputError, match="Redis server's clock"):
        leases.claim("lead", "a", 1.0, now=5.0)
    with pytest.raises(InvalidInputError, match="positive number"):
        leases.claim("lead", "a", 0)


def test_redis_leases_say_when_redis_is_down(tmp_path: Path) -> None:
    from tests.helpers.queue_env import free_port

    client = redis.Redis(port=free_port(), socket_connect_timeout=0.2)
    leases = RedisLeases(client, namespace="x")
    with pytest.raises(BrokerError, match="start Redis or check MNEMO_BROKER_URL"):
        leases.claim("lead", "a", 1.0)


def test_the_bootstrap_registers_eight_and_catches_up_when_it_leads(tmp_path: Path) -> None:
    target = SchedTarget("embedded", tmp_path, None)
    now = datetime.now(UTC)
    before = target.firer()
    for schedule in SCHEDULES:  # last run two days ago
        assert before.fire_current(schedule, now - timedelta(days=2))
    settings = target.settings()
    service = start_memory_worker(settings, clock=lambda: now)
    try:
        # Caught up: every schedule whose current window is not the one run two days ago
        # (a weekly one may still be in that window).
        due = [s for s in SCHEDULES
               if window_at(s, now) != window_at(s, now - timedelta(days=2))]
        assert len(due) >= 6
        # Deadlines, not bounds: the catch-up runs in the leader's thread, which a loaded
        # machine can hold up for seconds, and its last firing is recorded before the
        # leader resumes its APScheduler (asserting that at once was a race).
        wait_for(lambda: sum(r[2] == "catch_up" for r in ledger(before.ops)) == len(due), 120)
        wait_for(lambda: service.scheduler.state == STATE_RUNNING, 120)  # resumed by it
        assert service.leadership.is_leader
        jobs = {job.id: job for job in service.scheduler.get_jobs()}
        assert set(jobs) == {s.id for s in SCHEDULES}
        for schedule in SCHEDULES:
            assert jobs[schedule.id].next_run_time == fire_times(schedule, now, 1)[0]
            rows = ledger(before.ops, schedule.id)
            expected = [window_at(schedule, now).key] if schedule in due else []
            assert [r[1] for r in rows if r[2] == "catch_up"] == expected
    finally:
        service.stop()
    ops = open_ops(settings)
    try:
        assert SqliteLeases(ops).holder_of(LEADER_LEASE) is None  # given up on stop
    finally:
        ops.close()
    target.close()


LEASE_S = 4
SLACK_S = 0.1  # a lease's expiry and this process's clock, read a query apart

# The leader lease as stored: its holder (None when there is none) and when its claim lapses
# on this process's monotonic clock, no later than it does.
LeaseReader = Callable[[], tuple[str | None, float]]


def _sqlite_lease(ops: Database) -> LeaseReader:
    def read() -> tuple[str | None, float]:
        row = ops.conn.execute("SELECT holder, expires_at FROM leases WHERE name = ?",
                               (LEADER_LEASE,)).fetchone()
        if row is None:
            return None, -math.inf
        # expires_at: epoch seconds on this machine's clock (the claimer's time.time()).
        return str(row[0]), time.monotonic() + float(row[1]) - time.time()

    return read


def _redis_lease(leases: RedisLeases) -> LeaseReader:
    key = leases.key(LEADER_LEASE)

    def read() -> tuple[str | None, float]:
        pipe = leases.client.pipeline()  # MULTI/EXEC: both read at one instant
        pipe.get(key)
        pipe.pttl(key)
        sent = time.monotonic()
        holder, pttl = pipe.execute()
        if holder is None or pttl < 0:
            return None, -math.inf
        # The server counted pttl after the query was sent: the claim lapses no earlier.
        return holder.decode(), sent + pttl / 1000

    return read


class LeaseWatch:
    """The leader lease, polled; fails the test when it changes hands while the previous
    holder's claim was current.

    Only a poll that ended before that claim's expiry proves a displacement; a poll held up
    by a busy machine sees the change late and proves nothing, so it cannot fail the test.
    """

    def __init__(self, read: LeaseReader) -> None:
        self.read = read
        self.holder: str | None = None
        self.expires = -math.inf  # the holder's claim lapses no earlier than this
        self.renewals = 0  # renewals seen, whoever held the lease

    def poll(self) -> str | None:
        """The holder (while the lease is free: the last one seen)."""
        holder, expires = self.read()
        seen = time.monotonic()
        if holder is None:
            return self.holder
        if holder != self.holder:
            assert self.holder is None or seen >= self.expires - SLACK_S, (
                f"{holder} took the lease {self.expires - seen:.2f} s before the claim of "
                f"{self.holder} lapsed")
            self.holder, self.expires = holder, expires
            return holder
        if expires > self.expires + LEASE_S / 6:  # renewals are a third of the lease apart
            self.renewals += 1
        self.expires = max(self.expires, expires)
        return holder


def _scheduler(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - closed with the process by the OS
    return subprocess.Popen([sys.executable, "-c", "from scripts.cli import main; main()",
                             "scheduler"], cwd=REPO, env=env, stdout=out, stderr=out)


def _pid(holder: str | None) -> int | None:
    match = re.match(r"^[^:]*:(\d+):", holder or "")
    return int(match.group(1)) if match else None


def _acquired(log: Path) -> int:
    return log.read_bytes().count(b"scheduler_leader_acquired")


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_killing_the_leader_hands_over_once_its_lease_lapses(
        store: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(MNEMO_DATA_DIR=str(tmp_path / "data"), MNEMO_LOG_LEVEL="info",
               MNEMO_LOG_FORMAT="json", MNEMO_SCHEDULER_LEASE_SECONDS=str(LEASE_S))
    settings = Settings.from_env({}, data_dir=tmp_path / "data")
    ops = open_ops(settings)
    if store == "redis":
        server: RedisServer = request.getfixturevalue("own_redis")
        env["MNEMO_BROKER_URL"] = server.url
        client = redis.Redis.from_url(server.url)
        leases = RedisLeases(client)
        watch = LeaseWatch(_redis_lease(leases))

        def holder() -> str | None:
            return leases.holder_of(LEADER_LEASE)
    else:
        sqlite_leases = SqliteLeases(ops)
        watch = LeaseWatch(_sqlite_lease(ops))

        def holder() -> str | None:
            return sqlite_leases.holder_of(LEADER_LEASE)

    logs = {"first": tmp_path / "first.log", "second": tmp_path / "second.log"}
    first = _scheduler(env, logs["first"])
    victim, heir = first, None
    try:
        wait_for(lambda: _pid(watch.poll()) == first.pid and _acquired(logs["first"]), 60,
                 interval=0.05)
        second = heir = _scheduler(env, logs["second"])
        wait_for(lambda: watch.poll() and b"scheduler_started" in logs["second"].read_bytes(),
                 60, interval=0.05)
        # The standby tries every third of the lease while the leader renews; the watch
        # fails the test if it takes the lease before the leader's claim lapsed.
        renewed = watch.renewals
        wait_for(lambda: watch.poll() and watch.renewals >= renewed + 3, 60, interval=0.05)
        if _pid(watch.poll()) == second.pid:  # the leader, held up, let its claim lapse
            victim, heir = second, first
        heir_log = logs["first" if heir is first else "second"]
        acquired = _acquired(heir_log)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
        # Taken over not before the dead leader's claim lapsed (the watch) and at a try
        # after that; a deadline of five leases, not a bound, for a busy machine.
        wait_for(lambda: _pid(watch.poll()) == heir.pid, LEASE_S * 5, interval=0.05)
        # It fires: it has caught up and resumed its APScheduler (logged right after).
        wait_for(lambda: _acquired(heir_log) > acquired, 60)
    finally:
        stop_process(victim, signal.SIGKILL)
        if heir is not None:
            assert stop_process(heir) == 0  # SIGTERM: a clean stop gives the lease up
        ops.close()
    assert holder() is None
