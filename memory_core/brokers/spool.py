"""The spool: where ``after_turn`` puts a message while Redis is unreachable, and its relay.

The chat side sends through ``SpoolingEnqueuer``: a Redis client with short timeouts and no
retries; on any Redis or socket error the encoded message is written to the ``spool`` table of
``memory_ops.db`` (one INSERT) and ``send`` returns. After a failure it spools directly for a
short cooldown instead of paying a failed connect per message.

``relay_spool`` forwards the spool to Redis oldest first and deletes a row only after Redis
accepted it: at least once (a crash in between forwards it again; actors are idempotent).
``SpoolRelay`` runs it on a timer in each worker process; the ``spool-relay`` lease
(``memory_core.db.leases``, renewed before each batch) lets one process relay at a time.
Messages sent directly while older ones wait in the spool can overtake them: the post-turn
actors do not depend on arrival order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis
import structlog
from dramatiq import Broker, Message
from dramatiq.errors import DecodeError

from memory_core.db.checkpoint import WalCheckpointer
from memory_core.db.leases import SqliteLeases
from memory_core.db.sqlite import atomic, sqlite_module
from memory_core.db.stores import Database
from memory_core.errors import BrokerError

log = structlog.get_logger("mnemo.queue")

RELAY_LEASE = "spool-relay"
_REDIS_DOWN = (redis.RedisError, OSError)


class Spool:
    """Encoded messages waiting for Redis, in the ops database's ``spool`` table."""

    def __init__(self, db: Database, checkpointer: WalCheckpointer | None = None) -> None:
        self.db = db
        # The chat side's spool never checkpoints inside a put (see memory_core.db.checkpoint).
        self.checkpointer = checkpointer

    def put(self, message: Message[Any]) -> None:
        """Store ``message`` (idempotent per message id). Raises BrokerError if it cannot."""
        try:
            self.db.conn.execute(
                "INSERT OR IGNORE INTO spool (message_id, queue_name, body, spooled_at) "
                "VALUES (?, ?, ?, ?)",
                (message.message_id, message.queue_name, message.encode(), time.time()))
            if self.checkpointer is not None:
                self.checkpointer.note_write()
        except sqlite_module().Error as e:
            raise BrokerError(
                f"Redis is unreachable and the spool in {self.db.path} cannot be written "
                f"({type(e).__name__}): start Redis or free the disk; the message was not kept"
            ) from e

    def size(self) -> int:
        return int(self.db.conn.execute("SELECT count(*) FROM spool").fetchone()[0])

    def oldest(self, limit: int) -> list[tuple[int, bytes]]:
        rows = self.db.conn.execute(
            "SELECT id, body FROM spool ORDER BY id LIMIT ?", (limit,)).fetchall()
        return [(r[0], bytes(r[1])) for r in rows]

    def delete(self, ids: list[int]) -> None:
        if ids:
            with atomic(self.db.conn) as conn:
                conn.executemany("DELETE FROM spool WHERE id = ?", [(i,) for i in ids])


class SpoolingEnqueuer:
    """The chat side's sender for Redis: Redis if it answers in time, else the spool.

    ``send`` never raises because Redis is down; it raises BrokerError only when the spool
    cannot be written either (then nothing kept the message).
    """

    kind = "redis"

    def __init__(self, broker: Broker, spool: Spool, *, cooldown_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker = broker
        self.spool = spool
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._down_until = 0.0

    def send(self, message: Message[Any]) -> str:
        """Enqueue ``message`` on Redis or spool it; return its message id."""
        if self.clock() < self._down_until:
            self.spool.put(message)
            return message.message_id
        try:
            self.broker.enqueue(message)
        except _REDIS_DOWN as e:
            if self._down_until == 0.0:
                log.warning("redis_unreachable_spooling", error=type(e).__name__)
            self._down_until = self.clock() + self.cooldown_s
            self.spool.put(message)
        else:
            if self._down_until:
                log.info("redis_reachable_again")
            self._down_until = 0.0
        return message.message_id

    def close(self) -> None:
        if self.spool.checkpointer is not None:
            self.spool.checkpointer.stop()
        self.spool.db.close()


def relay_spool(broker: Broker, spool: Spool, *, batch: int = 200,
                keep_going: Callable[[], bool] | None = None) -> int:
    """Forward the spool to ``broker`` oldest first until it is empty or Redis fails.

    Deletes each batch's forwarded rows after Redis accepted them. ``keep_going`` is asked
    before each batch (the relay thread renews its lease there). Returns how many were
    forwarded. Never raises for a Redis outage: it stops and leaves the rest for later.
    """
    forwarded = 0
    while keep_going is None or keep_going():
        rows = spool.oldest(batch)
        if not rows:
            return forwarded
        done: list[int] = []
        try:
            for row_id, body in rows:
                try:
                    broker.enqueue(Message.decode(body))
                except DecodeError:
                    log.error("spool_row_undecodable_dropped", row_id=row_id)
                done.append(row_id)
        except _REDIS_DOWN as e:
            log.info("spool_relay_paused", error=type(e).__name__, forwarded=len(done))
            spool.delete(done)
            return forwarded + len(done)
        spool.delete(done)
        forwarded += len(done)
    return forwarded


class SpoolRelay(threading.Thread):
    """Relays the spool every ``interval_s`` while this process holds the relay lease."""

    def __init__(self, broker: Broker, spool: Spool, holder: str, *,
                 interval_s: float = 1.0) -> None:
        super().__init__(name="mnemo-spool-relay", daemon=True)
        self.broker = broker
        self.spool = spool
        self.holder = holder
        self.interval_s = interval_s
        self.leases = SqliteLeases(spool.db)
        # Long enough that a slow batch never loses the lease between renewals.
        self.lease_ttl_s = max(30.0, 30 * interval_s)
        self.stopped = threading.Event()

    def tick(self) -> int:
        """One round: relay if the spool has rows and the lease is ours. Returns forwarded."""
        if not self.spool.size():
            return 0
        def leased() -> bool:
            return not self.stopped.is_set() and self.leases.claim(
                RELAY_LEASE, self.holder, self.lease_ttl_s)

        forwarded = relay_spool(self.broker, self.spool, keep_going=leased)
        if forwarded:
            log.info("spool_relayed", count=forwarded, left=self.spool.size())
        return forwarded

    def run(self) -> None:
        while not self.stopped.wait(self.interval_s):
            try:
                self.tick()
            except Exception as e:  # the relay must outlive any one bad round
                log.warning("spool_relay_failed", error=type(e).__name__)

    def stop(self) -> None:
        """Stop the thread (if started), give the lease up, close the spool's database."""
        self.stopped.set()
        if self.ident is not None:
            self.join(timeout=10)
        try:
            self.leases.release(RELAY_LEASE, self.holder)
        except sqlite_module().Error as e:
            log.warning("spool_lease_release_failed", error=type(e).__name__)
        self.spool.db.close()
