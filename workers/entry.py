"""One worker process: build the broker, declare the actors on it, run a Dramatiq Worker.

Actors are declared by ``declare_actors(broker)`` on an explicit broker, after the broker
exists, instead of ``@dramatiq.actor`` at import time: importing ``workers`` has no side
effects, and a test can run several brokers (embedded and Redis) in one process. The broker
is still made the global one (``dramatiq.set_broker``) for code that asks Dramatiq for it.

A worker process migrates both databases and builds its context before it serves
(``run_worker_process``): the workers and the operator's `mnemo` commands create and upgrade
schemas, the chat process only checks them. A process whose embedder differs from the one
recorded for the data exits (code 1) before it takes a message, logging why.

Shutdown (SIGTERM or SIGINT): the spool relay stops, the Worker stops taking messages,
worker threads finish their current message (up to ``grace_s``), prefetched messages are
returned to the queue, and ``broker.close()`` returns whatever is still leased (embedded);
on Redis an unfinished message is requeued by maintenance once this process's heartbeat
is stale.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

import dramatiq
import redis
import structlog
from dramatiq import Worker

from memory_core.brokers import make_broker, make_relay
from memory_core.brokers.durability import check_broker_persistence
from memory_core.db.faults import storage_status
from memory_core.db.stores import migrate_stores
from memory_core.errors import MnemoError
from memory_core.log import configure_logging
from memory_core.settings import Settings
from workers.actors import declare_actors
from workers.context import LazyContext, WorkerContext, warm_extractor
from workers.lookahead import embed_ahead
from workers.middleware import Heartbeats, install_log_redaction, worker_middleware

log = structlog.get_logger("mnemo.worker")

DEFAULT_GRACE_S = 30.0


def build_worker_broker(settings: Settings, *,
                        declare: Callable[[Any], Any] | None = None,
                        context: LazyContext | None = None,
                        guard_interval_s: float | None = None,
                        guard_check_s: float | None = None,
                        queues: set[str] | None = None,
                        **broker_options: Any) -> Any:
    """The configured broker with the worker middleware and the actors declared on it.

    ``declare`` replaces the post-turn actors (tests); ``context`` is the worker context they
    share (default: built from ``settings`` on the first message); ``queues``: the queues
    this worker will consume (default: all), the only ones whose follow-ups its actors run
    inline (``workers.actors``). ``broker_options`` go to
    ``make_broker`` (namespace, lease_seconds, heartbeat_timeout_ms, maintenance_interval_s).
    The stack has a StorageGuard on this data dir's ``storage_status``, probing every
    ``guard_interval_s`` while paused and every ``guard_check_s`` while not (defaults:
    ``MNEMO_STORAGE_RETRY_S``, ``MNEMO_STORAGE_CHECK_S``; ``workers.storage_guard``), and
    the process's heartbeat. Raises StoreError / ConfigurationError from the factory, and
    ConfigurationError when Redis runs without persistence and
    ``MNEMO_REDIS_REQUIRE_PERSISTENCE`` is on.
    """
    probe = functools.partial(storage_status, settings)
    # background_checkpoint (embedded): acks and enqueues never run a WAL checkpoint inside
    # their commit (memory_ops.db's write lock is shared by every worker process).
    broker_options.setdefault("background_checkpoint", True)
    broker = make_broker(settings, middleware=worker_middleware(
        probe, settings.storage_retry_s if guard_interval_s is None else guard_interval_s,
        heartbeats=Heartbeats(settings),
        guard_check_s=settings.storage_check_s if guard_check_s is None else guard_check_s),
        **broker_options)
    _check_persistence(settings, broker)
    dramatiq.set_broker(broker)
    if declare is not None:
        declare(broker)
    else:
        declare_actors(broker, context or LazyContext(settings), inline=queues)
    return broker


def _check_persistence(settings: Settings, broker: Any) -> None:
    """Warn (or refuse) when the Redis broker is not persistent (``brokers.durability``).

    An unreachable Redis is not refused here: the worker waits for it like for any outage.
    """
    try:
        check_broker_persistence(settings, getattr(broker, "client", None))
    except redis.RedisError as e:
        log.warning("redis_persistence_unchecked", error=type(e).__name__)
    except BaseException:
        broker.close()
        raise


def serve(settings: Settings, broker: Any, stop: threading.Event, *, threads: int,
          grace_s: float = DEFAULT_GRACE_S, queues: set[str] | None = None) -> None:
    """Run a Worker on ``broker`` (plus the spool relay on Redis) until ``stop`` is set.

    ``queues``: only these (default: every declared queue)."""
    broker.emit_after("process_boot")  # starts TimeLimit's watchdog, as Dramatiq's CLI does
    worker = Worker(broker, worker_threads=threads, worker_timeout=1000, queues=queues)
    worker.start()
    holder = f"{socket.gethostname()}:{os.getpid()}"
    relay = make_relay(settings, broker, holder)
    if relay is not None:
        relay.start()
    log.info("worker_started", pid=os.getpid(), threads=threads,
             broker=getattr(broker, "kind", "?"), queues=sorted(broker.get_declared_queues()))
    stop.wait()
    log.info("worker_stopping", pid=os.getpid(), grace_s=grace_s)
    if relay is not None:
        relay.stop()
    worker.stop(timeout=int(grace_s * 1000))
    broker.close()
    log.info("worker_stopped", pid=os.getpid())


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (call from the main thread)."""
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def run_worker_process(settings: Settings, threads: int, grace_s: float = DEFAULT_GRACE_S,
                       broker_options: dict[str, Any] | None = None) -> None:
    """The body of one worker process (``workers.pool`` starts N of these)."""
    configure_logging(settings)
    install_log_redaction()
    stop = stop_on_signals()
    context = LazyContext(settings, opener=functools.partial(WorkerContext.open,
                                                             threads=threads))
    try:
        migrate_stores(settings)  # before serving; idempotent, so N processes may all run it
        context.get()  # loads and claims the embedder now, not on the first message
        warm_extractor()  # and compiles the extractor's common rules (~1 CPU-s) now
    except MnemoError as e:
        log.error("worker_refused", pid=os.getpid(), error=type(e).__name__, reason=str(e))
        sys.exit(1)
    broker = build_worker_broker(settings, context=context, **(broker_options or {}))
    embed_ahead(broker, context.get().index.embedder, settings)
    try:
        serve(settings, broker, stop, threads=threads, grace_s=grace_s)
    finally:
        context.close()
