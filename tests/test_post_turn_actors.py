"""The post-turn actors on a StubBroker (actor logic only): the chain, audit rows, errors
that dead-letter at once, redelivery, and the outbox cursor."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from dramatiq.brokers.stub import StubBroker

from memory_core.jobs import QUEUES, build_message
from memory_core.mirrors import outbox
from memory_core.mirrors.outbox import cursor_of, ship_outbox
from memory_core.mirrors.sink import KINDS, MirrorUnavailable, Record
from tests.helpers.post_turn import make_context, record_messages, turn
from tests.helpers.queue_env import running
from workers.actors import declare_actors, follow_up_id
from workers.audit import AuditEntry
from workers.context import LazyContext, WorkerContext
from workers.middleware import worker_middleware


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[WorkerContext]:
    ctx = make_context(tmp_path / "data")
    yield ctx
    ctx.close()


@pytest.fixture
def broker(ctx: WorkerContext) -> Iterator[StubBroker]:
    broker = StubBroker(middleware=worker_middleware())
    declare_actors(broker, LazyContext.of(ctx))
    with running(broker, threads=2):
        yield broker
    broker.close()


def _drain(broker: StubBroker) -> None:
    for _ in range(4):  # follow-ups land on queues already joined
        for queue in QUEUES:
            broker.join(queue, fail_fast=False)


def _audit(ctx: WorkerContext) -> list[tuple]:
    return ctx.ops.conn.execute("SELECT tenant, action, object_kind, object_id, message_id, "
                                "detail FROM audit_log ORDER BY id").fetchall()


def test_a_turn_runs_the_whole_chain_and_leaves_audit_rows_without_text(
        ctx: WorkerContext, broker: StubBroker) -> None:
    turns = [turn(i, session="s0") for i in range(7)]
    turns.append({**turns[3], "turn_uid": "u0100", "index": 7,  # said again, the same day
                  "occurred_at": turns[3]["occurred_at"].replace("12:03", "12:43")})
    for message in record_messages(ctx.settings, turns):
        broker.enqueue(message)
    _drain(broker)
    conn = ctx.state.conn
    assert conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 8
    assert conn.execute("SELECT count(*) FROM beliefs").fetchone()[0] >= 5
    assert broker.dead_letters == []
    rows = _audit(ctx)
    actions = {r[1] for r in rows}
    assert {"turn_recorded", "belief_applied", "session_consolidated"} <= actions
    assert sum(r[1] == "turn_recorded" for r in rows) == 8
    assert all(r[4] for r in rows)  # every row names its message
    dump = json.dumps(rows)
    for t in turns:
        for word in ("Lisbon", "Acme", "jazz", "Rex", t["text"]):
            assert word not in dump


def test_bad_input_and_unknown_tenants_dead_letter_at_once(
        ctx: WorkerContext, broker: StubBroker) -> None:
    good = turn(0)
    broker.enqueue(build_message("record_turn", tenant="t1", turn={**good, "tenant": "t9"}))
    broker.enqueue(build_message("record_turn", tenant="nope",
                                 turn={**good, "tenant": "nope"}))
    broker.enqueue(build_message("record_turn", tenant="t1", turn={**good, "text": ""}))
    broker.enqueue(build_message("ego_anchor", tenant="nope", turn_uid="u1"))
    _drain(broker)
    assert len(broker.dead_letters) == 4
    assert all(m.options.get("retries", 0) == 0 for m in broker.dead_letters)
    assert ctx.state.conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 0
    assert _audit(ctx) == []


def test_a_redelivered_message_changes_nothing_and_adds_no_audit_row(
        ctx: WorkerContext, broker: StubBroker) -> None:
    (message,) = record_messages(ctx.settings, [turn(1)])
    broker.enqueue(message)
    _drain(broker)
    first = _audit(ctx)
    beliefs = ctx.state.conn.execute("SELECT count(*) FROM beliefs").fetchone()[0]
    broker.enqueue(message)  # the same message (same id) again, as after a lost ack
    _drain(broker)
    assert _audit(ctx) == first
    assert ctx.state.conn.execute("SELECT count(*) FROM beliefs").fetchone()[0] == beliefs
    assert ctx.state.conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 1
    extract_id = follow_up_id(message.message_id, "extract_beliefs",
                              {"tenant": message.kwargs["tenant"],
                               "turn_uid": message.kwargs["turn"]["turn_uid"]})
    assert any(r[4] == extract_id for r in first)  # follow-ups carry derived ids


def test_a_configured_mirror_without_a_sink_dead_letters_shipping(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(outbox.SINKS, "neo4j")  # an install without the Neo4j sink
    ctx = make_context(tmp_path / "m", neo4j_url="bolt://127.0.0.1:9")
    broker = StubBroker(middleware=worker_middleware())
    declare_actors(broker, LazyContext.of(ctx))
    try:
        with running(broker):
            for message in record_messages(ctx.settings, [turn(1)]):
                broker.enqueue(message)
            _drain(broker)
        assert [m.actor_name for m in broker.dead_letters] == ["ship_changes"]
        assert broker.dead_letters[0].options.get("retries", 0) == 0
    finally:
        broker.close()
        ctx.close()


def test_audit_entries_refuse_text() -> None:
    AuditEntry("t1", "turn_recorded", "turn", "u1", {"turn_id": 3, "ids": [1, 2]})
    with pytest.raises(ValueError, match="ids and counts"):
        AuditEntry("t1", "turn_recorded", "turn", "u1", {"note": "I live in Lisbon"})
    with pytest.raises(ValueError):
        AuditEntry("t1", "turn_recorded", "turn", "my sister Ana")


class FlakySink:
    name = "test"
    kinds = frozenset(KINDS)

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.got: list[Record] = []

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def apply(self, records: Sequence[Record]) -> None:
        if self.fail:
            raise MirrorUnavailable("mirror test is down")
        self.got.extend(records)


def test_the_outbox_cursor_moves_only_after_the_sink_confirms(ctx: WorkerContext) -> None:
    broker = StubBroker(middleware=worker_middleware())
    declare_actors(broker, LazyContext.of(ctx))
    with running(broker):
        for message in record_messages(ctx.settings, [turn(i) for i in range(3)]):
            broker.enqueue(message)
        _drain(broker)
    broker.close()
    total = ctx.state.conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
    assert total > 0
    with pytest.raises(MirrorUnavailable):
        ship_outbox(ctx.state.conn, ctx.ops.conn, FlakySink(fail=True))
    assert cursor_of(ctx.ops.conn, "test") == 0
    sink = FlakySink(fail=False)
    report = ship_outbox(ctx.state.conn, ctx.ops.conn, sink, batch=4)
    head = ctx.state.conn.execute("SELECT max(id) FROM outbox").fetchone()[0]
    assert report.shipped == total and sink.got
    assert {r.kind for r in sink.got} >= {"turn", "episode"}
    assert cursor_of(ctx.ops.conn, "test") == head
    assert ship_outbox(ctx.state.conn, ctx.ops.conn, sink).shipped == 0
