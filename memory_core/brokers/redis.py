"""The Redis broker: Dramatiq's RedisBroker with bounded recovery and queue operations.

Dramatiq's RedisBroker records each worker's heartbeat on every command and requeues the
unacked messages of a worker silent for ``heartbeat_timeout`` — but only in a maintenance
pass that runs by chance (``maintenance_chance`` per million commands) and only for the queue
that command named. Here every consuming process also runs the pass on a timer for each
declared queue and its delay queue, so a killed worker's messages come back within
``heartbeat_timeout + maintenance_interval`` (15 s + 5 s by default). The timer's dispatch also
refreshes this process's heartbeat, so a live worker busy with long tasks is never taken for
dead.

The chat side uses a client with short socket timeouts and no retries
(``redis_client(url, timeout_ms)``), so an unreachable Redis fails fast and the message goes to
the spool (``memory_core.brokers.spool``).

Dramatiq internals relied on (pyproject.toml bounds dramatiq to the tested major, 2.x):

- ``dramatiq.brokers.redis._RedisConsumer`` (private class), subclassed by ``_Consumer``: its
  ``__next__``, ``ack``, ``nack`` and ``close``, and its attributes ``message_cache`` (fetched
  encoded messages not yet handed out), ``prefetch``, ``outstanding_message_count`` (a
  property), ``broker`` and ``queue_name``; ``RedisBroker.consumer_class`` (overridden) is how
  ``consume()`` builds it.
- ``RedisBroker.scripts["dispatch"]``, the Lua script, called by ``maintain()`` with
  ``keys=[namespace]`` and eight arguments by position: 1 command (``"qsize"``, which only
  reads), 2 timestamp (ms), 3 queue name, 4 worker id (``broker_id``), 5
  ``heartbeat_timeout``, 6 ``dead_message_ttl``, 7 do-maintenance (``1``), 8 max unpack size
  (``RedisBroker._max_unpack_size()``, a private method).
- ``RedisBroker.do_requeue(queue_name, *redis_ids)``: the script's ``requeue`` command through
  ``RedisBroker.__getattr__``'s ``do_<command>`` dispatch, used by ``_Consumer.close``.
- ``Message.options["redis_message_id"]``, the id ``RedisBroker.enqueue`` gives each copy.
- Dramatiq's ``enqueue`` command (``HSET <ns>:<queue>.msgs id data`` then ``RPUSH
  <ns>:<queue> id``), which ``enqueue_once``'s script repeats after its guard.
- The key layout read and written by the ``QueueAdmin`` methods: ``<ns>:<queue>`` (list of
  ids), ``<ns>:<queue>.msgs`` and ``<ns>:<queue>.DQ.msgs`` (hashes id -> message),
  ``<ns>:<queue>.XQ`` (dead letters, sorted by time of death in ms) and
  ``<ns>:<queue>.XQ.msgs``.

Tests against the real Redis that fail when one of them changes: in
``tests/test_redis_broker.py``, ``test_maintain_calls_dispatch_with_every_argument_in_its_place``
checks the effect of each dispatch argument by position (and the ``<ns>:<queue>``,
``__heartbeats__``, ``__acks__`` and ``XQ`` keys), and
``test_consumer_close_returns_its_prefetch_cache_and_a_full_prefetch_does_not_fetch`` the
consumer's attributes, ``redis_message_id`` and ``do_requeue``. The key layout behind the
queue counts and dead-letter operations is checked by the Redis runs of
``tests/test_broker_contract.py`` (``test_enqueue_consume_ack``,
``test_dead_letters_can_be_requeued_or_purged``) and ``tests/test_queue_cli.py``.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import redis
import structlog
from dramatiq import Message
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
from dramatiq.common import current_millis, dq_name, xq_name
from dramatiq.errors import ConnectionClosed, DecodeError
from redis.backoff import NoBackoff
from redis.retry import Retry

from memory_core.backends import BackendURL, parse_backend_url, redis_client_kwargs
from memory_core.brokers.base import (
    DeadLetter,
    QueueStats,
    dead_reason,
    error_reason,
    fresh_retry_budget,
    stored_message,
)
from memory_core.errors import ConfigurationError
from memory_core.settings import Settings

log = structlog.get_logger("mnemo.queue")

DEFAULT_HEARTBEAT_TIMEOUT_MS = 15_000
DEFAULT_MAINTENANCE_INTERVAL_S = 5.0


# Workers and operators: fail within seconds, not the OS's minutes, when Redis is unreachable.
WORKER_CONNECT_TIMEOUT_S = 5.0
WORKER_SOCKET_TIMEOUT_S = 30.0


def redis_client(target: Settings | BackendURL, *, password: str | None = None,
                 timeout_ms: int | None = None) -> redis.Redis:
    """A client for the configured broker (``Settings``: its parsed URL and
    ``MNEMO_REDIS_PASSWORD``) or a parsed ``BackendURL``, built from the URL's parts
    (``memory_core.backends``), never from text.

    With ``timeout_ms`` (the chat side): connect and read time out then, and nothing is
    retried, so a down Redis costs one failed attempt. Without: worker timeouts and redis-py's
    default retries.
    """
    if isinstance(target, Settings):
        url, password = target.redis_backend, target.redis_password
        if url is None:
            raise ConfigurationError("a Redis client was asked for but MNEMO_BROKER_URL is not "
                                     "a redis:// URL")
    else:
        url = target
    kwargs = redis_client_kwargs(url, password)
    if timeout_ms is None:
        return redis.Redis(**kwargs, socket_connect_timeout=WORKER_CONNECT_TIMEOUT_S,
                           socket_timeout=WORKER_SOCKET_TIMEOUT_S)
    seconds = timeout_ms / 1000
    return redis.Redis(**kwargs, socket_connect_timeout=seconds, socket_timeout=seconds,
                       retry=Retry(NoBackoff(), 0))


# How long a sent message id keeps a second copy out (``enqueue_once``). Longer than any
# sane backlog; after it the senders' state-db check (turn already recorded) still applies.
DEDUPE_TTL_S = 24 * 3600

# Set the id's guard and enqueue in one step, or neither: a crash between the two can
# neither lose the message (guard set, nothing queued) nor let a duplicate in.
_ENQUEUE_ONCE = """
if redis.call("set", KEYS[1], "1", "NX", "EX", ARGV[1]) then
    redis.call("hset", KEYS[3], ARGV[2], ARGV[3])
    redis.call("rpush", KEYS[2], ARGV[2])
    return 1
