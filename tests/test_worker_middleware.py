"""Worker middleware: per-message log context and summary, age-out, redaction of payloads."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
import structlog
from dramatiq import Message
from dramatiq.brokers.stub import StubBroker
from structlog.testing import capture_logs

from tests.helpers.queue_env import running
from workers.middleware import RedactMessages, worker_middleware

SECRET = "my sister Ana lives in Lisbon"


@pytest.fixture
def broker() -> Iterator[StubBroker]:
    broker = StubBroker(middleware=worker_middleware())
    yield broker  # ``running`` boots it (a second boot would start TimeLimit's thread twice)
    broker.close()


def _summaries(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "message_done"]


def test_one_summary_line_per_message_with_ids_and_no_text(broker: StubBroker) -> None:
    actor = dramatiq.actor(lambda tenant, turn: None, broker=broker, actor_name="record",
                           queue_name="q", max_retries=0)
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs, \
            running(broker):
        msg = actor.send(tenant="acme", turn={"text": SECRET})
        broker.join("q", fail_fast=False)
    (done,) = _summaries(logs)
    assert done["message_id"] == msg.message_id
    assert (done["actor"], done["tenant"], done["outcome"]) == ("record", "acme", "ok")
    assert done["duration_ms"] >= 0 and done["log_level"] == "info"
    assert SECRET not in repr(logs)


def test_retry_then_dead_outcomes_carry_the_error_type_only(broker: StubBroker) -> None:
    def fails(tenant: str) -> None:
        raise ValueError(SECRET)

    actor = dramatiq.actor(fails, broker=broker, actor_name="fails", queue_name="q",
                           max_retries=1, min_backoff=10, max_backoff=20)
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs, \
            running(broker):
        actor.send(tenant="acme")
        broker.join("q", fail_fast=False)
    outcomes = [(d["outcome"], d["error"], d["retries"]) for d in _summaries(logs)]
    assert outcomes == [("retry", "ValueError", 1), ("dead", "ValueError", 2)]
    assert SECRET not in repr(logs)
    assert len(broker.dead_letters) == 1


def test_stale_work_ages_out_without_a_dead_letter_but_turns_never_do(
        broker: StubBroker) -> None:
    ran: list[str] = []
    dramatiq.actor(lambda: ran.append("consolidate"), broker=broker,
                   actor_name="consolidate", queue_name="q", max_age=1000)
    dramatiq.actor(lambda: ran.append("turn"), broker=broker, actor_name="turn",
                   queue_name="q")
    old = int(time.time() * 1000) - 60_000
    with capture_logs() as logs, running(broker):
        for name in ("consolidate", "turn"):
            broker.enqueue(Message(queue_name="q", actor_name=name, args=(), kwargs={},
                                   options={}, message_timestamp=old))
        broker.join("q", fail_fast=False)
    assert ran == ["turn"]
    assert broker.dead_letters == []
    assert sorted(d["outcome"] for d in _summaries(logs)) == ["ok", "skipped"]


def test_dramatiq_log_lines_name_the_message_without_its_payload() -> None:
    msg = Message(queue_name="q", actor_name="record_turn", args=(),
                  kwargs={"turn": {"text": SECRET}}, options={})
    record = logging.LogRecord("dramatiq.worker.WorkerThread", logging.ERROR, __file__, 1,
                               "Failed to process message %s with unhandled exception.",
                               (msg,), None)
    assert RedactMessages().filter(record)
    assert record.getMessage() == (
        f"Failed to process message record_turn[{msg.message_id}] with unhandled exception.")


def test_dramatiq_exception_lines_name_the_error_type_without_its_message() -> None:
    try:
        raise ValueError(SECRET)
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("dramatiq.worker.WorkerThread", logging.ERROR, __file__, 1,
                               "Failed to process message %s with unhandled exception.",
                               ("x",), exc_info)
    assert RedactMessages().filter(record)
    rendered = logging.Formatter().format(record)
    assert SECRET not in rendered
    assert "builtins.ValueError (its message is withheld" in rendered
    assert "raise ValueError(SECRET)" in rendered  # the frames stay
