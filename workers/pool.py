"""The worker pool: N worker processes x M threads, supervised.

Processes are started with multiprocessing's ``spawn`` (a fresh interpreter: no inherited
SQLite connections or threads). A process that dies is restarted after a short pause; one that
keeps dying (``MAX_RESTARTS`` within ``RESTART_WINDOW_S``) stops the pool with an error.
SIGTERM or SIGINT on the pool: each process gets SIGTERM, finishes or returns its in-flight
messages (``workers.entry``) within the grace period, and exits; stragglers are killed after
``grace_s + 10`` seconds (their leases then expire and the messages are redelivered).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any

import structlog

from memory_core.brokers.durability import check_configured_persistence
from memory_core.db.stores import migrate_stores
from memory_core.embedders.base import warn_keyword_grade_once
from memory_core.embedders.factory import make_embedder
from memory_core.errors import MnemoError
from memory_core.settings import Settings
from workers.context import claim_embedder
from workers.entry import DEFAULT_GRACE_S, run_worker_process, stop_on_signals

log = structlog.get_logger("mnemo.pool")

MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0


class WorkerPool:
    """Starts, supervises and stops the worker processes."""

    def __init__(self, settings: Settings, *, processes: int, threads: int,
                 grace_s: float = DEFAULT_GRACE_S,
                 broker_options: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.broker_options = dict(broker_options or {})  # e.g. a Redis namespace (bench)
        self.processes = processes
        self.threads = threads
        self.grace_s = grace_s
        self._ctx = multiprocessing.get_context("spawn")
        self._procs: list[BaseProcess] = []
        self._restarts: list[float] = []

    def _spawn(self) -> BaseProcess:
        proc = self._ctx.Process(target=run_worker_process, name="mnemo-worker",
                                 args=(self.settings, self.threads, self.grace_s),
                                 kwargs={"broker_options": self.broker_options})
        proc.start()
        log.info("worker_process_started", pid=proc.pid)
        return proc

    def start(self) -> None:
        """Migrate both databases and claim the embedder, then start the processes (each
        does both again: a no-op).

        Migrating here first means a chat process can open memory as soon as this returns;
        claiming here means a pool of the wrong embedder never starts a process. Raises
        SchemaTooNewError / StoreError / EmbedderMismatchError / EmbedderError first, and
        ConfigurationError when Redis is not persistent and that is required.
        """
        check_configured_persistence(self.settings)
        preflight(self.settings)
        self._procs = [self._spawn() for _ in range(self.processes)]

    def supervise(self, stop: threading.Event, poll_s: float = 0.5) -> None:
        """Restart dead processes until ``stop`` is set; raise MnemoError on a crash loop."""
        while not stop.wait(poll_s):
            for i, proc in enumerate(self._procs):
                if proc.is_alive():
                    continue
                log.warning("worker_process_exited", pid=proc.pid, exitcode=proc.exitcode)
                now = time.monotonic()
                self._restarts = [t for t in self._restarts if now - t < RESTART_WINDOW_S]
                if len(self._restarts) >= MAX_RESTARTS:
                    raise MnemoError(
                        f"worker processes exited {MAX_RESTARTS} times within "
                        f"{RESTART_WINDOW_S:.0f} s: read the log above for the cause, fix it, "
                        "and start the pool again")
                self._restarts.append(now)
                self._procs[i] = self._spawn()

    def stop(self) -> None:
        """SIGTERM every process, wait ``grace_s + 10`` s, then SIGKILL what is left."""
        for proc in self._procs:
            if proc.is_alive() and proc.pid:
                os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s + 10
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.error("worker_process_killed", pid=proc.pid)
                proc.kill()
                proc.join(5)
        log.info("pool_stopped", processes=len(self._procs))


def preflight(settings: Settings) -> None:
    """What every worker needs before it serves: both databases migrated, and the configured
    embedder recorded for the data (fresh) or equal to the recorded one. Logs
    ``embedder_keyword_grade`` for a keyword-grade embedder.

    Raises SchemaTooNewError / StoreError / EmbedderMismatchError / EmbedderError.
    """
    migrate_stores(settings)
    embedder = make_embedder(settings)
    claim_embedder(settings, embedder=embedder)
    warn_keyword_grade_once(embedder)  # once per start, not once per worker process


def run_pool(settings: Settings, *, processes: int, threads: int,
             grace_s: float = DEFAULT_GRACE_S,
             beside: Callable[[], Callable[[], None]] | None = None) -> None:
    """Run the pool in this (main) thread until SIGTERM or SIGINT.

    ``beside`` starts a companion once the pool has started (``mnemo up``: the scheduler)
    and returns how to stop it; it is stopped before the pool.
    """
    stop = stop_on_signals()
    pool = WorkerPool(settings, processes=processes, threads=threads, grace_s=grace_s)
    pool.start()
    log.info("pool_started", processes=processes, threads=threads,
             broker=settings.broker_kind)
    stop_beside = None
    try:
        stop_beside = beside() if beside is not None else None
        pool.supervise(stop)
    finally:
        if stop_beside is not None:
            stop_beside()
        pool.stop()
