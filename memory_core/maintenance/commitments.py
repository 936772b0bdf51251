"""``commitment_gc`` (every 15 min): commitments and reviews past their time to live expire.

- A **commitment** is an open belief (active or conflict) of a commitment predicate
  (``plans_to``, ``committed_to``, ``reminder``: ``model.predicates``). Its time to live
  ends ``MNEMO_COMMITMENT_GRACE_S`` after its date (the ``valid_to`` the statement gave),
  or, stated without a date, ``MNEMO_COMMITMENT_TTL_S`` after it was said (``valid_from``).
  Past it the belief becomes ``expired``: never current again, but kept, with its world
  time (an undated one is closed at its expiry), so ``as_of`` still finds it. The older
  restatements of the same commitment (same subject, predicate and object) expire with it,
  so re-resolving the slot cannot make one of them current again.
- A **pending-review** belief recorded more than ``MNEMO_PENDING_REVIEW_TTL_S`` ago expires
  with an empty world time (``valid_to = valid_from``): nobody accepted it, so no ``as_of``
  shows it.

``expires_at`` stays the retention date of every memory (``session_purge`` deletes what is
past it); a commitment's expiry is computed from its own dates, never written there.
Idempotent: an expired belief is no longer open or pending, so a rerun finds nothing.

Then the completeness check (``maintenance.completeness``): recorded turns whose post-turn
follow-ups never ran get them re-sent (``followups_*`` counts).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from memory_core.clock import from_db, to_db
from memory_core.db.schema_state import OPEN_COMMITMENTS_SQL
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.common import id_pages, job_tx, tenants
from memory_core.maintenance.completeness import complete_turns
from memory_core.model.belief_rules import EXPIRED, PENDING_REVIEW, STICKY, Resolution
from memory_core.model.slots import Row, load_rows, load_slot, resolve, update_status
from memory_core.model.write_tx import WriteTx

PAGE = 500
_OPEN_SQL = ("SELECT id, valid_from, stated_valid_to FROM beliefs WHERE tenant = ? AND "
             f"{OPEN_COMMITMENTS_SQL} AND id > ? ORDER BY id LIMIT ?")
_REVIEWS_SQL = ("SELECT id FROM beliefs WHERE tenant = ? AND status = 'pending_review' AND "
                "recorded_at <= ? AND id > ? ORDER BY id LIMIT ?")


def commitment_expiry(valid_from: str, stated_valid_to: str | None, grace_s: int,
                      ttl_s: int) -> datetime:
    """When a commitment expires: its date plus the grace period, or (undated) its start
    plus the time to live."""
    if stated_valid_to is not None:
        return from_db(stated_valid_to) + timedelta(seconds=grace_s)
    return from_db(valid_from) + timedelta(seconds=ttl_s)


def _due(env: JobEnv, rows: list[tuple[int, str, str | None]]) -> list[tuple[int, str]]:
    """``[(id, expiry)]`` of the open commitments in ``rows`` that are due."""
    s = env.settings
    due = []
    for row_id, valid_from, stated in rows:
        expiry = commitment_expiry(valid_from, stated, s.commitment_grace_s, s.commitment_ttl_s)
        if expiry <= env.now:
            due.append((row_id, to_db(expiry)))
    return due


def _expire_commitment(tx: WriteTx, row: Row, expiry: str) -> None:
    """Expire ``row`` and the older copies of it, then re-resolve the rest of its slot."""
    predicate = tx.conn.execute("SELECT predicate FROM beliefs WHERE id = ?",
                                (row.id,)).fetchone()[0]
    for member in load_slot(tx.conn, tx.tenant, row.subject_id, predicate, row.object_norm):
        if member.status in STICKY or member.valid_from > row.valid_from:
            continue
        end = member.valid_to if member.valid_to is not None else max(expiry, member.valid_from)
        update_status(tx, member, Resolution(EXPIRED, end))
    resolve(tx, row.subject_id, predicate, row.object_norm)


def _expire_commitments(env: JobEnv, tenant: str) -> int:
    total = 0
    for rows in id_pages(env.state.conn, _OPEN_SQL, (tenant,), PAGE):
        due = _due(env, rows)
        if not due:
            continue
        with job_tx(env, tenant) as tx:
            for row_id, expiry in due:
                now = load_rows(tx.conn, tenant, "id = ?", (row_id,))
                if now and now[0].status not in STICKY:  # still open under the lock
                    _expire_commitment(tx, now[0], expiry)
                    total += 1
    return total


def _expire_reviews(env: JobEnv, tenant: str) -> int:
    cutoff = to_db(env.now - timedelta(seconds=env.settings.pending_review_ttl_s))
    total = 0
    for rows in id_pages(env.state.conn, _REVIEWS_SQL, (tenant, cutoff), PAGE):
        ids = [r[0] for r in rows]
        with job_tx(env, tenant) as tx:
            marks = ",".join("?" * len(ids))
            for row in load_rows(tx.conn, tenant, f"id IN ({marks}) AND status = ?",
                                 (*ids, PENDING_REVIEW)):
                update_status(tx, row, Resolution(EXPIRED, row.valid_from))
                # Stamped now (it was retired when recorded): the digest counts it today.
                tx.conn.execute("UPDATE beliefs SET retired_at = ? WHERE id = ?",
                                (tx.now, row.id))
                total += 1
    return total


def commitment_gc(env: JobEnv) -> JobReport:
    """Expire the commitments and pending-review beliefs past their time to live."""
    report = JobReport("commitment_gc")
    for tenant in tenants(env.state.conn):
        report.add("tenants")
        report.add("commitments_expired", _expire_commitments(env, tenant))
        report.add("reviews_expired", _expire_reviews(env, tenant))
    complete_turns(env, report)  # every 15 min: lost post-turn follow-ups are re-sent
    return report
