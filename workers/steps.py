"""The post-turn steps: thin calls into ``memory_core.write.pipeline``, one per job.

Each step takes the worker context and the message's payload, does its work (one short
transaction in the state db, idempotent through ``applied_jobs`` or by finding nothing left to
do), and returns what it changed (audit entries: ids and counts) and the follow-up jobs to
enqueue. The actor enqueues those only after the step returned, that is after the effect
committed. A redelivered step re-enqueues its follow-ups, which are idempotent too.

The chain::

    record_turn -> extract_beliefs -> ego_anchor         (when beliefs were drawn)
                                   -> micro_consolidate  (always: episodes of the session)
                                   -> ship_changes       (when a mirror is configured)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.errors import InvalidInputError
from memory_core.mirrors.outbox import ship_all
from memory_core.model.turns import get_turn
from memory_core.write import pipeline
from workers.audit import AuditEntry
from workers.context import WorkerContext


@dataclass
class StepResult:
    audit: list[AuditEntry] = field(default_factory=list)
    follow_ups: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # job, kwargs


def record_turn(ctx: WorkerContext, tenant: str, turn: Mapping[str, Any]) -> StepResult:
    """Record the raw turn and its episode, then ask for its beliefs."""
    if not isinstance(turn, Mapping) or turn.get("tenant") != tenant:
        raise InvalidInputError("record_turn: the turn's tenant must equal the message's tenant")
    rec = pipeline.record_turn_and_episode(ctx.state, ctx.index, turn,
                                           max_turn_chars=ctx.settings.max_turn_chars)
    if rec is None:  # recorded once and deleted since: a redelivery must not revive it
        return StepResult()
    entry = AuditEntry(rec.tenant, "turn_recorded", "turn", rec.turn_uid, {
        "turn_id": rec.turn_id, "episode_id": rec.episode_id, "session_id": rec.session_id,
        "created": rec.created})
    return StepResult([entry], [("extract_beliefs", {"tenant": rec.tenant,
                                                     "turn_uid": rec.turn_uid})])


def extract_beliefs(ctx: WorkerContext, tenant: str, turn_uid: str) -> StepResult:
    """Extract the turn's beliefs and apply them; then anchor, consolidate and ship."""
    ids = pipeline.extract_and_apply(ctx.state, ctx.index, tenant, turn_uid)  # NotFoundError
    row = get_turn(ctx.state.conn, tenant, turn_uid)  # (not recorded yet) is retried
    if row is None:  # deleted since the extraction committed: nothing left to follow up
        return StepResult()
    audit = [AuditEntry(tenant, "belief_applied", "belief", str(belief_id),
                        {"turn_uid": turn_uid}) for belief_id in ids]
    follow: list[tuple[str, dict[str, Any]]] = []
    if ids:
        follow.append(("ego_anchor", {"tenant": tenant, "turn_uid": turn_uid}))
    follow.append(("micro_consolidate", {"tenant": tenant, "session_id": row.session_id,
                                         "turn_uid": turn_uid}))
    if ctx.mirrors:
        follow.append(("ship_changes", {"tenant": tenant}))
    return StepResult(audit, follow)


def ego_anchor(ctx: WorkerContext, tenant: str, turn_uid: str,
               subject_ids: Sequence[str] | None = None) -> StepResult:
    """Link the turn's subjects that do not reach the hub to it (or drop stale anchors)."""
    counts = pipeline.anchor_turn(ctx.state, ctx.index, tenant, turn_uid, subject_ids)
    if not any(counts.values()):
        return StepResult()
    return StepResult([AuditEntry(tenant, "ego_anchor_synced", "turn", turn_uid, counts)])


def micro_consolidate(ctx: WorkerContext, tenant: str, session_id: str,
                      turn_uid: str | None = None,
                      subject_ids: Sequence[str] | None = None) -> StepResult:
    """Fold duplicate working episodes, re-resolve the touched slots, recount entities."""
    rep = pipeline.micro_consolidate(ctx.state, ctx.index, tenant, session_id,
                                     subject_ids=subject_ids, turn_uid=turn_uid)
    detail = {"episodes_merged": rep.episodes_merged, "beliefs_changed": rep.beliefs_changed,
              "counts_fixed": rep.counts_fixed}
    if not any(detail.values()):
        return StepResult()
    return StepResult([AuditEntry(tenant, "session_consolidated", "session", session_id,
                                  {**detail, "slots_resolved": rep.slots_resolved})])


def ship_changes(ctx: WorkerContext, tenant: str) -> StepResult:
    """Ship the outbox to every configured mirror (all tenants: one cursor per sink). A sink
    that is down raises MirrorUnavailable after the others shipped: the message is retried
    with backoff, and the cursor of the down sink has not moved."""
    audit: list[AuditEntry] = []
    for rep in ship_all(ctx.state.conn, ctx.ops.conn, ctx.sinks()):
        audit.extend(AuditEntry(t, "outbox_shipped", "mirror", rep.sink, {
            "count": n, "first_id": rep.first_id, "last_id": rep.last_id})
            for t, n in sorted(rep.per_tenant.items()))
    return StepResult(audit)


STEPS: dict[str, Callable[..., StepResult]] = {
    "record_turn": record_turn,
    "extract_beliefs": extract_beliefs,
    "ego_anchor": ego_anchor,
    "micro_consolidate": micro_consolidate,
    "ship_changes": ship_changes,
}