end
return 0
"""

# Record why a message died in its stored body, if it is still there, before the nack moves
# it to the dead letters (a throws= error is nacked without the re-enqueue that would
# otherwise carry ``last_error``).
_ANNOTATE = """
if redis.call("hexists", KEYS[1], ARGV[1]) == 1 then
    redis.call("hset", KEYS[1], ARGV[1], ARGV[2])
end
"""

FULL_WAIT_S = 0.1  # the longest a consumer whose prefetch is full waits for an ack


class _Consumer(_RedisConsumer):
    """Dramatiq's Redis consumer, except that a full prefetch is not an idle queue.

    The stock consumer backs off exponentially (up to the worker timeout) whenever a fetch
    brings nothing, including when it did not fetch because its prefetch was full, which
    leaves worker threads idle. Here a full prefetch waits for the next ack (worker threads
    ack, so the wait ends as soon as there is room) and counts no miss.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._room = threading.Event()

    def __next__(self) -> Any:
        if not self.message_cache and self.outstanding_message_count >= self.prefetch:
            self._room.wait(FULL_WAIT_S)
            self._room.clear()
            return None
        return super().__next__()

    def ack(self, message: Any) -> None:
        if getattr(message, "retry_unscheduled", False):
            # The retry could not be stored (workers.middleware.DurableRetries): put the
            # message back instead of dropping it; a connection error here is retried by
            # the Worker until Redis answers.
            try:
                self.requeue([message])
            except redis.ConnectionError as e:
                raise ConnectionClosed(e) from None
            self.queued_message_ids.discard(message.message_id)
        else:
            super().ack(message)
            if getattr(message, "_exception", None) is None:
                self._forget_guard(message.message_id)
        self._room.set()

    def _forget_guard(self, message_id: str) -> None:
        """Done (not failed: a failed one's retry is still queued): drop the id's
        ``enqueue_once`` guard, so the guard means "queued, in flight or dead" and an offer
        of the id after its work was skipped (an aged-out consolidation) is queued again.
        A failure only leaves the guard to its TTL."""
        try:
            self.broker.client.delete(self.broker._sent_key(message_id))
        except redis.RedisError as e:
            log.warning("sent_guard_not_dropped", error=type(e).__name__)

    def nack(self, message: Any) -> None:
        exc = getattr(message, "_exception", None)
        if exc is not None and error_reason(exc):
            try:
                annotated = stored_message(message)
                self.broker.annotate(self.queue_name, annotated.options["redis_message_id"],
                                     annotated.encode())
            except (redis.RedisError, KeyError) as e:  # the dead letter only lacks its reason
                log.warning("dead_letter_reason_not_kept", error=type(e).__name__)
        super().nack(message)
        self._room.set()

    def close(self) -> None:
        """Return the messages fetched but never handed to a worker thread.

        Dramatiq leaves them in this worker's ack set, where only a maintenance pass (once
        the heartbeat is stale) would find them; a worker that stops cleanly gives them back.
        """
        cached, self.message_cache = self.message_cache, []
        ids = []
        for data in cached:
            try:
                ids.append(Message.decode(data).options["redis_message_id"])
            except (DecodeError, KeyError, TypeError):
                continue
        if ids:
            try:
                self.broker.do_requeue(self.queue_name, *ids)
            except redis.RedisError as e:
                log.warning("prefetched_requeue_failed", error=type(e).__name__,
                            count=len(ids))
        super().close()


