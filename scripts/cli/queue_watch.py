"""``mnemo queue stats`` (one shot and ``--watch``): counts per queue with the spool, and
while watching the drain rate and ETA of each queue's backlog.

The backlog of a queue is what waits to run: ready + delayed + spooled (in flight is
running already). The drain rate is how fast the backlog fell over the last few refreshes
(``WINDOW``); a backlog that grows has a negative rate and no ETA. While Redis does not
answer, the broker's counts are unknown ("-") but the spool (in memory_ops.db, where the
chat side puts messages meanwhile) still shows.
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import click
import redis

from memory_core.brokers import make_broker
from memory_core.brokers.base import QueueStats
from memory_core.db import Database, open_ops
from memory_core.jobs import QUEUES
from memory_core.settings import Settings
from scripts.cli.app import emit_table
from scripts.cli.progress import human_count, human_duration, isatty

WINDOW = 5  # refreshes the drain rate is measured over
CLEAR = "\x1b[H\x1b[2J"


@dataclass
class Sample:
    """One look at the queues. ``rows`` is None while the broker does not answer (then
    ``error`` says why); ``spooled`` is None on the embedded broker (it has no spool)."""

    at: float  # time.monotonic()
    wall: datetime
    broker: str
    rows: list[QueueStats] | None
    spooled: dict[str, int] | None
    error: str | None = None
    names: list[str] = field(default_factory=list)

    def spool(self, queue: str) -> int | None:
        return None if self.spooled is None else self.spooled.get(queue, 0)

    def backlog(self, queue: str | None = None) -> int | None:
        """ready + delayed + spooled of ``queue`` (None: all queues); None when unknown."""
        if self.rows is None:
            return None
        waiting = sum(r.ready + r.delayed for r in self.rows if queue in (None, r.queue))
        if self.spooled is None:
            return waiting
        return waiting + (sum(self.spooled.values()) if queue is None
                          else self.spooled.get(queue, 0))


class Sampler:
    """Takes samples of the configured broker and spool; keeps both open between them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.broker = make_broker(settings)
        for name in QUEUES:
            self.broker.declare_queue(name)
        self.kind = str(self.broker.kind)
        self.ops: Database | None = open_ops(settings) if self.kind == "redis" else None

    def sample(self) -> Sample:
        now, wall = time.monotonic(), datetime.now(UTC)
        spooled = None
        if self.ops is not None:
            from memory_core.brokers.spool import Spool

            spooled = Spool(self.ops).sizes()
        try:
            rows: list[QueueStats] | None = self.broker.queue_stats(QUEUES)
            error = None
        except redis.RedisError as e:
            rows = None
            error = (f"Redis at {self.settings.broker_url} did not answer "
                     f"({type(e).__name__}): start it, or check MNEMO_BROKER_URL")
        names = sorted({*QUEUES, *(r.queue for r in rows or ()), *(spooled or {})})
        return Sample(now, wall, self.kind, rows, spooled, error, names)

    def close(self) -> None:
        self.broker.close()
        if self.ops is not None:
            self.ops.close()


@contextmanager
def sampler(settings: Settings) -> Iterator[Sampler]:
    s = Sampler(settings)
    try:
        yield s
    finally:
        s.close()


def drain_rate(history: Sequence[Sample], queue: str | None) -> float | None:
    """Backlog fallen per second between the oldest and newest sample that know it
    (negative: growing); None with fewer than two such samples."""
    known = [(s.at, s.backlog(queue)) for s in history if s.backlog(queue) is not None]
    if len(known) < 2 or known[-1][0] <= known[0][0]:
        return None
    (t0, b0), (t1, b1) = known[0], known[-1]
    return (float(b0 or 0) - float(b1 or 0)) / (t1 - t0)


def eta_s(backlog: int | None, rate: float | None) -> float | None:
    if not backlog or rate is None or rate <= 0:
        return None
    return backlog / rate


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def _rate_text(rate: float | None) -> str:
    return "-" if rate is None else f"{human_count(rate)}/s"


def _eta_text(backlog: int | None, rate: float | None) -> str:
    if backlog == 0:
        return "empty"
    eta = eta_s(backlog, rate)
    return "-" if eta is None else human_duration(eta)


def _row(sample: Sample, queue: str) -> QueueStats | None:
    return next((r for r in sample.rows or () if r.queue == queue), None)


