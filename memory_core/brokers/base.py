"""What both brokers share: the queue-operations interface and message hygiene.

Both brokers are Dramatiq ``Broker`` subclasses (enqueue, consume, ack, nack, requeue, flush,
join come from Dramatiq's contract). On top of that each implements ``QueueAdmin``, the four
operations behind ``mnemo queue``. One contract test suite runs over both.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from dramatiq import Message
from dramatiq.broker import MessageProxy
from dramatiq.common import q_name

# Options never stored with a message: ``eta`` is the broker's business (a column or a delay
# queue), and Dramatiq's ``traceback`` may quote an error message, which may quote memory
# text. What is kept of an error is its type name, in ``last_error``.
_DROPPED_OPTIONS = ("eta", "traceback")


@dataclass(frozen=True)
class QueueStats:
    """One queue's counts. ``oldest_age_s``: age of the oldest ready message, if any."""

    queue: str
    ready: int
    delayed: int
    in_flight: int
    dead: int
    oldest_age_s: float | None


@dataclass(frozen=True)
class DeadLetter:
    """A dead-lettered message, described by ids only (never its payload)."""

    queue: str
    message_id: str
    actor: str
    retries: int
    dead_at: datetime | None
    last_error: str | None  # the exception's type name


class QueueAdmin(Protocol):
    """Operations on a broker's stored messages (``mnemo queue``).

    Capabilities: ``kind`` (``embedded`` or ``redis``) is a class attribute.
    """

    kind: str

    def queue_stats(self, queues: tuple[str, ...] = ()) -> list[QueueStats]:
        """Counts for ``queues`` plus every queue the broker holds messages for."""
        ...

    def dead_letters(self, queue: str | None = None, limit: int = 100) -> list[DeadLetter]:
        """Dead letters, oldest first (all queues when ``queue`` is None)."""
        ...

    def requeue_dead(self, queue: str | None = None,
                     message_ids: tuple[str, ...] = ()) -> int:
        """Move dead letters back to their queues with a fresh retry budget; return how many.

        Idempotent: a message already requeued is no longer dead and is not counted again.
        """
        ...

    def purge(self, queue: str | None = None, *, include_waiting: bool = False,
              dry_run: bool = False) -> int:
        """Delete dead letters (and waiting messages with ``include_waiting``); return how many.

        In-flight messages are never purged. ``dry_run`` counts without deleting.
        """
        ...


def stored_message(message: Message[Any] | MessageProxy) -> Message[Any]:
    """The message as a broker stores it: canonical queue name, no eta, no traceback.

    Accepts the ``MessageProxy`` that Dramatiq's Retries middleware re-enqueues, and records
    the type name of the exception it carries in ``options["last_error"]``.
    """
    base = message._message if isinstance(message, MessageProxy) else message
    options = {k: v for k, v in message.options.items() if k not in _DROPPED_OPTIONS}
    exc = getattr(message, "_exception", None) if isinstance(message, MessageProxy) else None
    if exc is not None:
        options["last_error"] = type(exc).__name__
    return dataclasses.replace(base, queue_name=q_name(base.queue_name), options=options)


def fresh_retry_budget(message: Message[Any]) -> Message[Any]:
    """A copy of a dead message that Retries will treat as never retried."""
    options = {k: v for k, v in message.options.items()
               if k not in ("retries", "requeue_timestamp", "eta", "traceback")}
    return dataclasses.replace(message, queue_name=q_name(message.queue_name), options=options)
