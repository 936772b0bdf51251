"""The actors: one thin Dramatiq actor per job of the contract (``memory_core.jobs``).

``declare_actors(broker, context)`` declares them on an explicit broker (see
``workers.entry`` for why not ``@dramatiq.actor`` at import). Name, queue, priority, retries,
backoff, time limit and age limit all come from the job, so the contract and the workers
cannot drift; a test checks that every job has exactly one actor on the same queue.

An actor runs its step (``workers.steps``) with the process's context, hands the step's
mutations to the Audit middleware (``workers.audit.report``) and then handles the step's
follow-up jobs, after the effect committed. A follow-up's message id is derived from the
turn and the job (or, for a follow-up of no one turn, the parent message's id and the job:
``memory_core.jobs.follow_up_id``). A follow-up whose job is ``inline`` (a turn's
extraction, anchoring and consolidation) runs right there, in the same message, its audit
rows keyed by that id; one that raises, and every other follow-up, is enqueued under that
id, offered with ``enqueue_once``: both brokers keep an id that is still queued once, so a
redelivered parent re-sends the same messages, and the audit rows of a re-run step are
ignored as duplicates. A crash between two inline steps leaves the parent unacked: it comes
back and each step already done finds its idempotency key.

The maintenance actors (queue ``maintenance``, one per schedule job) run
``workers.maintenance.run_maintenance`` instead of a step: the job body plus the firing
ledger. Their follow-ups (reconsolidation's next partition) carry the same ``window``.

Actors let errors raise: Retries retries them with backoff and dead-letters after the last
retry. Bad input (``InvalidInputError``, which includes an unknown tenant) and configuration
errors (a mirror without a sink), and a mirror refusing a batch for good (``MirrorError``: its
schema is newer than this mnemo) cannot get better by retrying: they are in ``throws=`` and
go straight to the dead letters (``mnemo queue requeue`` replays them once fixed). A mirror
that is down (``MirrorUnavailable``) is retried with backoff.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

import dramatiq
import structlog
from dramatiq import Actor, Broker, Message
from dramatiq.middleware import CurrentMessage

from memory_core.brokers.base import send_once
from memory_core.errors import ConfigurationError, InvalidInputError
from memory_core.jobs import (
    JOBS,
    MAINTENANCE,
    QUEUES,
    Job,
    build_message,
    check_payload,
    follow_up_id,
)
from memory_core.mirrors.sink import MirrorError
from workers.audit import report
from workers.context import LazyContext, WorkerContext
from workers.maintenance import run_maintenance
from workers.steps import STEPS, StepResult

log = structlog.get_logger("mnemo.worker")

NON_RETRYABLE: tuple[type[Exception], ...] = (InvalidInputError, ConfigurationError,
                                              MirrorError)

__all__ = ["NON_RETRYABLE", "declare_actors", "follow_up_id", "follow_up_message"]


def follow_up_message(parent_id: str | None, job: str, kwargs: dict[str, Any]) -> Message[Any]:
    """The follow-up ``job`` message; a fresh id when there is no parent message (and the
    follow-up is not a turn's: those have one id per job and turn)."""
    message = build_message(job, **kwargs)
    if parent_id is None and "turn_uid" not in kwargs:
        return message
    parent_id = parent_id or ""
    return dataclasses.replace(message, message_id=follow_up_id(parent_id, job, kwargs))


def _current_message_id() -> str | None:
    message = CurrentMessage.get_current_message()
    return None if message is None else str(message.message_id)


def _run_step(ctx: WorkerContext, step: Callable[..., StepResult], kwargs: dict[str, Any],
              message_id: str | None, offer: Callable[[Message[Any]], bool],
              inline: Collection[str]) -> None:
    """Run one step, report its audit rows under ``message_id``, then its follow-ups:
    inline jobs of the queues in ``inline`` here, the others and any inline one that raised
    as messages of their own."""
    result = step(ctx, **kwargs)
    report(ctx.ops, result.audit, message_id)
    for name, payload in result.follow_ups:
        job = JOBS[name]
        if job.inline and job.queue in inline and _ran_inline(ctx, name, payload, message_id,
                                                              offer, inline):
            continue
        # Offered, not re-sent: a copy of the follow-up still waiting or in flight (a
        # redelivered parent, or one the completeness check re-sent) is left as it is.
        offer(follow_up_message(message_id, name, payload))


def _ran_inline(ctx: WorkerContext, name: str, payload: dict[str, Any],
                parent_id: str | None, offer: Callable[[Message[Any]], bool],
                inline: Collection[str]) -> bool:
    """Run follow-up ``name`` inline, under the id it has as a message; False when it
    raised (it is then queued: its own retries and dead letter; what it committed before
    raising is guarded by its idempotency key)."""
    check_payload(JOBS[name], payload)  # what building its message would check (a bug)
    message_id = follow_up_id(parent_id or "", name, payload)
    try:
        _run_step(ctx, STEPS[name], payload, message_id, offer, inline)
    except Exception as e:
        log.warning("inline_step_failed", job=name, error=type(e).__name__,
                    queued=message_id)
        return False
    return True


def _actor_fn(job: Job, step: Callable[..., StepResult], context: LazyContext,
              broker: Broker, inline: Collection[str]) -> Callable[..., None]:
    def run(**kwargs: Any) -> None:
        _run_step(context.get(), step, kwargs, _current_message_id(), send_once(broker),
                  inline)

    run.__name__ = run.__qualname__ = job.name
    run.__doc__ = job.doc
    return run


def _maintenance_fn(job: Job, context: LazyContext, broker: Broker) -> Callable[..., None]:
    def run(window: str, **kwargs: Any) -> None:
        parent = _current_message_id()
        offer = send_once(broker)
        result = run_maintenance(context.get(), job.name, window, parent, offer, **kwargs)
        if result is None:
            return
        for name, payload in result.follow_ups:
            offer(follow_up_message(parent, name, {"window": window, **payload}))

    run.__name__ = run.__qualname__ = job.name
    run.__doc__ = job.doc
    return run


def declare_actors(broker: Broker, context: LazyContext | None = None, *,
                   inline: Collection[str] | None = None) -> dict[str, Actor[Any, Any]]:
    """Declare one actor per job on ``broker``; return them by name.

    ``context``: the worker context the actors share (default: built from the environment
    on the first message). ``inline``: the queues whose inline jobs run in their parent's
    message (default: all; a worker that consumes only some queues passes those, so the
    others' work stays queued for the workers that consume them; empty: every follow-up is
    a message of its own, the path a failed inline step and the completeness check take).
    Idempotent per broker (declaring again replaces the actors).
    """
    inline = QUEUES if inline is None else frozenset(inline)
    context = context or LazyContext()
    actors = {}
    for job in JOBS.values():
        step = STEPS.get(job.name)
        if job.queue == MAINTENANCE:
            fn = _maintenance_fn(job, context, broker)
        elif step is None:
            raise ValueError(f"job {job.name} has no step in workers.steps: add one")
        else:
            fn = _actor_fn(job, step, context, broker, inline)
        decorate = dramatiq.actor(broker=broker, throws=NON_RETRYABLE, **job.actor_options())
        actors[job.name] = decorate(fn)
    return actors
