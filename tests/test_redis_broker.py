"""The private parts of Dramatiq's Redis broker that ``memory_core.brokers.redis`` relies on.

Run against the real Redis (127.0.0.1:6379), each test in its own namespace. A Dramatiq
release that reorders the ``dispatch`` script's arguments, renames its keys or changes
``_RedisConsumer``'s attributes fails here, with the part named, rather than as a slow
redelivery in the broker contract. Heartbeats and dead-letter times are written as old
timestamps instead of waiting for them to age.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from dramatiq import Message
from dramatiq.common import current_millis

from memory_core.brokers.redis import MnemoRedisBroker
from tests.helpers.queue_env import drop_namespace

pytestmark = pytest.mark.redis

QUEUE = "q"
HEARTBEAT_MS = 60_000
DEAD_TTL_MS = 3_600_000


@pytest.fixture
def namespace(redis_url: str) -> Iterator[str]:
    ns = f"mnemo-test-{uuid.uuid4().hex[:10]}"
    yield ns
    drop_namespace(redis_url, ns)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    yield c
    c.close()


@pytest.fixture
def brokers(redis_url: str, namespace: str) -> Iterator[list[MnemoRedisBroker]]:
    made: list[MnemoRedisBroker] = []
    yield made
    for broker in made:
        broker.close()


def _broker(brokers: list[MnemoRedisBroker], redis_url: str, namespace: str
            ) -> MnemoRedisBroker:
    # No chance maintenance on Dramatiq's own commands: only maintain() runs it.
    broker = MnemoRedisBroker(url=redis_url, namespace=namespace, middleware=[],
                              heartbeat_timeout=HEARTBEAT_MS, dead_message_ttl=DEAD_TTL_MS,
                              maintenance_chance=0)
    broker.declare_queue(QUEUE)
    brokers.append(broker)
    return broker


def _send(broker: MnemoRedisBroker, n: int) -> list[str]:
    return [broker.enqueue(Message(queue_name=QUEUE, actor_name="probe", args=(i,),
                                   kwargs={}, options={})).options["redis_message_id"]
            for i in range(n)]


def _consumer(broker: MnemoRedisBroker, prefetch: int) -> Any:
    """The broker's consumer, without the maintenance thread ``consume()`` starts."""
    return broker.consumer_class(broker, QUEUE, prefetch, 100)


def _take(consumer: Any) -> Any:
    for _ in range(50):
        message = next(consumer)
        if message is not None:
            return message
    pytest.fail("no message fetched")


def test_maintain_calls_dispatch_with_every_argument_in_its_place(
        brokers: list[MnemoRedisBroker], redis_url: str, namespace: str,
        client: redis.Redis) -> None:
    sender = _broker(brokers, redis_url, namespace)
    stale_ids = _send(sender, 2)
    stale = _broker(brokers, redis_url, namespace)
    _take(_consumer(stale, 2))  # both fetched: one handed out, one in the prefetch cache
    live_ids = _send(sender, 1)
    live = _broker(brokers, redis_url, namespace)
    _take(_consumer(live, 1))
    dead_ids = _send(sender, 2)
    nacker = _consumer(_broker(brokers, redis_url, namespace), 2)
    for _ in dead_ids:
        nacker.nack(_take(nacker))
    now = current_millis()
    heartbeats, xq = f"{namespace}:__heartbeats__", f"{namespace}:{QUEUE}.XQ"
    client.zadd(heartbeats, {stale.broker_id: now - 2 * HEARTBEAT_MS})  # silent for 2 min
    client.zadd(xq, {dead_ids[0]: now - 2 * DEAD_TTL_MS})  # dead for 2 hours

    maintainer = _broker(brokers, redis_url, namespace)
    maintainer.maintain()

    # args[4] worker id + args[2] timestamp: the caller's heartbeat is now.
    assert abs(float(client.zscore(heartbeats, maintainer.broker_id) or 0) - now) < 5_000
    # args[3] queue, args[5] heartbeat timeout, args[7] "1": the stale worker's unacked
    # messages are back on the queue and it is forgotten; the live worker keeps its message.
    queued = client.lrange(f"{namespace}:{QUEUE}", 0, -1)
    assert sorted(queued) == sorted(stale_ids)
    assert not client.exists(f"{namespace}:__acks__.{stale.broker_id}.{QUEUE}")
    assert client.zscore(heartbeats, stale.broker_id) is None
    assert client.smembers(f"{namespace}:__acks__.{live.broker_id}.{QUEUE}") == {live_ids[0]}
    # args[6] dead-message TTL, args[8] unpack size: only the old dead letter is dropped.
    assert client.zrange(xq, 0, -1) == [dead_ids[1]]
    assert client.hkeys(xq + ".msgs") == [dead_ids[1]]


def test_consumer_close_returns_its_prefetch_cache_and_a_full_prefetch_does_not_fetch(
        brokers: list[MnemoRedisBroker], redis_url: str, namespace: str,
        client: redis.Redis) -> None:
    broker = _broker(brokers, redis_url, namespace)
    ids = _send(broker, 4)
    consumer = broker.consume(QUEUE, prefetch=3, timeout=100)
    first = _take(consumer)  # fetches three: one handed out, two cached
    assert client.llen(f"{namespace}:{QUEUE}") == 1
    _take(consumer)
    _take(consumer)
    assert next(consumer) is None  # three outstanding = prefetch: no fetch
    assert client.llen(f"{namespace}:{QUEUE}") == 1
    consumer.ack(first)
    fourth = _take(consumer)  # room again: fetched at once
    assert fourth.options["redis_message_id"] == ids[3]

    again = broker.consume(QUEUE, prefetch=3, timeout=100)
    _send(broker, 3)
    kept = _take(again)
    again.close()  # "requeue" of the two cached ids
    queued = client.lrange(f"{namespace}:{QUEUE}", 0, -1)
    assert len(queued) == 2 and kept.options["redis_message_id"] not in queued
    assert client.smembers(f"{namespace}:__acks__.{broker.broker_id}.{QUEUE}") == {
        *ids[1:], kept.options["redis_message_id"]}
