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

With ``MNEMO_TURN_JOURNAL`` on, the sender also keeps each record_turn message in the turn
journal (``memory_core.brokers.journal``) until a worker has recorded the turn, and the
relay thread re-sends what Redis lost (``JournalRelay``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis
import structlog
from dramatiq import Broker, Message
from dramatiq.common import q_name
from dramatiq.errors import DecodeError

from memory_core.brokers.base import send_once
from memory_core.brokers.journal import Journal, JournalReport, relay_journal
from memory_core.brokers.redis import MnemoRedisBroker
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

    def put(self, message: Message[Any], *, body: bytes | None = None) -> bool:
        """Store ``message``; False when its id is spooled already (``message_id`` is unique
        in the table, so the spool never holds an id twice). Raises BrokerError if it
        cannot. ``body``: the message already encoded (the turn journal's copy).
        """
        body = message.encode() if body is None else body
        try:
            stored = self._insert(self.db.conn, message, body)
            if self.checkpointer is not None:
                self.checkpointer.note_write()
            return stored
        except sqlite_module().Error as e:
            raise BrokerError(
                f"Redis is unreachable and the spool in {self.db.path} cannot be written "
                f"({type(e).__name__}): start Redis or free the disk; the message was not kept"
            ) from e

    @staticmethod
    def _insert(conn: Any, message: Message[Any], body: bytes) -> bool:
        return bool(conn.execute(
            "INSERT OR IGNORE INTO spool (message_id, queue_name, body, spooled_at) "
            "VALUES (?, ?, ?, ?)", (message.message_id, message.queue_name, body,
                                    time.time())).rowcount == 1)

    def size(self) -> int:
        return int(self.db.conn.execute("SELECT count(*) FROM spool").fetchone()[0])

    def sizes(self) -> dict[str, int]:
        """Spooled messages per queue (a delay queue's under its queue's name)."""
        out: dict[str, int] = {}
        for name, count in self.db.conn.execute(
                "SELECT queue_name, count(*) FROM spool GROUP BY queue_name"):
            out[q_name(name)] = out.get(q_name(name), 0) + int(count)
        return out

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

    def __init__(self, broker: MnemoRedisBroker, spool: Spool, *, cooldown_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic,
                 journal: Journal | None = None) -> None:
        self.broker = broker
        self.spool = spool
        self.journal = journal  # the sender's own copy until the turn is recorded
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._down_until = 0.0

    def send(self, message: Message[Any]) -> str:
        """Enqueue ``message`` on Redis or spool it; return its message id."""
        self._deliver(message, self.broker.enqueue)
        return message.message_id

    def offer(self, message: Message[Any]) -> bool:
        """``send``, unless the id was sent within the dedupe TTL or is spooled already;
        True when it was queued (or spooled) now. A copy spooled earlier and sent again
        directly is kept out when the relay forwards it (the relay offers too)."""
        return self._deliver(message, self.broker.enqueue_once)

    def _deliver(self, message: Message[Any], enqueue: Callable[[Message[Any]], Any]) -> bool:
        body = None  # the journal's encoding, reused by the spool
        if self.journal is not None:  # first: a crash after the send still leaves the copy
            body = self.journal.put(message)
        if self.clock() < self._down_until:
            return self.spool.put(message, body=body)
        try:
            result = enqueue(message)
        except _REDIS_DOWN as e:
            if self._down_until == 0.0:
                log.warning("redis_unreachable_spooling", error=type(e).__name__)
            self._down_until = self.clock() + self.cooldown_s
            return self.spool.put(message, body=body)
        if self._down_until:
            log.info("redis_reachable_again")
        self._down_until = 0.0
        return result if isinstance(result, bool) else True

    def close(self) -> None:
        if self.spool.checkpointer is not None:
            self.spool.checkpointer.stop()
        self.spool.db.close()


def relay_spool(broker: Broker, spool: Spool, *, batch: int = 200,
                keep_going: Callable[[], bool] | None = None) -> int:
    """Forward the spool to ``broker`` oldest first until it is empty or Redis fails.

    Deletes each batch's forwarded rows after Redis accepted them. Each row is offered
    (``enqueue_once`` when the broker has it), so an id that reached Redis by another way
    (sent again directly once Redis was back, or relayed before a crash) is not doubled.
    ``keep_going`` is asked before each batch (the relay thread renews its lease there).
    Returns how many rows were forwarded (or found already sent). Never raises for a Redis
    outage: it stops and leaves the rest for later.
    """
    forwarded = 0
    enqueue = send_once(broker)
    while keep_going is None or keep_going():
        rows = spool.oldest(batch)
        if not rows:
            return forwarded
        done: list[int] = []
        try:
            for row_id, body in rows:
                try:
                    enqueue(Message.decode(body))
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
                 interval_s: float = 1.0, journal: JournalRelay | None = None) -> None:
        super().__init__(name="mnemo-spool-relay", daemon=True)
        self.broker = broker
        self.spool = spool
        self.journal = journal
        self.holder = holder
        self.interval_s = interval_s
        self.leases = SqliteLeases(spool.db)
        # Long enough that a slow batch never loses the lease between renewals.
        self.lease_ttl_s = max(30.0, 30 * interval_s)
        self.stopped = threading.Event()

    def _leased(self) -> bool:
        return not self.stopped.is_set() and self.leases.claim(
            RELAY_LEASE, self.holder, self.lease_ttl_s)

    def tick(self) -> int:
        """One round: relay the spool (then, when due, the turn journal) if the lease is
        ours. Returns how many spooled messages were forwarded."""
        forwarded = 0
        if self.spool.size():
            forwarded = relay_spool(self.broker, self.spool, keep_going=self._leased)
            if forwarded:
                log.info("spool_relayed", count=forwarded, left=self.spool.size())
        if self.journal is not None:
            self.journal.tick(self.broker, self._leased)
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
        if self.journal is not None:
            self.journal.close()
        self.spool.db.close()


class JournalRelay:
    """The turn journal's part of the relay thread: every ``interval_s``, drop what is
    recorded and re-send what Redis lost (``relay_journal``)."""

    def __init__(self, journal: Journal, open_state: Callable[[], Database], *,
                 resend_s: float, interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.journal = journal
        self.open_state = open_state  # read-only, opened when first needed
        self.state: Database | None = None
        self.resend_s = resend_s
        self.interval_s = interval_s
        self.clock = clock
        self._next = 0.0

    def tick(self, broker: Broker, leased: Callable[[], bool]) -> JournalReport | None:
        """One pass when due and the journal has rows; None otherwise."""
        if self.clock() < self._next:
            return None
        self._next = self.clock() + self.interval_s
        if not self.journal.size():
            return None
        if self.state is None:
            self.state = self.open_state()
        report = relay_journal(broker, self.journal, self.state.conn,
                               resend_s=self.resend_s, keep_going=leased)
        if report.resent or report.held:
            log.warning("turn_journal_resent", resent=report.resent, held=report.held,
                        dropped=report.dropped, pending=report.pending)
        return report

    def close(self) -> None:
        if self.state is not None:
            self.state.close()
