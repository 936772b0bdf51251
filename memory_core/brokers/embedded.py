"""The embedded broker: a Dramatiq ``Broker`` over a SQLite file (``memory_ops.db``).

One row per message in ``queue_messages``. Enqueue is one INSERT (durable at commit). A
consumer leases ready rows atomically (``UPDATE ... WHERE id IN (SELECT ... LIMIT n)
RETURNING`` under ``BEGIN IMMEDIATE``), so several worker processes on one machine share the
queue without double delivery. While a process holds leases a keeper thread renews them, so
long tasks are not redelivered; a lease that runs out (the process died) makes the row
deliverable again, which every process's keeper checks. Ack deletes the delivery's row, nack
marks it ``dead`` (a dead letter), requeue (worker shutdown) releases the lease.

Delays: Dramatiq's Redis and stub brokers park delayed messages on a ``<queue>.DQ`` queue that
a worker holds in memory until the eta. Here the eta is a column and a consumer only leases
rows whose eta has passed, so delayed messages are never held (nor leased) by a worker and no
delay queue is declared; ``enqueue(message, delay=...)`` (what Retries calls) just sets it.

Delivery is at least once; ``attempts`` counts deliveries and is the delivery's token, so an
ack or nack from a delivery whose lease was lost changes nothing.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any
from uuid import uuid4

import structlog
from dramatiq import Message
from dramatiq.broker import Broker, Consumer, MessageProxy
from dramatiq.common import q_name
from dramatiq.errors import ConnectionClosed, DecodeError, QueueJoinTimeout, QueueNotFound

from memory_core.brokers import embedded_sql as sql
from memory_core.brokers.base import error_reason, stored_message
from memory_core.brokers.embedded_admin import EmbeddedAdmin
from memory_core.db.checkpoint import WalCheckpointer
from memory_core.db.sqlite import atomic, sqlite_module, write_lock
from memory_core.db.stores import Database
from memory_core.errors import BrokerError

log = structlog.get_logger("mnemo.queue")

FETCH_BATCH = 32  # rows leased per round trip, at most


def _db_error() -> type[Exception]:
    return sqlite_module().Error


class EmbeddedBroker(EmbeddedAdmin, Broker):
    """A durable Dramatiq broker in a SQLite file. Thread- and process-safe.

    Parameters: ``path`` of the ops database (migrated on open); ``lease_seconds`` a delivery
    is held before redelivery unless renewed; ``poll_max_ms`` the longest idle wait between
    polls (an enqueue in the same process wakes a consumer at once). Opening raises
    StoreError when the file cannot be opened; enqueue raises BrokerError when it cannot be
    written. Nothing is opened or started at import.
    """

    kind = "embedded"

    def __init__(self, path: Path | str, *, lease_seconds: float = 60.0,
                 busy_timeout_ms: int = 5000, middleware: list[Any] | None = None,
                 poll_max_ms: int = 100, keeper_interval_s: float | None = None,
                 background_checkpoint: bool = False) -> None:
        super().__init__(middleware=middleware)
        self.path = Path(path)
        self.lease_seconds = float(lease_seconds)
        self.poll_max_ms = poll_max_ms
        self.keeper_interval_s = keeper_interval_s or max(0.2, min(self.lease_seconds / 4, 5.0))
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:8]}"
        self.queues: set[str] = set()
        # background_checkpoint (the chat side's enqueuer): an enqueue never pays for a WAL
        # checkpoint; a thread of this broker checkpoints instead (``WalCheckpointer``).
        self.db = Database(self.path, "ops", busy_timeout_ms=busy_timeout_ms,
                           autocheckpoint=not background_checkpoint)
        self.db.migrate()
        self.db.require_current()
        # watch: also after the acks and leases (of any process) that note no write
        self._checkpointer = (WalCheckpointer(self.db, watch=True) if background_checkpoint
                              else None)
        self._wakeups: dict[str, threading.Event] = {}
        self._keeper: _LeaseKeeper | None = None
        self._lock = threading.Lock()
        # Deliveries given back but not yet released (the write failed): never renewed.
        self._abandoned: set[tuple[int, int]] = set()

    # -- Dramatiq's broker contract -------------------------------------------------------

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 1000) -> Consumer:
        """A consumer of ``queue_name`` (declared first); starts the lease keeper."""
        if queue_name not in self.queues:
            raise QueueNotFound(queue_name)
        self._ensure_keeper()
        return _EmbeddedConsumer(self, queue_name, prefetch, timeout)

    def declare_queue(self, queue_name: str) -> None:
        """Declare a queue (idempotent). No delay queue: etas are a column here."""
        if queue_name not in self.queues:
            self.emit_before("declare_queue", queue_name)
            self.queues.add(queue_name)
            self._wakeups.setdefault(queue_name, threading.Event())
            self.emit_after("declare_queue", queue_name)

    def get_declared_queues(self) -> set[str]:
        return set(self.queues)

    def enqueue(self, message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        """Store ``message`` (one INSERT), deliverable after ``delay`` ms. Returns it.

        Idempotent per message id: enqueueing a waiting or dead message again changes
        nothing; enqueueing a leased one re-arms it with the new eta (that is how Retries
        schedules a retry). Raises BrokerError when the database cannot be written.
        """
        return self._insert(sql.ENQUEUE, message, delay)[0]

    def enqueue_once(self, message: Message[Any]) -> bool:
        """Store ``message`` unless a message with its id is stored already; True if stored.

        What a sender uses (``Enqueuer.offer``): a duplicate of a waiting message is dropped,
        of a leased one too (unlike ``enqueue``, it never re-arms the delivery being worked
        on, which would run it twice), of a dead one too (it stays dead until `mnemo queue
        requeue`). An id already acked is gone from the table, so it is stored again: the
        senders of turns check the state db for that case. Raises BrokerError as ``enqueue``.
        """
        return self._insert(sql.ENQUEUE_ONCE, message, None)[1]

    def _insert(self, statement: str, message: Message[Any],
                delay: int | None) -> tuple[Message[Any], bool]:
        msg = stored_message(message)
        now = time.time()
        eta = now + (delay or 0) / 1000
        self.emit_before("enqueue", msg, delay)
        try:
            conn = self.db.conn
            with write_lock(conn):
                stored = conn.execute(statement, (msg.message_id, msg.queue_name,
                                                  msg.actor_name, msg.encode(), eta,
                                                  now)).rowcount == 1
        except _db_error() as e:
            raise BrokerError(
                f"cannot enqueue {msg.actor_name} into {self.path} ({type(e).__name__}): check "
                "the disk and that no process holds a long write lock on the ops database"
            ) from e
        self.emit_after("enqueue", msg, delay)
        if self._checkpointer is not None:
            self._checkpointer.note_write()
        wakeup = self._wakeups.get(msg.queue_name)
        if wakeup is not None and not delay:
            wakeup.set()
        return msg, stored

    def flush(self, queue_name: str) -> None:
        """Drop every message of ``queue_name``, dead letters included."""
        self.db.conn.execute(sql.FLUSH, (q_name(queue_name),))

    def flush_all(self) -> None:
        """Drop every message of every declared queue."""
        for queue_name in list(self.queues):
            self.flush(queue_name)

    def join(self, queue_name: str, *, timeout: int | None = None, interval: int = 50) -> None:
        """Wait until ``queue_name`` has no ready, delayed or leased message (tests).

        Raises QueueJoinTimeout after ``timeout`` ms.
        """
        deadline = timeout and time.monotonic() + timeout / 1000
        while self.db.conn.execute(sql.PENDING, (queue_name,)).fetchone()[0]:
            if deadline and time.monotonic() >= deadline:
                raise QueueJoinTimeout(queue_name)
            time.sleep(interval / 1000)

    def close(self) -> None:
        """Stop the keeper, return this process's leased messages, close the database.

        Call it after the worker has stopped: whatever is still leased then was not finished.
        """
        with self._lock:
            keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.stop()
        if self._checkpointer is not None:
            self._checkpointer.stop()
        try:
            released = self.db.conn.execute(sql.RELEASE_OWNER, (self.owner,)).rowcount
            if released:
                log.info("leases_released", count=released)
        except _db_error() as e:
            log.warning("lease_release_failed", error=type(e).__name__)
        self.db.close()

    # -- used by consumers and the keeper -------------------------------------------------

    def _ensure_keeper(self) -> None:
        with self._lock:
            if self._keeper is None:
                self._keeper = _LeaseKeeper(self)
                self._keeper.start()

    def _fetch(self, queue_name: str, limit: int) -> list[Any]:
        """Lease up to ``limit`` ready rows: [(id, attempts, body, eta)], eta order."""
        conn = self.db.conn
        now = time.time()
        if conn.execute(sql.PEEK, (queue_name, now)).fetchone() is None:
            return []
        with atomic(conn):
            rows = conn.execute(sql.LEASE, (self.owner, now + self.lease_seconds,
                                            queue_name, now, limit)).fetchall()
        rows.sort(key=lambda r: (r[3], r[0]))
        return rows

    def _ack(self, row_id: int, attempts: int) -> None:
        conn = self.db.conn
        with write_lock(conn):
            conn.execute(sql.ACK, (row_id, attempts, self.owner))

    def _bury(self, row_id: int, attempts: int, error: str | None, body: bytes | None) -> None:
        conn = self.db.conn
        with write_lock(conn):
            conn.execute(sql.BURY, (time.time(), error, body, row_id, attempts, self.owner))

    def _release(self, deliveries: list[tuple[int, int]]) -> None:
        if deliveries:
            with atomic(self.db.conn) as conn:
                conn.executemany(sql.RELEASE, [(r, a, self.owner) for r, a in deliveries])

    def _abandon(self, delivery: tuple[int, int]) -> None:
        """Stop renewing one delivery's lease: the keeper releases it, or it runs out."""
        with self._lock:
            self._abandoned.add(delivery)

    def _keep_leases(self) -> int:
        """Release abandoned deliveries, renew this process's other leases, then free
        expired ones; return how many expired."""
        conn = self.db.conn
        now = time.time()
        with self._lock:
            abandoned = sorted(self._abandoned)
        with write_lock(conn):
            if abandoned:
                conn.executemany(sql.RELEASE, [(r, a, self.owner) for r, a in abandoned])
                with self._lock:
                    self._abandoned.difference_update(abandoned)
            conn.execute(sql.RENEW, (now + self.lease_seconds, self.owner))
            return len(conn.execute(sql.RECLAIM, (now,)).fetchall())


