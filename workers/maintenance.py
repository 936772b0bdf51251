"""The maintenance runs: a schedule job's message -> its body, with the ledger kept here, once.

``run_maintenance`` is what every maintenance actor calls (``workers.actors``). It:

1. reads the window key (``macro_sleep@2026-12-01T06:00:00Z`` or ``manual:<uuid>``) and skips
   the message when the ledger says that window is done (a redelivery, or a second message for
   the window): exactly once per window on top of at-least-once delivery;
2. builds the body's ``JobEnv``, with ``now`` = the window's start (a manual run: the clock),
   so a late or repeated run of a window computes what it would have on time;
3. calls ``memory_core.maintenance.bodies.BODIES[job]`` (looked up per call: the wiring never
   copies a body);
4. records the outcome: ``done`` with the report's counts and the run's duration, or
   ``running`` while the body chains follow-ups (reconsolidation partitions), or ``failed``
   with the error's type name, and re-raises so Retries and dead letters work.

The bodies keep their own idempotency keys in the database their effect is in; the ledger is
in ``memory_ops.db``, another file, so "done" is written after the body committed: a kill in
between runs the (idempotent) body once more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog
from dramatiq import Message

from memory_core.clock import utcnow
from memory_core.db.sqlite import sqlite_module
from memory_core.errors import InvalidInputError
from memory_core.maintenance import firings
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.bodies import BODIES
from workers.context import WorkerContext

log = structlog.get_logger("mnemo.maintenance")

RECONSOLIDATION = "global_reconsolidation"


def _body_kwargs(ctx: WorkerContext, job: str, window: str,
                 kwargs: dict[str, Any]) -> dict[str, Any]:
    """The first firing of reconsolidation starts its partition chain (the rest carry it)."""
    if job == RECONSOLIDATION and "partition" not in kwargs:
        return {"run_id": kwargs.get("run_id", window), "partition": 0,
                "partitions": kwargs.get("partitions", ctx.settings.recon_partitions)}
    return kwargs


def _numbers(counts: dict[str, Any]) -> dict[str, int | float]:
    return {k: v for k, v in counts.items() if isinstance(v, int | float)}


def run_maintenance(ctx: WorkerContext, job: str, window: str, message_id: str | None,
                    offer: Callable[[Message[Any]], bool] | None = None,
                    **kwargs: Any) -> JobReport | None:
    """Run job ``job`` for window ``window``; None when the window is already done.

    ``offer``: the broker's ``enqueue_once`` (the completeness check re-sends lost
    post-turn follow-ups through it). Raises InvalidInputError for a window key that is
    malformed or names another schedule (dead-lettered at once), and whatever the body
    raises (retried).
    """
    schedule_id, start = firings.parse_window_key(window)
    schedule_id = schedule_id or job  # a manual key names no schedule: the job's own
    if schedule_id != job:
        raise InvalidInputError(f"job {job} got window {window!r} of schedule {schedule_id}: "
                                "a window runs the job of its own schedule")
    now = utcnow()
    ops = ctx.ops.conn
    if not firings.begin_run(ops, schedule_id, window, message_id=message_id,
                             window_start=start, now=now):
        log.info("maintenance_skipped", job=job, window=window, reason="window_done")
        return None
    env = JobEnv(ctx.settings, ctx.state, ctx.ops, ctx.index, now=start or now, window=window,
                 offer=offer)
    started = time.perf_counter()
    try:
        report = BODIES[job](env, **_body_kwargs(ctx, job, window, kwargs))
    except BaseException as e:  # Interrupts too (TimeLimit, Shutdown): the run did not finish
        ms = round((time.perf_counter() - started) * 1000)
        try:
            firings.fail_run(ops, schedule_id, window, error=type(e).__name__,
                             duration_ms=ms, now=utcnow())
        except sqlite_module().Error as ledger_error:  # never hide the body's error
            log.error("ledger_write_failed", job=job, window=window,
                      error=type(ledger_error).__name__)
        log.warning("maintenance_failed", job=job, window=window, duration_ms=ms,
                    error=type(e).__name__)
        raise
    ms = round((time.perf_counter() - started) * 1000)
    # A run that says "not done" but chains nothing would leave its window open for ever.
    done = report.done or not report.follow_ups
    firings.finish_run(ops, schedule_id, window, counts=report.counts, duration_ms=ms,
                       done=done, now=utcnow())
    log.info("maintenance_done", job=job, window=window, duration_ms=ms, done=done,
             follow_ups=len(report.follow_ups), counts=_numbers(report.counts))
    return report
