"""Embedding ahead: a worker starts embedding a turn's episode when its consumer hands the
``record_turn`` message out, not when a worker thread reaches it.

The batching front (``memory_core.embedders.batching``) batches the texts of the threads
that are waiting for the model, so its batches could never be larger than the thread count
(2 x 8 threads: 4.4 texts a batch on LoCoMo turns). The consumer leases messages ahead of
the threads (Dramatiq's prefetch); ``prefetch`` hands each leased turn's episode text to the
front at once, so the model gets batches as large as the work waiting, and the thread that
later records the turn finds the vector ready (or waits for its batch).

It is only a warm-up: the thread embeds exactly as before whatever was not prefetched (a
turn that fails validation, a batch that failed, a row dropped from the bounded store), so
nothing about correctness, idempotency or errors depends on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memory_core.errors import MnemoError
from memory_core.jobs import RECORD_TURN, get_job
from memory_core.settings import Settings
from memory_core.write import pipeline


def episode_text_of(message: Any, max_turn_chars: int) -> str | None:
    """The text ``record_turn`` will embed for ``message``'s turn, or None (another job, or
    a turn the actor will refuse)."""
    if getattr(message, "actor_name", None) != RECORD_TURN:
        return None
    turn = (getattr(message, "kwargs", None) or {}).get("turn")
    if not isinstance(turn, Mapping):
        return None
    try:
        return pipeline.episode_text_for(turn, max_turn_chars)
    except (MnemoError, TypeError, ValueError, AttributeError, KeyError):
        return None  # the actor reports it


class LookaheadConsumer:
    """A broker's consumer whose every delivered message goes through ``hook`` first."""

    def __init__(self, consumer: Any, hook: Callable[[Any], None]) -> None:
        self._consumer = consumer
        self._hook = hook

    def __iter__(self) -> LookaheadConsumer:
        return self

    def __next__(self) -> Any:
        message = next(self._consumer)
        if message is not None:
            self._hook(message)
        return message

    def __getattr__(self, name: str) -> Any:  # ack, nack, requeue, close, ...
        return getattr(self._consumer, name)


def embed_ahead(broker: Any, embedder: Any, settings: Settings) -> bool:
    """Make ``broker``'s consumers prefetch the episode text of each ``record_turn`` they
    deliver on ``embedder``, and lease up to ``MNEMO_EMBED_BATCH_MAX_TEXTS`` turn messages
    ahead (Dramatiq's default, twice the threads, would cap the batches again). Only for a
    batching front over a semantic model (the hash embedder costs microseconds a text:
    nothing to batch for). Returns whether it did."""
    prefetch = getattr(embedder, "prefetch", None)
    if prefetch is None or not getattr(embedder, "semantic", False):
        return False
    consume = broker.consume
    turns_queue = get_job(RECORD_TURN).queue
    ahead = settings.embed_batch_max_texts

    def hook(message: Any) -> None:
        text = episode_text_of(message, settings.max_turn_chars)
        if text is not None:
            prefetch([text])

    def consume_ahead(queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
        if queue_name == turns_queue:
            prefetch = max(prefetch, ahead)
        return LookaheadConsumer(consume(queue_name, prefetch, timeout), hook)

    broker.consume = consume_ahead
    return True
