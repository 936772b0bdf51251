"""``mnemo worker``, ``mnemo scheduler`` and ``mnemo up``: the worker pool, the scheduler, both."""

from __future__ import annotations

import click

from schedules.bootstrap import run_scheduler, start_memory_worker
from scripts.cli.app import Ctx, handle_errors, progress
from workers.entry import DEFAULT_GRACE_S, stop_on_signals
from workers.pool import run_pool

processes_option = click.option(
    "--processes", type=click.IntRange(1, 256), default=None,
    help="Worker processes (default: MNEMO_WORKER_PROCESSES, 2).")
threads_option = click.option(
    "--threads", type=click.IntRange(1, 256), default=None,
    help="Threads per process (default: MNEMO_WORKER_THREADS, 4).")
grace_option = click.option(
    "--grace", type=click.FloatRange(0, 3600), default=DEFAULT_GRACE_S, show_default=True,
    help="Seconds a stopping worker lets in-flight messages finish before returning them.")


def _run(obj: Ctx, processes: int | None, threads: int | None, grace: float) -> None:
    settings = obj.settings
    processes = processes or settings.worker_processes
    threads = threads or settings.worker_threads
    progress(f"mnemo: {processes} worker process(es) x {threads} thread(s) on the "
             f"{settings.broker_kind} broker; SIGTERM or Ctrl-C stops them cleanly")
    run_pool(settings, processes=processes, threads=threads, grace_s=grace)


@click.command()
@processes_option
@threads_option
@grace_option
@click.pass_obj
@handle_errors
def worker(obj: Ctx, processes: int | None, threads: int | None, grace: float) -> None:
    """Run the worker pool: N processes x M threads consuming every queue.

    Migrates both databases first (as `mnemo db migrate`), then serves. Runs until SIGTERM
    or Ctrl-C; then each process finishes its in-flight messages (up to
    --grace seconds), returns the rest to the queue and exits. A process that dies is
    restarted. Memory lives in the SQLite files of MNEMO_DATA_DIR, so run the workers of
    one data directory on the machine that holds it (with either broker; Redis lets chat
    processes on other hosts enqueue, and spools while it is down).

    Example:

        mnemo worker --processes 2 --threads 4
    """
    _run(obj, processes, threads, grace)


@click.command()
@processes_option
@threads_option
@grace_option
@click.pass_obj
@handle_errors
def up(obj: Ctx, processes: int | None, threads: int | None, grace: float) -> None:
    """Run everything a single machine needs: the worker pool and the scheduler (the eight
    maintenance schedules) on the configured broker, embedded by default. Migrates both
    databases first (as `mnemo db migrate`).

    The scheduler stands for the leader lease like any `mnemo scheduler`: if another
    scheduler already leads, this one stands by. SIGTERM or Ctrl-C stops both cleanly.

    Example:

        MNEMO_DATA_DIR=~/mnemo-data mnemo up
    """
    service = start_memory_worker(obj.settings)
    try:
        _run(obj, processes, threads, grace)
    finally:
        service.stop()


@click.command()
@click.pass_obj
@handle_errors
def scheduler(obj: Ctx) -> None:
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
    progress(f"mnemo: scheduler on the {settings.broker_kind} broker (lease "
             f"{settings.scheduler_lease_seconds} s); SIGTERM or Ctrl-C stops it")
    run_scheduler(settings, stop_on_signals())
