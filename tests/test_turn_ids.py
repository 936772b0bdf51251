"""Deterministic turn message ids, on both brokers (embedded and a real, test-owned Redis).

The same turn sent twice is one message; `mnemo ingest` of the same file twice enqueues
nothing the second time and says why; a reused turn_uid with other content is refused when
the sender can see it and dead-lettered with the turn uid and the reason when sent blind.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from dramatiq import Message

from memory_core import Memory
from memory_core.brokers import make_broker, make_enqueuer
from memory_core.brokers.base import QueueStats
from memory_core.brokers.spool import Spool, relay_spool
from memory_core.db import open_ops, open_state
from memory_core.errors import InvalidInputError
from memory_core.jobs import build_message
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write.pipeline import record_turn_and_episode
from scripts.cli import main
from tests.helpers.post_turn import seed_tenants, turn
from tests.helpers.queue_env import RedisServer, running, wait_for
from workers.actors import declare_actors
from workers.context import LazyContext
from workers.middleware import worker_middleware

pytest_plugins = ("tests.helpers.queue_fixtures",)

SECRET = "my sister Ana lives in Lisbon"


@pytest.fixture(params=["embedded", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {"MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "error",
           "MNEMO_HASH_DIM": "32"}
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("own_redis")
        env["MNEMO_BROKER_URL"] = server.url
    seed_tenants(Settings.from_env(env))
    yield env


def _turns(stats: list[QueueStats]) -> QueueStats:
    return next(s for s in stats if s.queue == "turns")


def _queued(env: dict[str, str]) -> int:
    broker = make_broker(Settings.from_env(env))
    broker.declare_queue("turns")
    try:
        s = _turns(broker.queue_stats(("turns",)))
        return s.ready + s.delayed + s.in_flight
    finally:
        broker.close()


def _record(env: dict[str, str], turns: list[dict[str, Any]]) -> None:
    """Record ``turns`` as a worker would (the state db only; the queue is left alone)."""
    settings = Settings.from_env(env)
    state = open_state(settings)
    try:
        index = VectorIndex(_embedder(settings))
        for t in turns:
            record_turn_and_episode(state, index, t)
    finally:
        state.close()


def _embedder(settings: Settings) -> Any:
    from memory_core.embedders.factory import make_embedder

    embedder = make_embedder(settings)
    embedder.load()
    return embedder


def _ingest(env: dict[str, str], path: Path) -> Any:
    return CliRunner().invoke(main, ["ingest", str(path), "--json"], env=env)


def _write(path: Path, turns: list[dict[str, Any]]) -> Path:
    lines = [json.dumps(t) for t in turns]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_same_turn_twice_is_one_message(env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    with Memory.open(settings) as mem:
        first = mem.after_turn(turn(0))
        again = mem.after_turn(turn(0))
        other = mem.after_turn(turn(1))
    assert first == again and other != first
    assert _queued(env) == 2
    _record(env, [turn(0)])
    with Memory.open(settings) as mem:  # recorded now: nothing is sent, the same id comes back
        assert mem.after_turn(turn(0)) == first
    assert _queued(env) == 2


def test_ingest_twice_enqueues_nothing_the_second_time(env: dict[str, str],
                                                       tmp_path: Path) -> None:
    turns = [turn(i) for i in range(500)]
    path = _write(tmp_path / "turns.jsonl", turns)
    first = _ingest(env, path)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["enqueued"] == 500
    second = _ingest(env, path)
    assert second.exit_code == 0, second.output
    assert {k: v for k, v in json.loads(second.stdout).items()
            if k.startswith(("enqueued", "already"))} == {
        "enqueued": 0, "already_recorded": 0, "already_queued": 500}
    assert _queued(env) == 500
    # A worker recorded the first 100 and the backlog was purged: the third run skips the
    # recorded ones and queues the rest once more (a purge forgets what it deleted).
    _record(env, turns[:100])
    purged = CliRunner().invoke(main, ["queue", "purge", "--all", "--yes"],
                               env=env)
    assert purged.exit_code == 0, purged.output
    assert _queued(env) == 0
    third = CliRunner().invoke(main, ["ingest", str(path)], env=env)
    assert third.exit_code == 0, third.output
    assert "enqueued 400 turn(s)" in third.output
    assert "skipped 100 already recorded, 0 already queued" in third.output
    assert _queued(env) == 400


def test_a_reused_turn_uid_with_other_text_is_refused_by_ingest_and_after_turn(
        env: dict[str, str], tmp_path: Path) -> None:
    _record(env, [turn(0)])
    reused = {**turn(0), "text": SECRET}
    path = _write(tmp_path / "reused.jsonl", [turn(1), reused])
    result = _ingest(env, path)
    assert result.exit_code == 1
    assert "turn_uid 'u0000' of tenant 't1' is already recorded with different content" in (
        result.output)
    assert "new turn_uid" in result.output and SECRET not in result.output
    assert _queued(env) == 0  # nothing sent, not even the good line
    with Memory.open(Settings.from_env(env)) as mem, pytest.raises(
            InvalidInputError, match="turn_uid 'u0000' of tenant 't1'") as refused:
        mem.after_turn(reused)
    assert SECRET not in str(refused.value)
    assert _queued(env) == 0


def test_a_reused_turn_uid_sent_blind_is_dead_lettered_with_its_reason(
        env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    reused = {**turn(0), "text": SECRET}
    with Memory.open(settings) as mem:  # neither recorded yet: the sender cannot tell
        ids = {mem.after_turn(turn(0)), mem.after_turn(reused)}
    assert len(ids) == 2  # the content is in the id: the second is not dropped as a copy
    broker = make_broker(settings, middleware=worker_middleware())
    declare_actors(broker, LazyContext(settings))
    try:
        with running(broker):
            wait_for(lambda: _turns(broker.queue_stats(("turns",))).dead == 1, 30)
    finally:
        broker.close()
    result = CliRunner().invoke(main, ["queue", "dead"], env=env)
    assert result.exit_code == 0, result.output
    assert ("InvalidInputError: turn_uid 'u0000' of tenant 't1' is already recorded with "
            "different content") in result.output
    assert SECRET not in result.output
    letters = json.loads(CliRunner().invoke(main, ["queue", "dead", "--json"], env=env).stdout)
    assert [(d["actor"], d["reason"]) for d in letters] == [
        ("record_turn", "turn_uid 'u0000' of tenant 't1' is already recorded with different "
                        "content")]


def _delivery(broker: Any, queue: str) -> Any:
    consumer = broker.consume(queue, prefetch=1, timeout=100)
    delivery = wait_for(lambda: next(consumer), 5)
    return consumer, delivery


def test_the_embedded_queue_keeps_one_row_per_id_in_every_state(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path / "data")
    broker = make_broker(settings)
    broker.declare_queue("mirrors")
    message = build_message("ship_changes", tenant="t")

    def rows() -> list[tuple[str, int]]:
        return broker.db.conn.execute("SELECT state, attempts FROM queue_messages").fetchall()

    assert broker.enqueue_once(message) is True
    assert broker.enqueue_once(message) is False  # waiting
    consumer, delivery = _delivery(broker, "mirrors")
    assert broker.enqueue_once(message) is False  # leased: the delivery is not re-armed
    assert [tuple(r) for r in rows()] == [("leased", 1)]
    consumer.nack(delivery)
    assert broker.enqueue_once(message) is False  # dead: stays dead for the operator
    assert [tuple(r) for r in rows()] == [("dead", 1)]
    assert broker.purge("mirrors") == 1
    assert broker.enqueue_once(message) is True  # gone: a new message
    consumer, delivery = _delivery(broker, "mirrors")
    consumer.ack(delivery)
    assert rows() == []
    consumer.close()
    broker.close()


def test_redis_and_the_spool_keep_one_copy_per_id(tmp_path: Path,
                                                  own_redis: RedisServer) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path / "data", broker_url=own_redis.url)
    namespace = f"mnemo-test-{uuid.uuid4().hex[:8]}"
    enqueuer = make_enqueuer(settings, namespace=namespace)
    broker = make_broker(settings, namespace=namespace)
    broker.declare_queue("mirrors")
    spooled, sent = (build_message("ship_changes", tenant=t) for t in ("a", "b"))
    own_redis.stop()
    assert enqueuer.offer(spooled) is True
    assert enqueuer.offer(spooled) is False  # the spool holds an id once
    spool = Spool(open_ops(settings))
    assert spool.size() == 1
    own_redis.start()
    broker.client.connection_pool.reset()
    later = time.monotonic() + 60
    enqueuer.clock = lambda: later  # past the spooling cooldown
    assert enqueuer.offer(spooled) is True  # Redis is back: sent directly...
    assert relay_spool(broker, spool) == 1  # ...so the relay's copy is kept out
    assert enqueuer.offer(sent) is True
    assert enqueuer.offer(sent) is False
    assert _turns_or(broker, "mirrors").ready == 2
    consumer, delivery = _delivery(broker, "mirrors")
    assert enqueuer.offer(build_message_like(delivery)) is False  # in flight: no copy
    consumer.ack(delivery)
    assert _turns_or(broker, "mirrors").ready == 1
    # Done: the guard goes with the message (a done turn is kept out by the senders' state
    # db check), so work that was skipped can be offered again (completeness check).
    assert enqueuer.offer(build_message_like(delivery)) is True
    assert _turns_or(broker, "mirrors").ready == 2
    consumer.close()
    spool.db.close()
    broker.close()
    enqueuer.close()


def _turns_or(broker: Any, queue: str) -> QueueStats:
    return next(s for s in broker.queue_stats((queue,)) if s.queue == queue)


def build_message_like(delivery: Any) -> Message[Any]:
    """The message a sender would send again: same id, none of the broker's options."""
    return Message(queue_name=delivery.queue_name, actor_name=delivery.actor_name,
                   args=(), kwargs=dict(delivery.kwargs), options={},
                   message_id=delivery.message_id)
