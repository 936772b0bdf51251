"""Cross-cutting behaviour of every actor, written once: log context, timing, age-out.

``worker_middleware()`` is the stack a worker broker gets. ``LogContext`` comes first so it
binds the message's context before anything else runs and, as ``after_*`` hooks run in
reverse, writes the summary line after Retries has decided between retry and dead letter.
Retry policy and time limits are Dramatiq's own middleware, driven by each job's options
(``memory_core.jobs``). ``Audit`` (``workers.audit``) comes last, so its ``after_*`` hook runs
first: it writes the audit rows the actor reported, once the actor returned. Memory text
never reaches a log: context is ids only, and Dramatiq's own log lines are redacted to
``actor[message_id]`` (``install_log_redaction``). ``Heartbeats`` (only on brokers built by
``workers.entry``) keeps this process's row in ``memory_ops.db`` alive on a timer.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import structlog
from dramatiq import Message
from dramatiq.broker import Broker, MessageProxy
from dramatiq.common import current_millis
from dramatiq.middleware import (
    Callbacks,
    CurrentMessage,
    Middleware,
    Pipelines,
    Retries,
    ShutdownNotifications,
    SkipMessage,
    TimeLimit,
)

from memory_core.clock import utcnow
from memory_core.db.stores import open_ops
from memory_core.extraction.version import HEARTBEAT_RULES, RULES_VERSION
from memory_core.heartbeats import WORKER, Counters, Heartbeater
from memory_core.settings import Settings
from workers.audit import Audit
from workers.storage_guard import Probe, StorageGuard, storage_guard_of

log = structlog.get_logger("mnemo.worker")

_LEVELS = {"ok": "info", "skipped": "info", "retry": "warning", "dead": "error"}


class LogContext(Middleware):
    """Binds message_id, actor and tenant (never text) per message; logs ``message_done``.

    The summary carries ``duration_ms``, ``outcome`` (ok, retry, dead, skipped), ``retries``
    and, on failure, ``error`` (the exception's type name only).
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def before_process_message(self, broker: Broker, message: MessageProxy) -> None:
        context: dict[str, Any] = {"message_id": message.message_id,
                                   "actor": message.actor_name}
        tenant = message.kwargs.get("tenant")
        if isinstance(tenant, str):
            context["tenant"] = tenant
        tokens = structlog.contextvars.bind_contextvars(**context)
        self._local.state = (tokens, time.perf_counter())

    def after_process_message(self, broker: Broker, message: MessageProxy, *,
                              result: Any = None, exception: BaseException | None = None
                              ) -> None:
        if exception is None:
            outcome = "ok"
        else:
            outcome = "dead" if message.failed else "retry"
        self._done(message, outcome, exception)

    def after_skip_message(self, broker: Broker, message: MessageProxy) -> None:
        self._done(message, "dead" if message.failed else "skipped", None)

    def _done(self, message: MessageProxy, outcome: str,
              exception: BaseException | None) -> None:
        state = getattr(self._local, "state", None)
        self._local.state = None
        tokens, started = state if state else ({}, time.perf_counter())
        fields: dict[str, Any] = {
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
            "outcome": outcome,
            "retries": message.options.get("retries", 0),
        }
        if exception is not None:
            fields["error"] = type(exception).__name__
        getattr(log, _LEVELS[outcome])("message_done", **fields)
        if tokens:
            structlog.contextvars.reset_contextvars(**tokens)


class AgeOut(Middleware):
    """Skips (and acks) a message older than its actor's ``max_age`` ms.

    Unlike Dramatiq's AgeLimit it does not dead-letter: stale low-value work is dropped on
    purpose, and a later run covers it. Actors without ``max_age`` (turns) never age out.
    """

    @property
    def actor_options(self) -> set[str]:
        return {"max_age"}

    def before_process_message(self, broker: Broker, message: MessageProxy) -> None:
        max_age = broker.get_actor(message.actor_name).options.get("max_age")
        if max_age and current_millis() - message.message_timestamp >= max_age:
            raise SkipMessage("message aged out")


class DurableRetries(Retries):
    """Retries whose failure to schedule a retry never acks the message.

    Dramatiq's Retries schedules a retry by enqueueing the message again; when that enqueue
    fails (the ops database is full or read-only), its error is logged by the broker and the
    worker then acks, which would drop the message (or, when the ack fails too, leave it
    leased). Here the delivery is marked ``retry_unscheduled``: the embedded consumer's ack
    then returns it to the queue instead (or lets its lease run out), so it is redelivered.
    """

    def after_process_message(self, broker: Broker, message: MessageProxy, *,
                              result: Any = None, exception: BaseException | None = None
                              ) -> None:
        try:
            super().after_process_message(broker, message, result=result, exception=exception)
        except Exception as e:
            message.retry_unscheduled = True  # type: ignore[attr-defined]
            log.error("retry_unscheduled", error=type(e).__name__,
                      fix="the message returns to the queue; check the ops database's disk")


class Heartbeats(Middleware):
    """This worker process's heartbeat (``memory_core.heartbeats``).

    Started when the Worker boots (its queues are declared by then), written by a timer
    thread every ``MNEMO_HEARTBEAT_INTERVAL_S``, marked stopped when the Worker has shut
    down cleanly. Per message only two in-memory counters and a time change: no I/O on the
    hot path. With a StorageGuard on the broker, its state is the beat's ``detail``
    (``{"storage": ...}``) and a pause or resume beats at once.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.counters = Counters()
        self.heartbeater: Heartbeater | None = None

    def after_worker_boot(self, broker: Broker, worker: Any) -> None:
        ops = open_ops(self.settings)
        guard = storage_guard_of(broker)
        self.heartbeater = Heartbeater(
            ops, WORKER, interval_s=self.settings.heartbeat_interval_s,
            keep_s=self.settings.heartbeat_keep_s, counters=self.counters,
            queues=lambda: sorted(broker.get_declared_queues()),
            detail=lambda: _beat_detail(guard))
        if guard is not None:
            guard.on_change(self.heartbeater.nudge)
        self.heartbeater.start()

    def after_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        beater, self.heartbeater = self.heartbeater, None
        if beater is not None:
            beater.stop()
            beater.db.close()

    def after_process_message(self, broker: Broker, message: MessageProxy, *,
                              result: Any = None, exception: BaseException | None = None
                              ) -> None:
        self.counters.record(utcnow(), failed=exception is not None)

    def after_skip_message(self, broker: Broker, message: MessageProxy) -> None:
        self.counters.record(utcnow(), failed=bool(message.failed))


def _beat_detail(guard: StorageGuard | None) -> dict[str, Any]:
    """What a worker's heartbeat says besides being alive: the extractor rules it runs
    (``mnemo memory status`` tells a rolling upgrade by them) and its StorageGuard's
    state."""
    detail: dict[str, Any] = {HEARTBEAT_RULES: RULES_VERSION}
    if guard is not None:
        detail["storage"] = guard.state()
    return detail


def worker_middleware(storage_probe: Probe | None = None, guard_interval_s: float = 5.0, *,
                      heartbeats: Heartbeats | None = None,
                      guard_check_s: float | None = 60.0) -> list[Middleware]:
    """The middleware of a worker broker, in order (see the module docstring).

    ``storage_probe`` (``storage_status`` of the worker's settings) adds a StorageGuard
    (probing every ``guard_interval_s`` while paused, every ``guard_check_s`` while not);
    ``heartbeats``: the process's heartbeat (``workers.entry`` passes both; tests of actor
    logic on a StubBroker leave them out).
    """
    guard: list[Middleware] = (
        [StorageGuard(storage_probe, interval_s=guard_interval_s, check_s=guard_check_s)]
        if storage_probe else [])
    stack: list[Middleware] = [
        LogContext(), *guard, AgeOut(), TimeLimit(), ShutdownNotifications(), Callbacks(),
        Pipelines(), DurableRetries(), CurrentMessage(), Audit()]
    if heartbeats is not None:
        stack.append(heartbeats)
    return stack


def _redacted(arg: Any) -> Any:
    if isinstance(arg, Message | MessageProxy):
        return f"{arg.actor_name}[{arg.message_id}]"
    return arg


class WithheldError(Exception):
    """Stands in for an exception whose message a log line must not carry."""


def _withheld(exc_info: Any) -> Any:
    """``exc_info`` with the exception replaced by a ``WithheldError`` naming only its type
    (the traceback's frames are code, and stay)."""
    if not isinstance(exc_info, tuple) or len(exc_info) != 3 or exc_info[1] is None:
        return exc_info
    exc = exc_info[1]
    if isinstance(exc, WithheldError):
        return exc_info
    stand_in = WithheldError(f"{type(exc).__module__}.{type(exc).__qualname__} "
                             "(its message is withheld: it may quote memory text)")
    return (WithheldError, stand_in, exc_info[2])


class RedactMessages(logging.Filter):
    """Rewrites Dramatiq's log records: a message prints as ``actor[message_id]``, and an
    exception as its type without its message.

    Dramatiq logs ``str(message)``, which includes the payload (a turn's text), and logs an
    actor's exception with its message, which may quote it (``ValueError(text)``).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("dramatiq"):
            return True
        if record.args:
            if isinstance(record.args, tuple):
                record.args = tuple(_redacted(a) for a in record.args)
            elif isinstance(record.args, dict):
                record.args = {k: _redacted(v) for k, v in record.args.items()}
        if record.exc_info:
            record.exc_info = _withheld(record.exc_info)
            record.exc_text = None
        return True


def install_log_redaction() -> None:
    """Attach ``RedactMessages`` to every root handler (idempotent; call after logging is
    configured)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactMessages) for f in handler.filters):
            handler.addFilter(RedactMessages())
