"""The spool: relayed oldest first, at most one relay at a time. (Redis down -> ``after_turn``
within 50 ms and every turn recorded once: ``tests/test_after_turn_outage.py``.)"""

from __future__ import annotations

import uuid
from pathlib import Path

import redis
from dramatiq import Message

from memory_core.brokers import make_broker, make_enqueuer, make_relay
from memory_core.brokers.spool import Spool, relay_spool
from memory_core.db import open_ops
from memory_core.jobs import build_message
from memory_core.settings import Settings
from tests.helpers.queue_env import RedisServer

pytest_plugins = ("tests.helpers.queue_fixtures",)


def _settings(tmp_path: Path, server: RedisServer) -> Settings:
    return Settings.from_env({}, data_dir=tmp_path / "data", broker_url=server.url)


def _queued_ids(server: RedisServer, namespace: str, queue: str) -> list[str]:
    client = redis.Redis.from_url(server.url)
    redis_ids = client.lrange(f"{namespace}:{queue}", 0, -1)
    bodies = client.hmget(f"{namespace}:{queue}.msgs", redis_ids)
    client.close()
    return [Message.decode(b).message_id for b in bodies]


def test_the_relay_forwards_oldest_first_and_keeps_what_redis_refused(
        tmp_path: Path, own_redis: RedisServer) -> None:
    settings = _settings(tmp_path, own_redis)
    namespace = f"mnemo-test-{uuid.uuid4().hex[:8]}"
    enqueuer = make_enqueuer(settings, namespace=namespace)
    own_redis.stop()
    sent = [enqueuer.send(build_message("ship_changes", tenant=f"t{i}")) for i in range(20)]
    broker = make_broker(settings, namespace=namespace)
    spool = Spool(open_ops(settings))
    assert relay_spool(broker, spool) == 0  # Redis still down: nothing forwarded or lost
    assert spool.size() == 20
    own_redis.start()
    assert relay_spool(broker, spool, batch=7) == 20
    assert spool.size() == 0
    assert _queued_ids(own_redis, namespace, "mirrors") == sent
    assert relay_spool(broker, spool) == 0
    broker.close()
    spool.db.close()
    enqueuer.close()


def test_one_relay_at_a_time(tmp_path: Path, own_redis: RedisServer) -> None:
    settings = _settings(tmp_path, own_redis)
    namespace = f"mnemo-test-{uuid.uuid4().hex[:8]}"
    spool = Spool(open_ops(settings))
    spool.put(build_message("ship_changes", tenant="t"))
    broker = make_broker(settings, namespace=namespace)
    first = make_relay(settings, broker, "host:1")
    second = make_relay(settings, broker, "host:2")
    own_redis.stop()
    assert first.tick() == 0  # holds the lease, Redis down
    own_redis.start()
    assert second.tick() == 0  # the lease is the first relay's
    assert first.tick() == 1
    first.stop()  # a stopped relay gives the lease up
    spool.put(build_message("ship_changes", tenant="t"))
    assert second.tick() == 1
    second.stop()
    broker.close()
    spool.db.close()


def test_the_embedded_enqueuer_writes_one_row(settings: Settings) -> None:
    enqueuer = make_enqueuer(settings)
    message_id = enqueuer.send(build_message("ship_changes", tenant="t"))
    enqueuer.close()
    broker = make_broker(settings)
    (row,) = [s for s in broker.queue_stats() if s.queue == "mirrors"]
    assert (row.ready, row.in_flight, row.dead) == (1, 0, 0)
    assert broker.db.conn.execute("SELECT message_id FROM queue_messages").fetchone()[0] \
        == message_id
    broker.close()
