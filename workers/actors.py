"""The actors: one thin Dramatiq actor per job of the contract (``memory_core.jobs``).

``declare_actors(broker)`` declares them on an explicit broker (see ``workers.entry`` for why
not ``@dramatiq.actor`` at import). Name, queue, priority, retries, backoff, time limit and
age limit all come from the job, so the contract and the workers cannot drift; a test checks
that every job has exactly one actor on the same queue.

Actors let errors raise: Retries retries them with backoff and dead-letters after the last
retry. Every actor is idempotent (the work they call writes its idempotency key in the same
transaction as its effect), since delivery is at least once.

Phase 1 scaffold: the post-turn work lives in ``memory_core.pipeline`` (the write-path
issue). Until it provides the job's function, a post-turn message fails with
``PipelineNotInstalled``,
which is declared in ``throws=``: the message goes straight to the dead letters, where
``mnemo queue requeue`` picks it up once the pipeline is installed. Nothing is lost.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import dramatiq
from dramatiq import Actor, Broker

from memory_core.errors import MnemoError
from memory_core.jobs import JOBS, Job


class PipelineNotInstalled(MnemoError):
    """``memory_core.pipeline`` (the post-turn functions) is not part of this install."""


def _pipeline_step(name: str) -> Callable[..., Any]:
    try:
        step = getattr(importlib.import_module("memory_core.pipeline"), name, None)
    except ModuleNotFoundError:
        step = None
    if step is None:
        raise PipelineNotInstalled(
            f"job {name} needs memory_core.pipeline.{name}, which this install lacks: upgrade "
            "mnemo, then run `mnemo queue requeue` to replay the dead-lettered messages")
    return step  # type: ignore[no-any-return]


def _post_turn_actor(job: Job) -> Callable[..., None]:
    def run(**kwargs: Any) -> None:
        _pipeline_step(job.name)(**kwargs)

    run.__name__ = run.__qualname__ = job.name
    run.__doc__ = job.doc
    return run


def declare_actors(broker: Broker) -> dict[str, Actor[Any, Any]]:
    """Declare one actor per job on ``broker``; return them by name. Idempotent per broker
    (declaring again replaces the actors by name)."""
    actors = {}
    for job in JOBS.values():
        fn = _post_turn_actor(job)
        actors[job.name] = dramatiq.actor(fn, broker=broker, throws=(PipelineNotInstalled,),
                                          **job.actor_options())
    return actors
