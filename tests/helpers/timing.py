"""Timing a call on a busy machine: its wall time less the time this process's threads
waited for a CPU meanwhile.

The suite runs on a 2-core machine often at load 10-20, where a thread ready to run can
wait tens of milliseconds for a core. That wait says nothing about the code; the time the
code spent running or blocked (a sleep, a socket, a disk write) does. The process's other
threads count too: one waiting for a CPU while it holds the GIL or a database's write lock
holds the call up as long (seen: a 69 ms call, 22 ms of it in its own thread's queue).
Linux counts each thread's run-queue wait in ``/proc/self/task/<tid>/schedstat`` (second
field, ns). A call that blocks while the other threads idle is timed in full.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

_TASKS = Path("/proc/self/task")


def _queued_s() -> dict[str, float]:
    """Each thread's run-queue wait so far, in seconds (empty where Linux does not say)."""
    waits = {}
    try:
        tasks = list(_TASKS.iterdir())
    except OSError:
        return {}
    for task in tasks:
        try:
            waits[task.name] = int((task / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):  # a thread that just ended
            continue
    return waits


class Stopwatch:
    """``with Stopwatch() as w: ...``; then ``w.seconds``: wall time less the run-queue
    wait of this process's threads meanwhile (``w.queued``)."""

    seconds: float
    queued: float

    def __enter__(self) -> Stopwatch:
        self._queued = _queued_s()
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._started
        after = _queued_s()
        self.queued = sum(w - self._queued.get(tid, 0.0) for tid, w in after.items())
        self.seconds = wall - self.queued


def wait_progressing(condition: Callable[[], Any], progress: Callable[[], Any], *,
                     stall_s: float, timeout_s: float, interval: float = 0.05) -> Any:
    """Poll ``condition`` until truthy and return it; fail the test when ``progress()`` (any
    comparable snapshot: counts, states) has not changed for ``stall_s`` seconds, or after
    ``timeout_s`` in all.

    For work whose pace is the machine's (processes starting and draining a queue at load
    20 on 2 cores take several times their idle time): a fixed deadline fails a slow run
    that is getting there; a stall is what a hang looks like.
    """
    started = last_change = time.monotonic()
    seen = progress()
    while True:
        value = condition()
        if value:
            return value
        now = time.monotonic()
        current = progress()
        if current != seen:
            seen, last_change = current, now
        if now - last_change > stall_s:
            pytest.fail(f"no progress for {stall_s:.0f} s (stuck at {seen!r})")
        if now - started > timeout_s:
            pytest.fail(f"condition not met within {timeout_s:.0f} s (at {seen!r})")
        time.sleep(interval)
