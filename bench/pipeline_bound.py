"""The single-writer bound of the post-turn pipeline (used by ``bench/pipeline.py``).

Every post-turn step writes ``memory_state.db`` in its own short transaction, and SQLite lets
one writer in at a time, whatever the number of worker processes. This runs the steps of
each turn in one thread exactly as the actors call them (``workers.steps``: record_turn ->
extract_beliefs -> ego_anchor + micro_consolidate; their audit rows are reported but not
written, as no Audit middleware runs: they go to the ops db, not under this lock), no queue, and
measures the time the state db's write lock is held (``BEGIN IMMEDIATE`` to the end of
``COMMIT``). ``1 / (held time per turn)`` is the most turns/s any pool can record; the
step time per turn (embedding excluded: the hash embedder, whose cost is negligible, stands in
for the model, since the SQL is the same) is what one thread costs besides embedding.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from workers.audit import report
from workers.context import WorkerContext
from workers.steps import STEPS


@dataclass
class HeldTime:
    """Seconds between ``BEGIN IMMEDIATE`` and the end of ``COMMIT``/``ROLLBACK`` on one
    connection (wall clock, and this thread's CPU: on a loaded machine the wall time counts
    the time the thread waited for a core), and the number of such transactions."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0
    transactions: int = 0

    def watch(self, conn: Any) -> None:
        execute = conn.execute
        began = [0.0, 0.0]

        def timed(sql: str, *args: Any) -> Any:
            if sql == "BEGIN IMMEDIATE":
                began[:] = [time.perf_counter(), time.thread_time()]
                return execute(sql, *args)
            result = execute(sql, *args)
            if sql in ("COMMIT", "ROLLBACK") and began[0]:
                self.seconds += time.perf_counter() - began[0]
                self.cpu_seconds += time.thread_time() - began[1]
                self.transactions += 1
                began[:] = [0.0, 0.0]
            return result

        conn.execute = timed


def _run_turn(ctx: WorkerContext, turn: Mapping[str, Any]) -> int:
    """The turn's steps in the order the queue would run them; returns the steps run."""
    todo: list[tuple[str, dict[str, Any]]] = [
        ("record_turn", {"tenant": turn["tenant"], "turn": dict(turn)})]
    steps = 0
    while todo:
        name, kwargs = todo.pop(0)
        result = STEPS[name](ctx, **kwargs)
        report(ctx.ops, result.audit)
        todo.extend(result.follow_ups)
        steps += 1
    return steps


def writer_bound(data_dir: Path, turns: Sequence[Mapping[str, Any]],
                 tenants: Sequence[str]) -> dict[str, float]:
    """Run ``turns`` through the steps in one thread; the state db's write-lock time."""
    settings = Settings.from_env({}, data_dir=data_dir, log_level="error",
                                 embed_batch_window_ms=0)
    ctx = WorkerContext.open(settings)
    try:
        for tenant in tenants:
            create_tenant(ctx.state.conn, tenant)
        state = HeldTime()
        state.watch(ctx.state.conn)
        steps = 0
        began = time.perf_counter()
        cpu = time.process_time()
        for turn in turns:
            steps += _run_turn(ctx, turn)
        elapsed = time.perf_counter() - began
        cpu = time.process_time() - cpu
    finally:
        ctx.close()
    n = len(turns)
    return {"turns": n, "steps": steps, "elapsed_s": elapsed, "cpu_s": cpu,
            "state_tx": state.transactions, "state_held_s": state.seconds,
            "state_held_cpu_s": state.cpu_seconds,
            "bound_turns_per_s": n / state.seconds,
            "bound_cpu_turns_per_s": n / state.cpu_seconds,
            "one_thread_turns_per_s": n / elapsed}
