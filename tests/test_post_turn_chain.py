"""A turn's follow-ups run inline in its record_turn message: one message per turn, and the
same memory as one message per step. A follow-up that raises inline is queued as its own
message (its own retries and dead letter) and a log line names it; a crash between two
inline steps leaves the parent unacked, and its redelivery completes the turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from memory_core.jobs import JOBS, RECORD_TURN, turn_job_id
from tests.helpers.post_turn import Driver, closing, make_context, record_messages, snapshot, turn
from workers.steps import STEPS


class Crash(BaseException):
    """Stands in for the process dying mid-message: nothing catches it, nothing is acked."""


def _keys(ctx: Any) -> set[str]:
    return {k.split(":")[0] for (k,) in ctx.state.conn.execute("SELECT key FROM applied_jobs")}


def _failing(exc: BaseException) -> Any:
    def step(*args: Any, **kwargs: Any) -> Any:
        raise exc
    return step


def test_one_message_runs_the_whole_chain(tmp_path: Path) -> None:
    ctx = make_context(tmp_path / "inline")
    with closing(ctx):
        driver = Driver(ctx)
        (message,) = record_messages(ctx.settings, [turn(1)])  # "I live in Lisbon now."
        assert driver.deliver(message) == []
        assert _keys(ctx) == {"record_turn", "extract", "anchor", "consolidate"}


@pytest.mark.parametrize("job", ["extract_beliefs", "micro_consolidate"])
def test_a_failed_inline_step_is_queued_as_its_own_message(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job: str) -> None:
    clean_ctx = make_context(tmp_path / "clean")
    ctx = make_context(tmp_path / "inline")
    with closing(clean_ctx, ctx):
        Driver(clean_ctx, inline=()).run_fifo(record_messages(clean_ctx.settings,
                                                                 [turn(1)]))
        driver = Driver(ctx)  # its actors hold the real steps; inline runs look them up
        monkeypatch.setitem(STEPS, job, _failing(OSError("disk I/O error")))
        (message,) = record_messages(ctx.settings, [turn(1)])
        with capture_logs() as logs:
            sent = driver.deliver(message)  # the parent succeeds: it is acked
        assert [m.actor_name for m in sent] == [job]
        assert sent[0].message_id == turn_job_id(job, "t1", "u0001")
        assert sent[0].queue_name == JOBS[job].queue
        failed = [e for e in logs if e["event"] == "inline_step_failed"]
        assert [(e["job"], e["error"], e["queued"]) for e in failed] == [
            (job, "OSError", sent[0].message_id)]
        assert "Lisbon" not in repr(logs)
        monkeypatch.undo()
        queue = list(sent)
        while queue:  # the queued message and whatever it sends (inline again)
            queue.extend(driver.deliver(queue.pop(0)))
        assert snapshot(ctx.state.conn) == snapshot(clean_ctx.state.conn)


def test_a_crash_between_inline_steps_is_completed_by_the_redelivery(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_ctx = make_context(tmp_path / "clean")
    ctx = make_context(tmp_path / "inline")
    with closing(clean_ctx, ctx):
        turns = [turn(i, session="s0") for i in range(4)]
        Driver(clean_ctx, inline=()).run_fifo(record_messages(clean_ctx.settings, turns))
        driver = Driver(ctx)
        messages = record_messages(ctx.settings, turns)
        for message in messages[:-1]:
            driver.deliver(message)
        monkeypatch.setitem(STEPS, "micro_consolidate", _failing(Crash()))
        with pytest.raises(Crash):
            driver.deliver(messages[-1])  # recorded and extracted, then killed
        assert _keys(ctx) >= {"record_turn", "extract"}
        assert driver.sent == []  # nothing queued: the parent comes back instead
        monkeypatch.undo()
        assert driver.deliver(messages[-1]) == []  # the redelivery
        assert snapshot(ctx.state.conn) == snapshot(clean_ctx.state.conn)


def test_a_worker_runs_inline_only_the_queues_it_consumes(tmp_path: Path) -> None:
    ctx = make_context(tmp_path / "turns-only")
    with closing(ctx):
        driver = Driver(ctx, inline=("turns",))  # a worker that leaves `consolidate` alone
        (message,) = record_messages(ctx.settings, [turn(1)])
        sent = driver.deliver(message)
        assert [(m.actor_name, m.queue_name) for m in sent] == [
            ("micro_consolidate", "consolidate")]
        assert _keys(ctx) == {"record_turn", "extract", "anchor"}


def test_record_turns_time_limit_covers_its_inline_chain() -> None:
    inline = [job for job in JOBS.values() if job.inline]
    assert {job.name for job in inline} == {"extract_beliefs", "ego_anchor",
                                            "micro_consolidate"}
    assert JOBS[RECORD_TURN].time_limit_ms > sum(job.time_limit_ms for job in inline)
