"""``QueueAdmin`` for the embedded broker: stats, dead letters, requeue, purge."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dramatiq import Message
from dramatiq.errors import DecodeError

from memory_core.brokers import embedded_sql as sql
from memory_core.brokers.base import DeadLetter, QueueStats, dead_reason, fresh_retry_budget
from memory_core.db.sqlite import atomic

if TYPE_CHECKING:
    from memory_core.db.stores import Database


def _decoded(body: bytes | None) -> Message[Any] | None:
    try:
        return Message.decode(bytes(body)) if body is not None else None
    except (DecodeError, TypeError, ValueError):
        return None


def _retries(message: Message[Any] | None) -> int:
    try:
        return int(message.options.get("retries", 0)) if message is not None else 0
    except (TypeError, ValueError):
        return 0


class EmbeddedAdmin:
    """Mixed into EmbeddedBroker; reads and writes ``queue_messages`` through ``self.db``."""

    db: Database

    def queue_stats(self, queues: tuple[str, ...] = ()) -> list[QueueStats]:
        """Counts per queue: ``queues`` (even if empty) plus every queue holding a message."""
        now = time.time()
        found: dict[str, Any] = {r[0]: r for r in self.db.conn.execute(sql.STATS, {"now": now})}
        out = []
        for name in sorted(set(queues) | set(found)):
            row = found.get(name)
            if row is None:
                out.append(QueueStats(name, 0, 0, 0, 0, None))
                continue
            oldest = None if row[5] is None else max(0.0, now - row[5])
            out.append(QueueStats(name, int(row[1] or 0), int(row[2] or 0), int(row[3] or 0),
                                  int(row[4] or 0), oldest))
        return out

    def dead_letters(self, queue: str | None = None, limit: int = 100) -> list[DeadLetter]:
        """Dead letters, oldest first; ids, actor and error type only."""
        rows = self.db.conn.execute(sql.DEAD, {"queue": queue, "limit": limit}).fetchall()
        out = []
        for r in rows:
            message = _decoded(r[4])
            out.append(DeadLetter(
                queue=r[1], message_id=r[2], actor=r[3], retries=_retries(message),
                dead_at=None if r[5] is None else datetime.fromtimestamp(r[5], UTC),
                last_error=r[6], reason=dead_reason(message)))
        return out

    def requeue_dead(self, queue: str | None = None,
                     message_ids: tuple[str, ...] = ()) -> int:
        """Make dead letters ready now, with a fresh retry budget. Idempotent."""
        wanted = set(message_ids)
        now = time.time()
        count = 0
        with atomic(self.db.conn) as conn:
            rows = conn.execute(sql.DEAD_ROWS, {"queue": queue}).fetchall()
            for row_id, message_id, body in rows:
                if wanted and message_id not in wanted:
                    continue
                try:
                    body = fresh_retry_budget(Message.decode(bytes(body))).encode()
                except DecodeError:
                    continue  # an undecodable dead letter can only be purged
                count += conn.execute(sql.REQUEUE_ROW, (now, body, row_id)).rowcount
        return count

    def purge(self, queue: str | None = None, *, include_waiting: bool = False,
              dry_run: bool = False) -> int:
        """Delete dead letters (and ready messages with ``include_waiting``); never leased."""
        params = {"queue": queue, "waiting": int(include_waiting)}
        if dry_run:
            return int(self.db.conn.execute(sql.COUNT_PURGE, params).fetchone()[0])
        return int(self.db.conn.execute(sql.PURGE, params).rowcount)