class _Delivery(MessageProxy):
    """A delivered message and the (row id, attempts) pair that names this delivery."""

    def __init__(self, message: Message[Any], row_id: int, attempts: int) -> None:
        super().__init__(message)
        self.row_id = row_id
        self.attempts = attempts


class _EmbeddedConsumer(Consumer):
    """Leases rows in batches up to ``prefetch`` outstanding; idles with a capped backoff."""

    def __init__(self, broker: EmbeddedBroker, queue_name: str, prefetch: int,
                 timeout: int) -> None:
        self.broker = broker
        self.queue_name = queue_name
        self.prefetch = max(1, prefetch)
        self.max_wait_ms = max(1, min(timeout, broker.poll_max_ms))
        self.wakeup = broker._wakeups.setdefault(queue_name, threading.Event())
        self.cache: deque[Any] = deque()
        self.outstanding: set[tuple[int, int]] = set()
        self.lock = threading.Lock()
        self.misses = 0

    def __next__(self) -> MessageProxy | None:
        try:
            while self.cache:
                delivery = self._deliver(self.cache.popleft())
                if delivery is not None:
                    return delivery
            with self.lock:
                room = self.prefetch - len(self.outstanding)
            if room > 0:
                rows = self.broker._fetch(self.queue_name, min(room, FETCH_BATCH))
                if rows:
                    self.misses = 0
                    self.cache.extend(rows)
                    return self.__next__()
        except _db_error() as e:
            raise ConnectionClosed(e) from e
        if room <= 0:
            # Prefetch is full, which is not an empty queue: no backoff. A worker thread's
            # ack (``_done``) wakes us as soon as there is room.
            wait_ms = self.max_wait_ms
        else:
            self.misses = min(self.misses + 1, 16)
            wait_ms = min(self.max_wait_ms, 2 ** self.misses)
        self.wakeup.wait(wait_ms / 1000)
        self.wakeup.clear()
        return None

    def _deliver(self, row: Any) -> _Delivery | None:
        row_id, attempts, body = row[0], row[1], row[2]
        try:
            message = Message.decode(bytes(body))
        except DecodeError:
            self.broker._bury(row_id, attempts, "DecodeError", None)
            log.error("message_undecodable", row_id=row_id)
            return None
        with self.lock:
            self.outstanding.add((row_id, attempts))
        return _Delivery(message, row_id, attempts)

    def _done(self, message: Any) -> None:
        with self.lock:
            self.outstanding.discard((message.row_id, message.attempts))
        self.wakeup.set()  # room to fetch again (worker threads ack, not the consumer thread)

    def ack(self, message: Any) -> None:
        if getattr(message, "retry_unscheduled", False):
            self._give_back(message)
            return
        try:
            self.broker._ack(message.row_id, message.attempts)
        except _db_error() as e:
            raise ConnectionClosed(e) from e
        self._done(message)

    def _give_back(self, message: Any) -> None:
        """A failed message whose retry could not be stored (``DurableRetries``): return it
        to the queue now, or, when the database cannot take even that, stop renewing its
        lease so it returns when the lease runs out. Never acked, never held forever."""
        delivery = (message.row_id, message.attempts)
        try:
            self.broker._release([delivery])
        except _db_error() as e:
            self.broker._abandon(delivery)
            log.warning("lease_abandoned", row_id=message.row_id, error=type(e).__name__)
        self._done(message)

    def nack(self, message: Any) -> None:
        exc = getattr(message, "_exception", None)
        error = type(exc).__name__ if exc is not None else None
        # The body stays as last enqueued (like Redis' dead letters); the error type is kept,
        # and an error with an id-only reason (``MnemoError.reason``) gets it written into
        # the body's options (``stored_message``), as on Redis. Never a traceback.
        body = stored_message(message).encode() if exc is not None and error_reason(
            exc) else None
        try:
            self.broker._bury(message.row_id, message.attempts, error, body)
        except _db_error() as e:
            raise ConnectionClosed(e) from e
        self._done(message)

    def requeue(self, messages: Any) -> None:
        deliveries = [(m.row_id, m.attempts) for m in messages]
        self.broker._release(deliveries)
        with self.lock:
            self.outstanding.difference_update(deliveries)

    def close(self) -> None:
        """Return the rows leased but never handed to a worker thread."""
        rows, self.cache = list(self.cache), deque()
        try:
            self.broker._release([(r[0], r[1]) for r in rows])
        except _db_error() as e:
            log.warning("lease_release_failed", error=type(e).__name__)


class _LeaseKeeper(threading.Thread):
    """Renews this process's leases and frees expired ones, every ``keeper_interval_s``."""

    def __init__(self, broker: EmbeddedBroker) -> None:
        super().__init__(name="mnemo-lease-keeper", daemon=True)
        self.broker = broker
        self.stopped = threading.Event()

    def run(self) -> None:
        while True:
            try:
                expired = self.broker._keep_leases()
                if expired:
                    log.warning("leases_expired", count=expired)
            except Exception as e:  # keep renewing: a missed beat costs a redelivery only
                log.warning("lease_keeper_failed", error=type(e).__name__)
            if self.stopped.wait(self.broker.keeper_interval_s):
                return

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
