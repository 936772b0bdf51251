"""Building a broker (workers, operators) or an enqueuer (the chat side) from Settings.

``MNEMO_BROKER_URL`` unset or ``sqlite:///PATH`` selects the embedded broker (in
``memory_ops.db`` unless PATH names another file: ``sqlite:///rel.db``,
``sqlite:////abs/path.db``); ``redis://`` or ``rediss://`` selects Redis. Nothing connects at
import; the embedded broker opens (and migrates) its file when built, Redis connects on the
first command.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from dramatiq import Broker, Message
from dramatiq.middleware import Middleware

from memory_core.brokers.base import send_once
from memory_core.settings import Settings


class Enqueuer(Protocol):
    """What the chat side sends through. ``send`` returns the message id.

    Embedded: one INSERT (raises BrokerError if the file cannot be written). Redis: Redis or
    the spool; never raises because Redis is down.
    """

    kind: str

    def send(self, message: Message[Any]) -> str: ...

    def offer(self, message: Message[Any]) -> bool:
        """Enqueue ``message`` unless its id is already queued; True when queued now.

        Embedded: an id still in the queue (waiting, leased or dead) is left as it is.
        Redis: an id sent within the dedupe TTL (``MnemoRedisBroker.enqueue_once``), or
        still in the spool, is not sent again. Raises as ``send``.
        """
        ...

    def close(self) -> None: ...


class BrokerEnqueuer:
    """Sends straight to a broker (the embedded one: a local file cannot be "down")."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.kind = getattr(broker, "kind", type(broker).__name__)

    def send(self, message: Message[Any]) -> str:
        return str(self.broker.enqueue(message).message_id)

    def offer(self, message: Message[Any]) -> bool:
        return bool(send_once(self.broker)(message))

    def close(self) -> None:
        self.broker.close()


def embedded_path(settings: Settings) -> Path:
    """The embedded queue's file: ``sqlite:///PATH`` or else ``memory_ops.db``."""
    url = settings.broker_url or ""
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return Path(url[len("sqlite:///"):]).expanduser()
    return settings.ops_db_path


def make_broker(settings: Settings, *, middleware: Sequence[Middleware] = (),
                namespace: str = "mnemo", lease_seconds: float | None = None,
                heartbeat_timeout_ms: int | None = None,
                maintenance_interval_s: float | None = None,
                background_checkpoint: bool = False) -> Any:
    """The configured broker (``EmbeddedBroker`` or ``MnemoRedisBroker``) with ``middleware``.

    Workers pass their middleware stack (``workers.middleware.worker_middleware()``);
    operators and enqueue-only callers pass none. ``background_checkpoint`` (embedded, the
    chat side): enqueues never run a WAL checkpoint, a thread does. Raises StoreError when
    the embedded file cannot be opened.
    """
    if settings.broker_kind == "embedded":
        from memory_core.brokers.embedded import EmbeddedBroker

        return EmbeddedBroker(
            embedded_path(settings), middleware=list(middleware),
            lease_seconds=lease_seconds or settings.queue_lease_seconds,
            busy_timeout_ms=settings.busy_timeout_ms,
            background_checkpoint=background_checkpoint)
    from memory_core.brokers import redis as redis_mod

    return redis_mod.MnemoRedisBroker(
        client=redis_mod.redis_client(settings), namespace=namespace, middleware=list(middleware),
        heartbeat_timeout=heartbeat_timeout_ms or redis_mod.DEFAULT_HEARTBEAT_TIMEOUT_MS,
        maintenance_interval_s=maintenance_interval_s
        or redis_mod.DEFAULT_MAINTENANCE_INTERVAL_S)


def make_enqueuer(settings: Settings, *, namespace: str = "mnemo") -> Enqueuer:
    """The chat side's sender. Redis: a short-timeout client (``MNEMO_REDIS_TIMEOUT_MS``)
    with the spool in ``memory_ops.db`` behind it."""
    if settings.broker_kind == "embedded":
        return BrokerEnqueuer(make_broker(settings, background_checkpoint=True))
    from memory_core.brokers.redis import MnemoRedisBroker, redis_client
    from memory_core.brokers.spool import Spool, SpoolingEnqueuer
    from memory_core.db.checkpoint import WalCheckpointer
    from memory_core.db.stores import Database, open_ops

    client = redis_client(settings, timeout_ms=settings.redis_timeout_ms)
    broker = MnemoRedisBroker(client=client, namespace=namespace, middleware=[])
    open_ops(settings).close()  # create or migrate the schema
    spool_db = Database(settings.ops_db_path, "ops", busy_timeout_ms=settings.busy_timeout_ms,
                        autocheckpoint=False)
    spool_db.conn  # noqa: B018 - open now: the first outage must not pay for opening it
    checkpointer = WalCheckpointer(spool_db)
    journal = None
    if settings.turn_journal:
        from memory_core.brokers.journal import Journal

        journal = Journal(spool_db, checkpointer)
    return SpoolingEnqueuer(broker, Spool(spool_db, checkpointer), journal=journal)


def make_relay(settings: Settings, broker: Any, holder: str, *,
               interval_s: float = 1.0) -> Any:
    """The spool relay thread for a Redis worker process (None for the embedded broker);
    with ``MNEMO_TURN_JOURNAL`` it relays the turn journal too."""
    if settings.broker_kind != "redis":
        return None
    from memory_core.brokers.spool import Spool, SpoolRelay
    from memory_core.db.stores import open_ops

    ops = open_ops(settings)
    return SpoolRelay(broker, Spool(ops), holder, interval_s=interval_s,
                      journal=make_journal_relay(settings, ops))


def make_journal_relay(settings: Settings, ops: Any) -> Any:
    """The turn journal's relay over ``ops`` (None when the journal is off)."""
    if not settings.turn_journal:
        return None
    from memory_core.brokers.journal import Journal
    from memory_core.brokers.spool import JournalRelay
    from memory_core.db.stores import open_state

    return JournalRelay(Journal(ops),
                        functools.partial(open_state, settings, migrate=False, readonly=True),
                        resend_s=settings.turn_journal_resend_s,
                        interval_s=min(5.0, settings.turn_journal_resend_s / 2))
