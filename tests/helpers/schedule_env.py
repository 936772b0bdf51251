"""Tools for the schedule tests: one scheduler side and one worker side per broker.

``SchedTarget`` builds, over the embedded broker (one data dir) or a Redis namespace (the
second scheduler may get a data dir of its own, as on another host): Firers (the scheduler's
firing logic, driven with test times), the worker broker with every actor declared, and
recording job bodies that stand in for the eight real ones.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memory_core.brokers import make_broker
from memory_core.brokers.factory import BrokerEnqueuer
from memory_core.brokers.redis import redis_client
from memory_core.brokers.redis_leases import RedisLeases
from memory_core.db import open_ops
from memory_core.db.leases import Leases, SqliteLeases
from memory_core.db.stores import Database
from memory_core.jobs import JOBS, MAINTENANCE
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.bodies import BODIES
from memory_core.settings import Settings
from schedules.firing import Firer
from workers.actors import declare_actors
from workers.context import LazyContext
from workers.middleware import worker_middleware

MAINTENANCE_JOBS = sorted(n for n, j in JOBS.items() if j.queue == MAINTENANCE)
CLAIM_TTL_S = 90 * 86_400


@dataclass
class Recorder:
    """Stand-in bodies: record (job, window, partition) per run; reconsolidation chains."""

    calls: list[tuple[str, str, int | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    fail: set[str] = field(default_factory=set)  # jobs that raise

    def body(self, name: str) -> Callable[..., JobReport]:
        def run(env: JobEnv, **kwargs: Any) -> JobReport:
            partition = kwargs.get("partition")
            with self.lock:
                self.calls.append((name, env.window, partition))
            if name in self.fail:
                raise RuntimeError("body failed on purpose")
            report = JobReport(name, counts={"runs": 1})
            if partition is not None and partition + 1 < kwargs["partitions"]:
                report.follow_ups.append((name, {"run_id": kwargs["run_id"],
                                                 "partition": partition + 1,
                                                 "partitions": kwargs["partitions"]}))
                report.done = False
            return report

        return run

    def install(self, monkeypatch: pytest.MonkeyPatch, names: list[str] = MAINTENANCE_JOBS
                ) -> None:
        for name in names:
            monkeypatch.setitem(BODIES, name, self.body(name))

    def windows(self, name: str | None = None) -> list[str]:
        with self.lock:
            return [w for n, w, p in self.calls if (name is None or n == name) and not p]


@dataclass
class SchedTarget:
    kind: str
    tmp_path: Path
    url: str | None
    namespace: str = field(default_factory=lambda: f"mnemo-test-{uuid.uuid4().hex[:10]}")
    closers: list[Callable[[], None]] = field(default_factory=list)

    def settings(self, data: str = "data", **overrides: Any) -> Settings:
        return Settings.from_env({}, data_dir=self.tmp_path / data, broker_url=self.url,
                                 queue_lease_seconds=5, recon_partitions=3, **overrides)

    def ops(self, data: str = "data") -> Database:
        db = open_ops(self.settings(data))
        self.closers.append(db.close)
        return db

    def leases(self, ops: Database) -> Leases:
        if self.kind == "redis":
            client = redis_client(self.settings())
            self.closers.append(client.close)
            return RedisLeases(client, namespace=self.namespace)
        return SqliteLeases(ops)

    def enqueuer(self, data: str = "data") -> BrokerEnqueuer:
        broker = make_broker(self.settings(data), namespace=self.namespace)
        enqueuer = BrokerEnqueuer(broker)
        self.closers.append(enqueuer.close)
        return enqueuer

    def firer(self, data: str = "data", holder: str | None = None) -> Firer:
        ops = self.ops(data)
        return Firer(ops, self.leases(ops), self.enqueuer(data),
                     holder or f"sched-{uuid.uuid4().hex[:6]}", claim_ttl_s=CLAIM_TTL_S)

    def worker_broker(self, data: str = "data") -> Any:
        settings = self.settings(data)
        options: dict[str, Any] = {"namespace": self.namespace}
        if self.kind == "redis":
            options.update(heartbeat_timeout_ms=5000, maintenance_interval_s=1.0)
        broker = make_broker(settings, middleware=worker_middleware(), **options)
        context = LazyContext(settings)
        declare_actors(broker, context)
        self.closers.append(context.close)
        self.closers.append(broker.close)
        return broker

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.closers.clear()


def ledger(ops: Database, schedule_id: str | None = None) -> list[tuple[Any, ...]]:
    sql = ("SELECT schedule_id, window_key, kind, status, missed_count, attempts "
           "FROM schedule_firings")
    args: tuple[Any, ...] = ()
    if schedule_id is not None:
        sql += " WHERE schedule_id = ?"
        args = (schedule_id,)
    return [tuple(r) for r in ops.conn.execute(sql + " ORDER BY schedule_id, window_key",
                                               args)]


def queued(broker: Any) -> int:
    """Messages waiting or in flight on the maintenance queue."""
    stats = {s.queue: s for s in broker.queue_stats((MAINTENANCE,))}
    s = stats[MAINTENANCE]
    return int(s.ready + s.delayed + s.in_flight)
