"""Progress of long commands, on stderr only: a bar with count, rate and ETA on a terminal,
a plain line every few seconds otherwise, nothing with ``--json`` or ``--quiet``.

Nothing shows for work that ends within ``DELAY_S`` (no bar flashing on instant commands).
A ``Progress`` is the core's ``on_progress(phase, done, total)`` callable
(``memory_core.progress``); each new phase ends the previous one's line. click's
``progressbar`` is not used: it shows no rate, prints nothing but its label when stderr is
not a terminal, and has no start delay.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TextIO

import click

DELAY_S = 2.0  # show nothing for work shorter than this
EVERY_S = 2.0  # plain-line period when stderr is not a terminal
REDRAW_S = 0.1  # bar redraw period on a terminal
BAR_WIDTH = 24

quiet_option = click.option("--quiet", "-q", is_flag=True,
                            help="No progress on stderr (the result is still printed).")


def human_count(n: float, unit: str = "") -> str:
    """A count for people: exact below a million (``20000``), else ``1.2M``; with a unit,
    scaled (``B``: ``4.0 MB``)."""
    sep = " " if unit else ""
    if unit or abs(n) >= 1e6:
        for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(n) >= size:
                return f"{n / size:.1f}{sep}{suffix}{unit}"
    text = f"{n:.0f}" if float(n).is_integer() or abs(n) >= 100 else f"{n:.1f}"
    return f"{text}{sep}{unit}"


def human_duration(seconds: float) -> str:
    """``75`` -> ``1:15``, ``3700`` -> ``1:01:40``."""
    s = max(0, round(seconds))
    hours, rest = divmod(s, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """One command's progress display; call it as ``on_progress(phase, done, total)``.

    ``units`` maps a phase to its unit (``B``: shown as kB/MB/GB); ``stream``: stderr unless
    given; ``tty``: whether to draw a bar (default: whether the stream is a terminal).
    Use as a context manager, or call ``close`` at the end.
    """

    def __init__(self, label: str, *, enabled: bool = True,
                 units: Mapping[str, str] | None = None,
                 stream: TextIO | None = None, tty: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.enabled = enabled
        self.units = dict(units or {})
        self.stream = stream if stream is not None else sys.stderr
        self.tty = isatty(self.stream) if tty is None else tty
        self.clock = clock
        self.started = clock()
        self.phase: str | None = None
        self.done = 0
        self.total = 0
        self._phase_started = self.started
        self._first_done = 0
        self._last_draw = float("-inf")
        self._drawn = False  # something of this phase is on screen

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if phase != self.phase:
            self._end_phase()
            self.phase, self._phase_started, self._first_done = phase, self.clock(), done
            if not self.tty:  # a plain line only once the phase has run EVERY_S
                self._last_draw = self._phase_started
        self.done, self.total = done, total
        now = self.clock()
        if now - self.started < DELAY_S or self.rate(now) is None:
            return  # an instant command shows nothing; a line shows a rate
        if not self.tty and 0 < total <= done:
            return  # the phase's final line says it
        if now - self._last_draw >= (REDRAW_S if self.tty else EVERY_S):
            self._draw(now)

    def close(self) -> None:
        """End the current phase: its final line (see ``_end_phase``)."""
        if self.enabled:
            self._end_phase()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        elif self.enabled and self.tty and self._drawn:
            self.stream.write("\n")  # an error line must not land on the bar
            self.stream.flush()

    def rate(self, now: float | None = None) -> float | None:
        """Units per second in this phase so far (None before any measurable time)."""
        elapsed = (self.clock() if now is None else now) - self._phase_started
        if elapsed <= 0 or self.done <= self._first_done:
            return None
        return (self.done - self._first_done) / elapsed

    def _end_phase(self) -> None:
        """The phase's final line: if it was shown, or if it moved and the command has run
        long enough to show progress (a quick phase of a long command still says its end)."""
        now = self.clock()
        moved = self.done > self._first_done and now - self.started >= DELAY_S
        if self.phase is not None and (self._drawn or moved):
            self._draw(now, final=True)
        self.phase, self._drawn, self._last_draw = None, False, float("-inf")

    def _draw(self, now: float, final: bool = False) -> None:
        text = self.line(now, final=final)
        if self.tty:
            self.stream.write("\r" + text + "\x1b[K" + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._drawn, self._last_draw = True, now

    def line(self, now: float, *, final: bool = False) -> str:
        """The text shown for the current phase at ``now``."""
        unit = self.units.get(self.phase or "", "")
        name = f"{self.label} {self.phase}".strip() if self.phase else self.label
        count = human_count(self.done, unit)
        if self.total > 0:
            share = min(1.0, self.done / self.total)
            count += f"/{human_count(self.total, unit)} ({share:.0%})"
            if self.tty:
                filled = int(share * BAR_WIDTH)
                count = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {count}"
        head = f"{name} {count}"
        parts = [head]
        rate = self.rate(now)
        per_s = "-" if rate is None else human_count(rate, unit)
        if final:
            parts.append(f"in {human_duration(now - self._phase_started)}, {per_s}/s")
        else:
            parts.append(f"{per_s}/s")
            if self.total > 0:
                left = self.total - self.done
                parts.append("ETA " + ("-" if not rate else human_duration(left / rate)))
        return "  ".join(parts)


def isatty(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (False for anything that cannot say)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_for(label: str, *, as_json: bool = False, quiet: bool = False,
                 units: Mapping[str, str] | None = None) -> Progress:
    """The progress of a command with ``--json`` and ``--quiet``: silent with either."""
    return Progress(label, enabled=not (as_json or quiet), units=units)
