"""The progress callback of long operator work (backup, restore, reindex, mirror sync and
reconcile): ``on_progress(phase, done, total)``.

A plain callable, so the core never imports click or knows where progress is shown (the
CLI draws it on stderr: ``scripts.cli.progress``). ``phase`` names the step (a database
file, ``exports``, ``beliefs``...); ``done`` and ``total`` count that step's units (bytes,
rows, tenants), ``done`` from 0 up to ``total``. Called after each unit of work, never
inside a write transaction's I/O.
"""

from __future__ import annotations

from collections.abc import Callable

OnProgress = Callable[[str, int, int], object]


def no_progress(phase: str, done: int, total: int) -> None:
    """The default: report nothing."""


class Counter:
    """Sums the sizes of chunks (``counter(n)``) and reports the running total as ``phase``
    of ``total`` (file copies and checksums read in chunks)."""

    def __init__(self, on_progress: OnProgress, phase: str, total: int) -> None:
        self.on_progress = on_progress
        self.phase = phase
        self.total = total
        self.done = 0

    def __call__(self, n: int) -> None:
        self.done += n
        self.on_progress(self.phase, self.done, self.total)