class MnemoRedisBroker(RedisBroker):
    """RedisBroker + timer-driven maintenance + ``QueueAdmin``.

    A client comes from ``client``, or is built from ``url`` (parsed strictly) and
    ``password``. Nothing connects until the first command. ``consume()`` starts the
    maintenance thread; ``close()`` stops it. Redis errors propagate as ``redis.RedisError``
    (Dramatiq turns them into ``ConnectionClosed`` in consumers).
    """

    kind = "redis"

    def __init__(self, *, url: str | None = None, password: str | None = None,
                 client: redis.Redis | None = None, namespace: str = "mnemo",
                 middleware: list[Any] | None = None,
                 heartbeat_timeout: int = DEFAULT_HEARTBEAT_TIMEOUT_MS,
                 maintenance_interval_s: float = DEFAULT_MAINTENANCE_INTERVAL_S,
                 dedupe_ttl_s: int = DEDUPE_TTL_S, **kwargs: Any) -> None:
        if client is None and url is not None:
            client = redis_client(parse_backend_url("redis", "MNEMO_BROKER_URL", url),
                                  password=password)
        super().__init__(client=client, namespace=namespace, middleware=middleware,
                         heartbeat_timeout=heartbeat_timeout, **kwargs)
        self.maintenance_interval_s = maintenance_interval_s
        self.dedupe_ttl_s = dedupe_ttl_s
        self._once = self.client.register_script(_ENQUEUE_ONCE)
        self._annotate = self.client.register_script(_ANNOTATE)
        self._maintainer: _Maintainer | None = None
        self._lock = threading.Lock()

    @property
    def consumer_class(self) -> type[_Consumer]:
        return _Consumer

    def enqueue(self, message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        """RedisBroker.enqueue, storing no traceback (see ``stored_message``)."""
        return super().enqueue(stored_message(message), delay=delay)

    def _sent_key(self, message_id: str) -> str:
        return f"{self.namespace}:__sent__:{message_id}"

    def enqueue_once(self, message: Message[Any]) -> bool:
        """Enqueue ``message`` unless its id was enqueued here within ``dedupe_ttl_s``;
        True when enqueued now.

        Dramatiq's enqueue gives every copy its own Redis id, so the same message sent twice
        would be two messages; here a guard key ``<ns>:__sent__:<message id>`` is set (NX,
        with a TTL) in the same script that enqueues, atomically. A duplicate still gets in
        after the guard expired, or after Redis lost its data (both then lost together):
        safe, since every actor is idempotent, only a second run of a no-op. Not for
        Retries' re-enqueue, which must re-send the same id (``enqueue`` does that). A
        consumer drops the guard once the message is done (acked without an error), so the
        guard keeps out copies of what is queued, in flight, retrying or dead.
        """
        msg = stored_message(message).copy(options={"redis_message_id": str(uuid4())})
        queue = self._key(msg.queue_name)
        self.emit_before("enqueue", msg, None)
        done = self._once(keys=[self._sent_key(msg.message_id), queue, queue + ".msgs"],
                          args=[self.dedupe_ttl_s, msg.options["redis_message_id"],
                                msg.encode()])
        self.emit_after("enqueue", msg, None)
        return bool(done)

    def annotate(self, queue_name: str, redis_id: str, data: bytes) -> None:
        """Replace the stored body of a delivered message (only if it is still stored)."""
        self._annotate(keys=[self._key(queue_name) + ".msgs"], args=[redis_id, data])

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> Any:
        with self._lock:
            if self._maintainer is None:
                self._maintainer = _Maintainer(self)
                self._maintainer.start()
        return super().consume(queue_name, prefetch, timeout)

    def close(self) -> None:
        with self._lock:
            maintainer, self._maintainer = self._maintainer, None
        if maintainer is not None:
            maintainer.stop()
        super().close()

    def maintain(self) -> None:
        """Run Dramatiq's maintenance pass now on every declared queue and delay queue.

        Requeues the unacked messages of workers silent for ``heartbeat_timeout`` and drops
        dead letters older than ``dead_message_ttl``. Idempotent.
        """
        script = self.scripts["dispatch"]
        for queue in sorted(self.queues):
            for name in (queue, dq_name(queue)):
                script(keys=[self.namespace], args=[
                    "qsize", current_millis(), name, self.broker_id, self.heartbeat_timeout,
                    self.dead_message_ttl, 1, self._max_unpack_size(),
                ])

    # -- QueueAdmin -----------------------------------------------------------------------

    def _key(self, name: str) -> str:
        return f"{self.namespace}:{name}"

    def queue_stats(self, queues: tuple[str, ...] = ()) -> list[QueueStats]:
        """Counts per queue from Redis' lists, hashes and dead-letter sets."""
        out = []
        for queue in sorted(set(queues) | self.queues):
            pipe = self.client.pipeline(transaction=False)
            pipe.llen(self._key(queue))
            pipe.hlen(self._key(queue) + ".msgs")
            pipe.hlen(self._key(dq_name(queue)) + ".msgs")
            pipe.zcard(self._key(xq_name(queue)))
            pipe.lindex(self._key(queue), 0)
            ready, stored, delayed, dead, first = pipe.execute()
            out.append(QueueStats(queue, int(ready), int(delayed),
                                  max(0, int(stored) - int(ready)), int(dead),
                                  self._age_of(queue, first)))
        return out

    def _age_of(self, queue: str, redis_id: bytes | None) -> float | None:
        if redis_id is None:
            return None
        data = self.client.hget(self._key(queue) + ".msgs", redis_id)
        if not isinstance(data, bytes):  # gone (None); the client never decodes responses
            return None
        try:
            stamp = Message.decode(data).message_timestamp
        except DecodeError:
            return None
        return max(0.0, (current_millis() - stamp) / 1000)

    def _dead_entries(self, queue: str) -> list[tuple[bytes, float, Message[Any] | None]]:
        xq = self._key(xq_name(queue))
        entries = self.client.zrange(xq, 0, -1, withscores=True)
        if not entries:
            return []
        bodies = self.client.hmget(xq + ".msgs", [e[0] for e in entries])
        out: list[tuple[bytes, float, Message[Any] | None]] = []
        for (redis_id, score), body in zip(entries, bodies, strict=True):
            try:
                out.append((redis_id, score, Message.decode(body) if body else None))
            except DecodeError:
                out.append((redis_id, score, None))
        return out

    def dead_letters(self, queue: str | None = None, limit: int = 100) -> list[DeadLetter]:
        """Dead letters, oldest first; ids, actor and error type only."""
        found = []
        for name in [queue] if queue else sorted(self.queues):
            for _, score, msg in self._dead_entries(name):
                if msg is None:
                    continue
                found.append(DeadLetter(
                    queue=name, message_id=msg.message_id, actor=msg.actor_name,
                    retries=int(msg.options.get("retries", 0)),
                    dead_at=datetime.fromtimestamp(score / 1000, UTC),
                    last_error=msg.options.get("last_error"), reason=dead_reason(msg)))
        found.sort(key=lambda d: d.dead_at or datetime.min.replace(tzinfo=UTC))
        return found[:limit]

    def requeue_dead(self, queue: str | None = None,
                     message_ids: tuple[str, ...] = ()) -> int:
        """Enqueue dead letters again (fresh retry budget), then drop them from the DLQ.

        At least once: a crash between the two steps leaves a copy in the DLQ as well.
        """
        wanted = set(message_ids)
        count = 0
        for name in [queue] if queue else sorted(self.queues):
            xq = self._key(xq_name(name))
            for redis_id, _, msg in self._dead_entries(name):
                if msg is None or (wanted and msg.message_id not in wanted):
                    continue
                self.enqueue(fresh_retry_budget(msg))
                self.client.zrem(xq, redis_id)
                self.client.hdel(xq + ".msgs", redis_id)
                count += 1
        return count

    def purge(self, queue: str | None = None, *, include_waiting: bool = False,
              dry_run: bool = False) -> int:
        """Delete dead letters (and waiting/delayed messages with ``include_waiting``).

        Their ``enqueue_once`` guards go too, so a purged message can be sent again at once
        (as on the embedded broker, where a purged id is simply gone).
        """
        count = 0
        for name in [queue] if queue else sorted(self.queues):
            xq = self._key(xq_name(name))
            count += int(self.client.zcard(xq))
            if not dry_run:
                dead = [m.message_id for _, _, m in self._dead_entries(name) if m is not None]
                self.client.delete(xq, xq + ".msgs")
                self._forget_sent(dead)
            if include_waiting:
                for waiting in (name, dq_name(name)):
                    count += self._purge_waiting(self._key(waiting), dry_run)
        return count

    def _forget_sent(self, message_ids: list[str]) -> None:
        if message_ids:
            self.client.delete(*[self._sent_key(i) for i in message_ids])

    def _purge_waiting(self, key: str, dry_run: bool) -> int:
        ids = self.client.lrange(key, 0, -1)
        if ids and not dry_run:
            bodies = self.client.hmget(key + ".msgs", ids)
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(key)
            pipe.hdel(key + ".msgs", *ids)
            pipe.execute()
            sent = []
            for body in bodies:
                if not isinstance(body, bytes):  # gone meanwhile (the client never decodes)
                    continue
                try:
                    sent.append(Message.decode(body).message_id)
                except DecodeError:
                    continue
            self._forget_sent(sent)
        return len(ids)


class _Maintainer(threading.Thread):
    """Runs ``broker.maintain()`` every ``maintenance_interval_s``."""

    def __init__(self, broker: MnemoRedisBroker) -> None:
        super().__init__(name="mnemo-redis-maintenance", daemon=True)
        self.broker = broker
        self.stopped = threading.Event()

    def run(self) -> None:
        while True:
            try:
                self.broker.maintain()
            except redis.RedisError as e:
                log.warning("redis_maintenance_failed", error=type(e).__name__)
            if self.stopped.wait(self.broker.maintenance_interval_s):
                return

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
