"""The backup schedule's mirror-drift check: a reconcile dry run of every configured mirror
that can be read back, recorded for `mnemo health` and logged as a warning when it drifted.

It never fails the backup: a mirror that is down is logged (error type only) and left to
shipping's retries; the drift is repaired by `mnemo mirror reconcile`, never silently here.
"""

from __future__ import annotations

from typing import Any

import structlog

from memory_core.errors import MnemoError
from memory_core.maintenance.base import JobEnv
from memory_core.mirrors.outbox import configured_mirrors, make_sink
from memory_core.mirrors.readers import reader_for
from memory_core.mirrors.reconcile import reconcile, record_drift

log = structlog.get_logger("mnemo.maintenance")


def check_mirrors(env: JobEnv) -> dict[str, Any]:
    """{sink: drifted fact count, or "unreadable" / "down: <error type>"} per mirror."""
    out: dict[str, Any] = {}
    for name in configured_mirrors(env.settings):
        sink = make_sink(env.settings, name)
        try:
            reader = reader_for(sink)
            if reader is None:
                out[name] = "unreadable"
                continue
            report = reconcile(env.state.conn, reader, dry_run=True)
            record_drift(env.ops.conn, report)
            out[name] = report.drift
            if report.drift:
                totals = report.totals()
                log.warning("mirror_drift", sink=name, dead=totals["dead"],
                            missing=totals["missing"], stale=totals["stale"],
                            tenants=sum(1 for t in report.tenants if t.drift),
                            fix="mnemo mirror reconcile")
        except MnemoError as e:
            out[name] = f"down: {type(e).__name__}"
            log.warning("mirror_drift_unchecked", sink=name, error=type(e).__name__)
        finally:
            sink.close()
    return out
