"""``firing_ledger``: the week's firings, misses, failures and durations of every schedule.

Reads the ledger rows fired in the seven days before the firing (``env.now``), a page at a
time, and sums them per schedule; stores the summary as one JSON row in ``firing_reports``
(keyed by the window: the same window twice rewrites the same row) and returns it flattened in
the report's counts (``<schedule>.<measure>``). Then it prunes ledger rows and window claims
older than ``MNEMO_SCHEDULE_HISTORY_DAYS``, in short transactions.

Every schedule job appears, fired or not, so a schedule that never ran shows as zeros.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import atomic
from memory_core.jobs import JOBS, MAINTENANCE
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.firings import (
    CATCH_UP,
    DONE,
    FAILED,
    MANUAL,
    MISSED,
    Firing,
    prune,
    rows_between,
)

WEEK = timedelta(days=7)


@dataclass
class _Tally:
    firings: int = 0  # windows fired (scheduled, catch-up, manual); misses apart
    manual: int = 0
    catch_up: int = 0
    done: int = 0
    failed: int = 0
    open: int = 0  # claimed, enqueued or still running at the report
    missed: int = 0  # windows that passed with no scheduler
    duration_ms_total: int = 0
    duration_ms_max: int = 0
    last_window: str | None = None
    last_status: str | None = None

    def add(self, row: Firing) -> None:
        if row.status == MISSED:
            self.missed += row.missed_count
            return
        self.firings += 1
        self.manual += row.kind == MANUAL
        self.catch_up += row.kind == CATCH_UP
        if row.status == DONE:
            self.done += 1
        elif row.status == FAILED:
            self.failed += 1
        else:
            self.open += 1
        self.duration_ms_total += row.duration_ms or 0
        self.duration_ms_max = max(self.duration_ms_max, row.duration_ms or 0)
        self.last_window, self.last_status = row.window_key, row.status

    def as_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        finished = self.done + self.failed
        out["duration_ms_mean"] = round(self.duration_ms_total / finished) if finished else 0
        return out


def summarize(conn: Any, since: Any, until: Any) -> dict[str, dict[str, Any]]:
    """Per schedule job: the tallies of the ledger rows fired in ``[since, until)``."""
    tallies = {name: _Tally() for name, job in JOBS.items() if job.queue == MAINTENANCE}
    for row in rows_between(conn, since, until):
        tallies.setdefault(row.schedule_id, _Tally()).add(row)
    return {name: tally.as_json() for name, tally in sorted(tallies.items())}


def firing_ledger(env: JobEnv) -> JobReport:
    """Summarize the week before ``env.now``, store it, prune old history."""
    since, until = env.now - WEEK, env.now
    conn = env.ops.conn
    summary = summarize(conn, since, until)
    body = {"since": to_db(since), "until": to_db(until), "schedules": summary}
    with atomic(conn) as c:
        c.execute("INSERT INTO firing_reports (window_key, since, until, created_at, body) "
                  "VALUES (?, ?, ?, ?, ?) ON CONFLICT (window_key) DO UPDATE SET "
                  "since = excluded.since, until = excluded.until, "
                  "created_at = excluded.created_at, body = excluded.body",
                  (env.window, to_db(since), to_db(until), to_db(utcnow()),
                   json.dumps(body, sort_keys=True, separators=(",", ":"))))
    keep = timedelta(days=env.settings.schedule_history_days)
    pruned = prune(conn, env.now - keep, utcnow())
    report = JobReport("firing_ledger")
    for name, tally in summary.items():
        for measure in ("firings", "done", "failed", "missed", "duration_ms_mean",
                        "duration_ms_max"):
            report.counts[f"{name}.{measure}"] = tally[measure]
        report.add("firings", tally["firings"])
        report.add("failures", tally["failed"])
        report.add("misses", tally["missed"])
    report.counts["schedules"] = len(summary)
    report.counts["pruned"] = pruned
    return report


def latest_report(conn: Any) -> dict[str, Any] | None:
    """The newest stored weekly report (for the CLI), or None."""
    row = conn.execute("SELECT window_key, body FROM firing_reports ORDER BY until DESC "
                       "LIMIT 1").fetchone()
    return None if row is None else {"window": row[0], **json.loads(row[1])}
