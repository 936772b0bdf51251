"""The job contract: one actor per job on the same queue, and messages built by name."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from dramatiq.brokers.stub import StubBroker

from memory_core.errors import InvalidInputError
from memory_core.jobs import JOBS, MAX_MESSAGE_BYTES, QUEUES, build_message
from tests.conftest import REPO
from workers.actors import declare_actors
from workers.middleware import worker_middleware


@pytest.fixture
def actors() -> dict[str, object]:
    broker = StubBroker(middleware=worker_middleware())
    declared = declare_actors(broker)
    assert set(declared) == set(broker.actors)
    return dict(broker.actors)


@pytest.mark.parametrize("name", sorted(JOBS))
def test_every_job_has_exactly_one_actor_on_its_queue(name: str, actors: dict) -> None:
    job = JOBS[name]
    matching = [a for a in actors.values() if a.actor_name == job.name]
    assert len(matching) == 1, f"job {name} has {len(matching)} actors"
    actor = matching[0]
    assert actor.queue_name == job.queue
    assert actor.priority == job.priority
    assert actor.options["max_retries"] == job.max_retries
    assert actor.options["time_limit"] == job.time_limit_ms
    assert actor.options["min_backoff"] == job.min_backoff_ms
    assert actor.options["max_backoff"] == job.max_backoff_ms
    assert actor.options.get("max_age") == job.max_age_ms


def test_every_actor_belongs_to_a_job(actors: dict) -> None:
    assert set(actors) == set(JOBS)


def test_turns_never_age_out_and_queues_are_listed() -> None:
    assert JOBS["record_turn"].max_age_ms is None
    assert all(job.queue in QUEUES for job in JOBS.values())


def test_build_message_by_name() -> None:
    turn = {"turn_uid": "u1", "session_id": "s1", "idx": 0, "speaker": "user",
            "occurred_at": "2024-05-01T12:00:00Z", "text": "I live in Lisbon"}
    msg = build_message("record_turn", tenant="acme", turn=turn)
    assert (msg.queue_name, msg.actor_name, msg.args) == ("turns", "record_turn", ())
    assert msg.kwargs == {"tenant": "acme", "turn": turn}
    assert json.loads(msg.encode())["kwargs"]["turn"]["text"] == "I live in Lisbon"
    other = build_message("record_turn", tenant="acme", turn=turn)
    assert other.message_id != msg.message_id


@pytest.mark.parametrize(("name", "kwargs", "match"), [
    ("nope", {}, "unknown job 'nope'"),
    ("record_turn", {"tenant": "a"}, "missing turn"),
    ("ship_changes", {"tenant": "a", "extra": 1}, "unknown extra"),
    ("ship_changes", {"tenant": object()}, "must be JSON values"),
    ("ship_changes", {"tenant": float("nan")}, "must be JSON values"),
])
def test_build_message_refuses_bad_payloads_clearly(name: str, kwargs: dict,
                                                    match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        build_message(name, **kwargs)


def test_build_message_refuses_an_oversized_payload_without_quoting_it() -> None:
    with pytest.raises(InvalidInputError, match="bytes, over") as info:
        build_message("ship_changes", tenant="x" * (MAX_MESSAGE_BYTES + 1))
    assert "xxxx" not in str(info.value)


def test_the_chat_side_imports_neither_workers_nor_the_redis_broker() -> None:
    code = (
        "import sys, tempfile\n"
        "from memory_core.jobs import build_message\n"
        "from memory_core.brokers import make_enqueuer\n"
        "from memory_core.settings import Settings\n"
        "s = Settings.from_env({}, data_dir=tempfile.mkdtemp())\n"
        "e = make_enqueuer(s)\n"
        "e.send(build_message('ship_changes', tenant='t'))\n"
        "e.close()\n"
        "print(','.join(m for m in ('workers', 'dramatiq.brokers.redis', 'redis')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
