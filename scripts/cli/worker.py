"""``mnemo worker``, ``mnemo scheduler`` and ``mnemo up``: the worker pool, the scheduler, both."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
import structlog

from memory_core.clock import utcnow
from memory_core.log import renders_json
from schedules.bootstrap import run_scheduler, start_memory_worker
from scripts.cli.app import Ctx, handle_errors, progress
from scripts.cli.dates import show_time
from workers.entry import DEFAULT_GRACE_S, stop_on_signals
from workers.pool import run_pool

log = structlog.get_logger(__name__)

processes_option = click.option(
    "--processes", type=click.IntRange(1, 256), default=None,
    help="Worker processes (default: MNEMO_WORKER_PROCESSES, 2).")
threads_option = click.option(
    "--threads", type=click.IntRange(1, 256), default=None,
    help="Threads per process (default: MNEMO_WORKER_THREADS, 4).")
lines_option = click.option(
    "--json", "as_json", is_flag=True,
    help="Machine-readable start and stop: one JSON object per line on stdout "
    "(event started / stopped, with outcome).")
grace_option = click.option(
    "--grace", type=click.FloatRange(0, 3600), default=DEFAULT_GRACE_S, show_default=True,
    help="Seconds a stopping worker lets in-flight messages finish before returning them.")


class Lines:
    """``--json`` on a long-running command: one JSON object per line on stdout, a
    ``started`` line once it runs and a ``stopped`` line when it ends (``outcome`` "ok", or
    "error" with the error, which also ends the command as usual). Without --json, the
    human banner on stderr instead, or, when the log lines there are JSON, a ``running``
    log event with the same facts (a plain line would break a log shipper's parsing)."""

    def __init__(self, as_json: bool, command: str, *, json_logs: bool = False,
                 **facts: Any) -> None:
        self.as_json = as_json
        self.json_logs = json_logs
        self.facts = {"command": command, "pid": os.getpid(), **facts}

    def banner(self, text: str) -> None:
        """The human line saying it runs (not with --json, whose ``started`` says it)."""
        if self.as_json:
            return
        if self.json_logs:
            log.info("running", **self.facts)
        else:
            progress(text)

    def emit(self, event: str, **fields: Any) -> None:
        if self.as_json:
            click.echo(json.dumps({"event": event, "at": show_time(utcnow()), **self.facts,
                                   **fields}, sort_keys=True))
            sys.stdout.flush()

    @contextmanager
    def stopping(self) -> Iterator[None]:
        try:
            yield
        except BaseException as e:
            self.emit("stopped", outcome="error", error=str(e) or type(e).__name__)
            raise
        self.emit("stopped", outcome="ok")


def _run(obj: Ctx, processes: int | None, threads: int | None, grace: float, as_json: bool,
         command: str, *, beside: Callable[[], Callable[[], None]] | None = None) -> None:
    settings = obj.settings
    processes = processes or settings.worker_processes
    threads = threads or settings.worker_threads
    lines = Lines(as_json, command, json_logs=renders_json(settings), processes=processes,
                  threads=threads, broker=settings.broker_kind)

    def started() -> Callable[[], None]:  # once the pool runs (and, for `up`, the scheduler)
        # The banner only now: the pool has checked the stores, the embedder and the broker,
        # and a refusal (exit 1) is not preceded by a line saying it runs.
        lines.banner(f"mnemo: {processes} worker process(es) x {threads} thread(s) on the "
                     f"{settings.broker_kind} broker; SIGTERM or Ctrl-C stops them cleanly")
        stop = beside() if beside is not None else (lambda: None)
        lines.emit("started")
        return stop

    with lines.stopping():
        run_pool(settings, processes=processes, threads=threads, grace_s=grace,
                 beside=started)


@click.command()
@processes_option
@threads_option
@grace_option
@lines_option
@click.pass_obj
@handle_errors
def worker(obj: Ctx, processes: int | None, threads: int | None, grace: float,
           as_json: bool) -> None:
    """Run the worker pool: N processes x M threads consuming every queue.

    Migrates both databases first (as `mnemo db migrate`) and refuses to start (exit 1)
    when the configured embedder differs from the one recorded for the data (`mnemo memory
    status` shows both), since it would store memories without vectors. Runs until SIGTERM
    or Ctrl-C; then each process finishes its in-flight messages (up to
    --grace seconds), returns the rest to the queue and exits. A process that dies is
    restarted. Memory lives in the SQLite files of MNEMO_DATA_DIR, so run the workers of
    one data directory on the machine that holds it (with either broker; Redis lets chat
    processes on other hosts enqueue, and spools while it is down).

    Example:

        mnemo worker --processes 2 --threads 4
    """
    _run(obj, processes, threads, grace, as_json, "worker")


@click.command()
@processes_option
@threads_option
@grace_option
@lines_option
@click.pass_obj
@handle_errors
def up(obj: Ctx, processes: int | None, threads: int | None, grace: float,
       as_json: bool) -> None:
    """Run everything a single machine needs: the worker pool and the scheduler (the eight
    maintenance schedules) on the configured broker, embedded by default. Migrates both
    databases first (as `mnemo db migrate`) and, like `mnemo worker`, refuses to start
    (exit 1) when the configured embedder differs from the one recorded for the data.

    The scheduler stands for the leader lease like any `mnemo scheduler`: if another
    scheduler already leads, this one stands by. SIGTERM or Ctrl-C stops both cleanly.

    Example:

        MNEMO_DATA_DIR=~/mnemo-data mnemo up
    """
    def start_scheduler() -> Callable[[], None]:
        return start_memory_worker(obj.settings).stop  # once the pool has started

    _run(obj, processes, threads, grace, as_json, "up", beside=start_scheduler)


@click.command()
@lines_option
@click.pass_obj
@handle_errors
def scheduler(obj: Ctx, as_json: bool) -> None:
    """Run the scheduler only: the eight maintenance schedules, each firing only enqueues.

    Any number may run (on any host, with Redis): one holds the leader lease
    (MNEMO_SCHEDULER_LEASE_SECONDS) and fires; the others stand by and take over within
    about the lease time when it dies. Windows missed while none ran are caught up once per
    schedule when one starts, and recorded as missed (`mnemo schedules history ID`).
    Runs until SIGTERM or Ctrl-C, then gives the lease up.

    Example:

        mnemo scheduler
    """
    settings = obj.settings
    lines = Lines(as_json, "scheduler", json_logs=renders_json(settings),
                  broker=settings.broker_kind)

    def started() -> None:
        lines.banner(f"mnemo: scheduler on the {settings.broker_kind} broker (lease "
                     f"{settings.scheduler_lease_seconds} s); SIGTERM or Ctrl-C stops it")
        lines.emit("started")

    with lines.stopping():
        run_scheduler(settings, stop_on_signals(), on_started=started)
