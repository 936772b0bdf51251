"""Timing a call on a busy machine: its wall time less the time its thread waited for a CPU.

The suite runs on a 2-core machine often at load 10-20, where a thread ready to run can
wait tens of milliseconds for a core. That wait says nothing about the code; the time the
code spent running or blocked (a lock, a sleep, a socket, a disk write) does. Linux counts
each thread's run-queue wait in ``/proc/thread-self/schedstat`` (second field, ns).
"""

from __future__ import annotations

import time
from pathlib import Path

_SCHEDSTAT = Path("/proc/thread-self/schedstat")


def _queued_s() -> float:
    """Seconds this thread has waited on a run queue so far (0 where not counted)."""
    try:
        return int(_SCHEDSTAT.read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


class Stopwatch:
    """``with Stopwatch() as w: ...``; then ``w.seconds``: wall time less run-queue wait."""

    seconds: float
    queued: float

    def __enter__(self) -> Stopwatch:
        self._queued = _queued_s()
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._started
        self.queued = _queued_s() - self._queued
        self.seconds = wall - self.queued