def as_dict(history: Sequence[Sample], with_rates: bool) -> dict[str, Any]:
    """The newest sample for --json (with the drain rates when watching)."""
    sample = history[-1]
    queues = []
    for name in sample.names:
        row = _row(sample, name)
        item: dict[str, Any] = (asdict(row) if row is not None else
                                {"queue": name, "ready": None, "delayed": None,
                                 "in_flight": None, "dead": None, "oldest_age_s": None})
        item["spooled"] = sample.spool(name)
        if with_rates:
            rate = drain_rate(history, name)
            item.update(backlog=sample.backlog(name), drain_per_s=rate,
                        eta_s=eta_s(sample.backlog(name), rate))
        queues.append(item)
    out: dict[str, Any] = {
        "broker": sample.broker, "reachable": sample.rows is not None, "queues": queues,
        "spool": None if sample.spooled is None else sum(sample.spooled.values())}
    if sample.error:
        out["error"] = sample.error
    if with_rates:
        rate = drain_rate(history, None)
        out.update(at=sample.wall.isoformat(timespec="seconds"),
                   backlog=sample.backlog(), drain_per_s=rate,
                   eta_s=eta_s(sample.backlog(), rate))
    return out


def print_table(history: Sequence[Sample], age: Callable[[float | None], str],
                with_rates: bool) -> None:
    """The table of the newest sample (drain and ETA columns, and a total, when watching)."""
    sample = history[-1]
    headers = ["queue", "ready", "delayed", "in flight", "dead", "spooled", "oldest"]
    rows = []
    for name in sample.names:
        row = _row(sample, name)
        counts = ([row.ready, row.delayed, row.in_flight, row.dead] if row is not None
                  else [None] * 4)
        rows.append([name, *map(_n, counts), _n(sample.spool(name)),
                     age(row.oldest_age_s) if row is not None else "-"])
    if with_rates:
        headers += ["backlog", "drain", "ETA"]
        spool = None if sample.spooled is None else sum(sample.spooled.values())
        rows.append(["total", "", "", "", "", _n(spool), ""])
        queues: list[str | None] = [*sample.names, None]
        for cells, queue in zip(rows, queues, strict=True):
            rate = drain_rate(history, queue)
            cells += [_n(sample.backlog(queue)), _rate_text(rate),
                      _eta_text(sample.backlog(queue), rate)]
    emit_table(headers, rows)


def plain_lines(history: Sequence[Sample]) -> list[str]:
    """One timestamped line per queue and a total, for a log (stdout not a terminal)."""
    sample = history[-1]
    stamp = sample.wall.isoformat(timespec="seconds").replace("+00:00", "Z")
    lines = []
    for name in [*sample.names, None]:
        row = _row(sample, name) if name is not None else None
        rate = drain_rate(history, name)
        counts = ("" if name is None else
                  " ".join(f"{k}={_n(getattr(row, k) if row else None)}"
                           for k in ("ready", "delayed", "in_flight", "dead"))
                  + f" spooled={_n(sample.spool(name))} ")
        lines.append(f"{stamp} queue={name or 'total'} {counts}"
                     f"backlog={_n(sample.backlog(name))} drain={_rate_text(rate)} "
                     f"eta={_eta_text(sample.backlog(name), rate)}")
    if sample.error:
        lines.append(f"{stamp} broker={sample.broker} error={json.dumps(sample.error)}")
    return lines


def watch(settings: Settings, *, interval: float, count: int | None, as_json: bool,
          age: Callable[[float | None], str],
          sleep: Callable[[float], None] = time.sleep) -> None:
    """Refresh every ``interval`` s (``count`` times, or until Ctrl-C): a redrawn table
    on a terminal, timestamped lines otherwise, one JSON object per line with --json."""
    tty = isatty(sys.stdout) and not as_json
    history: deque[Sample] = deque(maxlen=WINDOW + 1)
    done = 0
    with sampler(settings) as s:
        try:
            while count is None or done < count:
                if done:
                    sleep(interval)
                history.append(s.sample())
                done += 1
                _show(history, tty=tty, as_json=as_json, interval=interval, age=age)
        except KeyboardInterrupt:
            return  # Ctrl-C ends a watch: exit 0


def _show(history: Sequence[Sample], *, tty: bool, as_json: bool, interval: float,
          age: Callable[[float | None], str]) -> None:
    sample = history[-1]
    if as_json:
        click.echo(json.dumps(as_dict(history, with_rates=True), sort_keys=True))
    elif tty:
        click.echo(CLEAR, nl=False)
        click.echo(f"broker: {sample.broker}  every {interval:g}s  "
                   f"{sample.wall.strftime('%H:%M:%S')} UTC  (Ctrl-C to stop)")
        if sample.error:
            click.echo(f"unreachable: {sample.error}")
        print_table(history, age, with_rates=True)
    else:
        for line in plain_lines(history):
            click.echo(line)
