"""The completeness check as a step of ``macro_sleep`` and ``commitment_gc``.

Runs ``memory_core.write.completeness.check_completeness`` over the turns recorded more than
``MNEMO_COMPLETENESS_GRACE_S`` before the run (at most ``MNEMO_COMPLETENESS_MAX_TURNS``,
newest first) and re-sends their missing follow-ups through the worker's broker
(``JobEnv.offer``). Adds ``followups_*`` counts to the job's report; logs a warning naming
how many were missing (ids and counts only).
"""

from __future__ import annotations

from datetime import timedelta

import structlog

from memory_core.clock import to_db
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.mirrors.outbox import configured_mirrors
from memory_core.write.completeness import CompletenessReport, check_completeness

log = structlog.get_logger("mnemo.maintenance")


def complete_turns(env: JobEnv, report: JobReport) -> CompletenessReport:
    """Check (and re-send) the follow-ups recorded turns are missing; counts into ``report``."""
    s = env.settings
    found = check_completeness(
        env.state.conn, before=to_db(env.now - timedelta(seconds=s.completeness_grace_s)),
        max_turns=s.completeness_max_turns, offer=env.offer, ops=env.ops.conn,
        mirrors=configured_mirrors(s))
    for key, n in found.counts().items():
        report.add(key, n)
    if found.missing_total:
        log.warning("followups_missing", job=report.job, missing=found.missing_total,
                    requeued=sum(found.requeued.values()), held=found.held,
                    **{k: v for k, v in found.missing.items() if v})
    return found
