"""The turn journal: the chat host's own copy of what ``after_turn`` sent to Redis.

Redis may lose a message (a restart without persistence, a failover, a flush); the spool
only covers the time Redis is unreachable. So, on the Redis broker and with
``MNEMO_TURN_JOURNAL`` on (the default), the chat side's sender (``SpoolingEnqueuer``)
writes each ``record_turn`` message to the ``turn_journal`` table of ``memory_ops.db``
before it sends it: one ``INSERT OR IGNORE`` on a connection that never checkpoints inline
(the spool's), tens of microseconds (``bench/enqueue.py --journal on,off``). Durable against
a crash of the chat process (the row is in the WAL in the OS's page cache when ``after_turn``
returns), not against a power loss before the background checkpoint's fsync
(``synchronous=NORMAL``). When Redis is down the spool stores the journal's encoding of the
message (one encoding for both rows). The two rows stay two autocommit INSERTs: one
transaction holding both measured no faster (docs/benchmarks.md). A journal that cannot
be written is logged and the send goes on: the journal is a safety net, never a reason to
refuse a turn.

``relay_journal`` (run by the spool relay thread of a worker process, ``SpoolRelay``) reads
the journal oldest first, page by page, and

- deletes every entry whose turn is recorded in ``memory_state.db`` (its ``record_turn``
  ``applied_jobs`` key exists: recorded, or recorded and deleted since);
- re-sends the entries still unrecorded ``MNEMO_TURN_JOURNAL_RESEND_S`` after they were
  sent or last re-sent, with ``enqueue_once``: a copy Redis still holds (queued, in flight,
  retrying or dead) keeps the id's guard and is not doubled; a copy Redis lost took its
  guard with it, so it is queued again.

The journal's entries after the check are what is visibly pending: ``mnemo queue verify``
counts them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
import structlog
from dramatiq import Broker, Message
from dramatiq.errors import DecodeError

from memory_core.brokers.base import send_once
from memory_core.db.checkpoint import WalCheckpointer
from memory_core.db.sqlite import Connection, atomic, sqlite_module
from memory_core.db.stores import Database
from memory_core.jobs import RECORD_TURN, applied_key

log = structlog.get_logger("mnemo.queue")

JOURNALED = RECORD_TURN  # the one job whose loss nothing downstream could notice
RECORDED_KIND = "record_turn"  # its applied_jobs key kind (memory_core.write.pipeline)
_REDIS_DOWN = (redis.RedisError, OSError)


_PUT = ("INSERT OR IGNORE INTO turn_journal (message_id, tenant, turn_uid, body, sent_at) "
        "VALUES (?, ?, ?, ?, ?)")


class Journal:
    """``turn_journal`` rows in an ops database."""

    def __init__(self, db: Database, checkpointer: WalCheckpointer | None = None) -> None:
        self.db = db
        self.checkpointer = checkpointer  # the chat side's: never checkpoint inside a put

    def put(self, message: Message[Any], now: float | None = None) -> bytes | None:
        """Keep ``message`` (a record_turn; other jobs are ignored); returns its encoded body
        (for the spool, should Redis fail), None when not kept. Never raises: a write error
        is logged and the message is sent without its copy.

        One prepared ``INSERT`` (the driver caches the statement) on this thread's
        long-lived connection, in autocommit: WAL with ``synchronous=NORMAL``, so the row is
        in the WAL file (the OS's page cache) when this returns. That survives a crash of
        the chat process, not a power loss or kernel crash before the next checkpoint's
        fsync (the background checkpointer's, within about a second).
        """
        if message.actor_name != JOURNALED:
            return None
        body = message.encode()
        kwargs = message.kwargs
        turn = kwargs.get("turn") or {}
        try:
            self.db.conn.execute(_PUT, (message.message_id, kwargs.get("tenant"),
                                        turn.get("turn_uid"), body,
                                        time.time() if now is None else now))
            if self.checkpointer is not None:
                self.checkpointer.note_write()
        except sqlite_module().Error as e:
            log.warning("turn_journal_write_failed", error=type(e).__name__)
            return None
        return body

    def size(self) -> int:
        return int(self.db.conn.execute("SELECT count(*) FROM turn_journal").fetchone()[0])

    def page(self, after: int, limit: int) -> list[tuple[Any, ...]]:
        """``(id, message_id, tenant, turn_uid, body, last sent)`` rows after row ``after``."""
        return self.db.conn.execute(
            "SELECT id, message_id, tenant, turn_uid, body, coalesce(resent_at, sent_at) "
            "FROM turn_journal WHERE id > ? ORDER BY id LIMIT ?", (after, limit)).fetchall()

    def delete(self, ids: list[int]) -> None:
        if ids:
            with atomic(self.db.conn) as conn:
                conn.executemany("DELETE FROM turn_journal WHERE id = ?", [(i,) for i in ids])

    def mark_resent(self, ids: list[int], now: float) -> None:
        if ids:
            with atomic(self.db.conn) as conn:
                conn.executemany("UPDATE turn_journal SET resent_at = ?, resends = resends + 1 "
                                 "WHERE id = ?", [(now, i) for i in ids])


@dataclass
class JournalReport:
    dropped: int = 0  # recorded: the entry is no longer needed
    resent: int = 0  # queued again (Redis had lost it)
    held: int = 0  # offered, but Redis still holds the id (queued, in flight, dead)
    pending: int = 0  # unrecorded, younger than the bound: left for later


def recorded_turns(state: Connection, rows: list[tuple[Any, ...]]) -> set[str]:
    """The message ids of ``rows`` whose turn is recorded (read-only)."""
    keys = {applied_key(RECORDED_KIND, r[2], r[3]): r[1] for r in rows}
    found = state.execute(f"SELECT key FROM applied_jobs WHERE key IN "
                          f"({','.join('?' * len(keys))})", list(keys)).fetchall()
    return {keys[k] for (k,) in found}


def relay_journal(broker: Broker, journal: Journal, state: Connection, *, resend_s: float,
                  now: float | None = None, batch: int = 500,
                  keep_going: Callable[[], bool] | None = None) -> JournalReport:
    """Drop the journal entries whose turn is recorded; re-send the ones older than
    ``resend_s`` that are not. Stops (returns) when Redis fails: the rest waits."""
    now = time.time() if now is None else now
    offer = send_once(broker)
    report = JournalReport()
    after = 0
    while keep_going is None or keep_going():
        rows = journal.page(after, batch)
        if not rows:
            break
        after = rows[-1][0]
        recorded = recorded_turns(state, rows)
        journal.delete([r[0] for r in rows if r[1] in recorded])
        report.dropped += len(recorded)
        due = [r for r in rows if r[1] not in recorded and r[5] <= now - resend_s]
        report.pending += len(rows) - len(recorded) - len(due)
        if not _resend(offer, journal, due, now, report):
            break
    return report


def _resend(offer: Callable[[Message[Any]], Any], journal: Journal,
            due: list[tuple[Any, ...]], now: float, report: JournalReport) -> bool:
    """Offer each due entry again; False when Redis failed (what was offered is marked)."""
    done: list[int] = []
    try:
        for row in due:
            try:
                queued = offer(Message.decode(bytes(row[4])))
            except DecodeError:
                log.error("turn_journal_row_undecodable", row_id=row[0])
                queued = False
            report.resent += 1 if queued else 0
            report.held += 0 if queued else 1
            done.append(row[0])
    except _REDIS_DOWN as e:
        log.info("turn_journal_relay_paused", error=type(e).__name__)
        journal.mark_resent(done, now)
        return False
    journal.mark_resent(done, now)
    return True


def journal_status(journal: Journal, state: Connection, *, resend_s: float,
                   now: float | None = None, batch: int = 500) -> dict[str, int]:
    """Read-only counts: ``entries``, ``unrecorded`` (the turn is not recorded yet) and
    ``overdue`` (unrecorded longer than ``resend_s`` since the last send)."""
    now = time.time() if now is None else now
    out = {"entries": 0, "unrecorded": 0, "overdue": 0}
    after = 0
    while rows := journal.page(after, batch):
        after = rows[-1][0]
        recorded = recorded_turns(state, rows)
        waiting = [r for r in rows if r[1] not in recorded]
        out["entries"] += len(rows)
        out["unrecorded"] += len(waiting)
        out["overdue"] += sum(1 for r in waiting if r[5] <= now - resend_s)
    return out
