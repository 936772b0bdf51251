"""``macro_sleep`` (every 6 h): memory looks after itself.

For each tenant, in this order:
1. decay episode importance up to the firing's time (``tiers.decay``);
2. reinforce what the recall log shows was used (``reinforce``), so a recall counts in full;
3. end the chat sessions idle for ``MNEMO_SESSION_IDLE_S`` (working -> recent) and put every
   other episode in its tier by age and importance (``tiers.move``);
4. backfill the ego anchors (``model.ego_anchor``, paged).
Then, once for the store, the FTS drift check (``fts_drift``), the merge of the full-text
indexes' segments in bounded steps (``fts_merge``), recall's change log cut to its newest
``CHANGES_KEPT`` entries (``db.changes.prune``; a chat process holding rows older than
that rebuilds them) and the completeness check (``maintenance.completeness``:
post-turn follow-ups that never ran are re-sent).

Idempotent per window: every step is a function of the stored times and the firing's
clock, or keyed (reinforcement), so a second run at the same time changes nothing.
Resumable: each step commits in short transactions, and what is done is not redone.
"""

from __future__ import annotations

from memory_core.db import changes
from memory_core.db.dialect import is_postgres
from memory_core.db.sqlite import atomic
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.common import end_sessions, tenants
from memory_core.maintenance.completeness import complete_turns
from memory_core.maintenance.fts_drift import check_fts_drift
from memory_core.maintenance.fts_merge import merge_fts
from memory_core.maintenance.reinforce import reinforce
from memory_core.maintenance.tiers import decay, move
from memory_core.model.ego_anchor import backfill_ego_anchors

# Changes kept for chat processes to catch up from (``recall.resident``): about a
# day of turns of a busy store; a process further behind rebuilds a tenant (~65 ms).
CHANGES_KEPT = 100_000


def _tenant(env: JobEnv, tenant: str, report: JobReport) -> None:
    report.add("episodes_decayed", decay(env, tenant))
    for key, n in reinforce(env, tenant).items():
        report.add(key, n)
    report.add("working_to_recent", end_sessions(env, tenant))
    for key, n in move(env, tenant).items():
        report.add(key, n)
    anchors = backfill_ego_anchors(env.state.conn, env.index, tenant)
    report.add("anchors_added", anchors.added)
    report.add("anchors_removed", anchors.removed)
    report.add("anchors_moved", anchors.moved)


def macro_sleep(env: JobEnv) -> JobReport:
    """Decay, reinforcement, tier moves, ego anchors, the FTS drift check and segment merge,
    the completeness check."""
    report = JobReport("macro_sleep")
    for tenant in tenants(env.state.conn):
        report.add("tenants")
        _tenant(env, tenant, report)
    for check in check_fts_drift(env.state.conn):
        if check.rebuilt:
            report.add("fts_rebuilt")
            report.counts[f"fts_rebuilt_{check.table}"] = f"{check.indexed}->{check.rows}"
    for fts, steps in merge_fts(env.state.conn).items():
        report.add(f"fts_merge_steps_{fts}", steps)
    if not is_postgres(env.state.conn):  # the primary keeps no change log
        with atomic(env.state.conn):
            pruned = changes.prune(env.state.conn, CHANGES_KEPT)
        if pruned:  # counted only when there were some (the primary never has any)
            report.add("recall_changes_pruned", pruned)
    complete_turns(env, report)
    return report
