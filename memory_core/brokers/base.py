"""What both brokers share: the queue-operations interface and message hygiene.

Both brokers are Dramatiq ``Broker`` subclasses (enqueue, consume, ack, nack, requeue, flush,
join come from Dramatiq's contract). On top of that each implements ``QueueAdmin``, the four
operations behind ``mnemo queue``. One contract test suite runs over both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from dramatiq import Broker, Message
from dramatiq.broker import MessageProxy
from dramatiq.common import q_name

from memory_core.errors import MnemoError

# Options never stored with a message: ``eta`` is the broker's business (a column or a delay
# queue), and Dramatiq's ``traceback`` may quote an error message, which may quote memory
# text. What is kept of an error is its type name, in ``last_error``, and for a mnemo error
# that has one its ``reason`` (ids only, never text: ``MnemoError.reason``) in
# ``last_error_reason``.
_DROPPED_OPTIONS = ("eta", "traceback")
_ERROR_OPTIONS = ("last_error", "last_error_reason")
MAX_REASON_CHARS = 500


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
    reason: str | None = None  # the error's id-only reason (``MnemoError.reason``), if any


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
        for key in _ERROR_OPTIONS:
            options.pop(key, None)
        options["last_error"] = type(exc).__name__
        reason = error_reason(exc)
        if reason:
            options["last_error_reason"] = reason
    return dataclasses.replace(base, queue_name=q_name(base.queue_name), options=options)


def error_reason(exc: BaseException) -> str | None:
    """The id-only reason a mnemo error carries (``MnemoError.reason``), bounded; else None.

    Only mnemo's own errors are asked: their raisers vouch that the reason holds ids, never
    memory text. Any other exception keeps its type name alone.
    """
    reason = getattr(exc, "reason", None) if isinstance(exc, MnemoError) else None
    return reason[:MAX_REASON_CHARS] if isinstance(reason, str) and reason else None


def dead_reason(message: Message[Any] | None) -> str | None:
    """The reason stored with a dead message, if any."""
    reason = None if message is None else message.options.get("last_error_reason")
    return reason if isinstance(reason, str) else None


def fresh_retry_budget(message: Message[Any]) -> Message[Any]:
    """A copy of a dead message that Retries will treat as never retried."""
    options = {k: v for k, v in message.options.items()
               if k not in ("retries", "requeue_timestamp", "eta", "traceback",
                            *_ERROR_OPTIONS)}
    return dataclasses.replace(message, queue_name=q_name(message.queue_name), options=options)


def send_once(broker: Broker) -> Callable[[Message[Any]], bool]:
    """The broker's send-once, ``enqueue_once`` (False: that id is already queued); a broker
    without one (a StubBroker in actor tests) sends, and that is True."""
    once: Callable[[Message[Any]], bool] | None = getattr(broker, "enqueue_once", None)
    if once is not None:
        return once

    def send(message: Message[Any]) -> bool:
        broker.enqueue(message)
        return True

    return send
