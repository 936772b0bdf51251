"""``mnemo ingest --wait``: after enqueuing, follow the turns until the workers recorded them.

Progress is the number of this file's turns recorded in the state db (read-only, as the
chat reads it). The wait ends when every turn is recorded, or when the turns queue has
nothing left to run (ready, delayed, in flight and spooled all 0) while some turns are still
not recorded: those went to the dead letters (``mnemo queue dead --queue turns``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from memory_core.db import open_state
from memory_core.jobs import JOBS, RECORD_TURN
from memory_core.model.turns import CheckedTurn, is_recorded
from memory_core.progress import OnProgress
from memory_core.settings import Settings
from scripts.cli.queue_watch import Sample, sampler

TURNS_QUEUE = JOBS[RECORD_TURN].queue


def _drained(sample: Sample) -> bool:
    row = next((r for r in sample.rows or () if r.queue == TURNS_QUEUE), None)
    return row is not None and row.in_flight == 0 and sample.backlog(TURNS_QUEUE) == 0


def wait_recorded(settings: Settings, turns: Sequence[CheckedTurn], on_progress: OnProgress,
                  *, poll_s: float = 1.0,
                  sleep: Callable[[float], None] = time.sleep) -> list[CheckedTurn]:
    """Wait until every turn of ``turns`` is recorded or the turns queue is drained; the
    turns not recorded (empty: all were)."""
    pending = list(turns)
    with sampler(settings) as queues:
        while pending:
            # The queue first: a turn recorded (then acked) before it looked drained is seen
            # recorded below, not taken for lost.
            drained = _drained(queues.sample())
            state = open_state(settings, migrate=False, readonly=True)
            try:
                pending = [t for t in pending if not is_recorded(state.conn, t)]
            finally:
                state.close()
            on_progress("recorded", len(turns) - len(pending), len(turns))
            if drained:
                break
            sleep(poll_s)
    return pending
