"""End-to-end completeness: every recorded turn has each follow-up its pipeline owes.

A recorded turn owes (``memory_core.write.pipeline``, each step's ``applied_jobs`` key):

- ``extract_beliefs`` — key ``extract:<tenant>:<uid>:<extractor>``, always;
- ``ego_anchor`` — key ``anchor:<tenant>:<uid>``, when the extraction drew beliefs;
- ``micro_consolidate`` — key ``consolidate:<tenant>:<uid>``, always (after extraction);
- ``ship_changes`` — when a mirror is configured: every sink's cursor at the outbox head.

``check_completeness`` reads the turns recorded before ``before`` (younger ones may have
their follow-ups in flight), newest first, page by page up to ``max_turns``, and lists the
turns whose follow-ups never ran. With ``offer`` (a broker's ``enqueue_once``) it re-sends
each missing follow-up under the id the pipeline itself uses (``jobs.turn_job_id``: one id
per job and turn), so a copy still queued, in flight or dead is left as it is: it is
*pending* or *dead*, not missing, and ``held`` counts it. A missing extraction is re-sent
alone: its own follow-ups come after it. Reads only; the re-sent jobs do the writing.

Why a turn can miss a follow-up although every step is at-least-once: a broker that lost
its data (Redis without persistence, restarted), a purged queue, an aged-out consolidation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dramatiq import Message

from memory_core.db.sqlite import Connection
from memory_core.extraction.api import default_extractor, extractor_name
from memory_core.jobs import build_message, derived_message_id, turn_job_id
from memory_core.write.pipeline import (
    ANCHORED,
    CONSOLIDATED,
    EXTRACTED,
    IN_CHUNK,
    applied_keys,
    step_key,
)

EXTRACT, ANCHOR, CONSOLIDATE, SHIP = ("extract_beliefs", "ego_anchor", "micro_consolidate",
                                      "ship_changes")
FOLLOW_UPS = (EXTRACT, ANCHOR, CONSOLIDATE, SHIP)
PAGE = 500

Offer = Callable[[Message[Any]], bool]


@dataclass(frozen=True)
class Gap:
    """One follow-up ``job`` a recorded turn is missing."""

    tenant: str
    turn_uid: str
    session_id: str
    job: str

    def message(self) -> Message[Any]:
        kwargs: dict[str, Any] = {"tenant": self.tenant, "turn_uid": self.turn_uid}
        if self.job == CONSOLIDATE:
            kwargs["session_id"] = self.session_id
        msg = build_message(self.job, **kwargs)
        return msg.copy(message_id=turn_job_id(self.job, self.tenant, self.turn_uid))


@dataclass
class CompletenessReport:
    """What one check found (and, with an offer, did): counts only, ids in ``gaps``."""

    scanned: int = 0
    truncated: bool = False  # stopped at max_turns: older turns were not read
    missing: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FOLLOW_UPS, 0))
    requeued: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FOLLOW_UPS, 0))
    held: int = 0  # offered but already queued, in flight or dead: pending, not lost
    gaps: list[Gap] = field(default_factory=list)

    @property
    def missing_total(self) -> int:
        return sum(self.missing.values())

    def counts(self, prefix: str = "followups_") -> dict[str, int]:
        """Flat counts for a job report or the ledger."""
        out = {f"{prefix}scanned": self.scanned, f"{prefix}missing": self.missing_total,
               f"{prefix}requeued": sum(self.requeued.values()), f"{prefix}held": self.held}
        out.update({f"{prefix}missing_{job}": n for job, n in self.missing.items() if n})
        return out


def _with_beliefs(conn: Connection, turns: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for tenant in sorted({t for t, _ in turns}):
        uids = [u for t, u in turns if t == tenant]
        for i in range(0, len(uids), IN_CHUNK):
            chunk = uids[i:i + IN_CHUNK]
            found.update((tenant, r[0]) for r in conn.execute(
                f"SELECT DISTINCT turn_uid FROM beliefs WHERE tenant = ? AND turn_uid IN "
                f"({','.join('?' * len(chunk))})", (tenant, *chunk)))
    return found


def _page_gaps(conn: Connection, rows: Sequence[tuple[Any, ...]], extractor: str) -> list[Gap]:
    keys = []
    for _, tenant, uid, _ in rows:
        keys += [step_key(EXTRACTED, tenant, uid, extractor), step_key(ANCHORED, tenant, uid),
                 step_key(CONSOLIDATED, tenant, uid)]
    present = applied_keys(conn, keys)
    believed = _with_beliefs(conn, [(r[1], r[2]) for r in rows])
    gaps = []
    for _, tenant, uid, session in rows:
        if step_key(EXTRACTED, tenant, uid, extractor) not in present:
            gaps.append(Gap(tenant, uid, session, EXTRACT))  # its follow-ups come after it
            continue
        if (tenant, uid) in believed and step_key(ANCHORED, tenant, uid) not in present:
            gaps.append(Gap(tenant, uid, session, ANCHOR))
        if step_key(CONSOLIDATED, tenant, uid) not in present:
            gaps.append(Gap(tenant, uid, session, CONSOLIDATE))
    return gaps


def _unshipped(state: Connection, ops: Connection, sinks: Sequence[str],
               before: str) -> Message[Any] | None:
    """A ship_changes message when a sink's cursor is behind an outbox row older than
    ``before`` (one per outbox head: the id names the head, so re-checks do not pile up)."""
    from memory_core.mirrors.outbox import cursor_of

    row = state.execute("SELECT id, tenant FROM outbox WHERE created_at <= ? ORDER BY id DESC "
                        "LIMIT 1", (before,)).fetchone()
    if row is None or all(cursor_of(ops, s) >= row[0] for s in sinks):
        return None
    msg = build_message(SHIP, tenant=row[1])
    return msg.copy(message_id=derived_message_id(SHIP, "completeness", str(row[0])))


def check_completeness(state: Connection, *, before: str, max_turns: int,
                       offer: Offer | None = None, ops: Connection | None = None,
                       mirrors: Sequence[str] = (), extractor: str | None = None,
                       keep_gaps: int = 1000) -> CompletenessReport:
    """Find (and with ``offer``, re-send) the follow-ups recorded turns are missing.

    ``before``: storage-encoded time; turns recorded later are skipped (their follow-ups may
    be in flight). ``max_turns`` bounds the turns read, newest first, ``PAGE`` at a time.
    ``ops`` and ``mirrors`` (configured sink names) add the shipping check. ``offer``
    raises what the broker raises (a Redis outage): the next check picks up what is left.
    """
    extractor = extractor or extractor_name(default_extractor())
    report = CompletenessReport()
    last_id: int | None = None
    while report.scanned < max_turns:
        limit = min(PAGE, max_turns - report.scanned)
        rows = state.execute(
            "SELECT id, tenant, turn_uid, session_id FROM turns WHERE recorded_at <= ? "
            "AND id < ? ORDER BY id DESC LIMIT ?",
            (before, last_id if last_id is not None else 2**62, limit)).fetchall()
        if not rows:
            break
        report.scanned += len(rows)
        last_id = rows[-1][0]
        for gap in _page_gaps(state, rows, extractor):
            report.missing[gap.job] += 1
            if len(report.gaps) < keep_gaps:
                report.gaps.append(gap)
            _resend(report, gap.job, gap.message(), offer)
    else:
        report.truncated = True
    if ops is not None and mirrors:
        ship = _unshipped(state, ops, mirrors, before)
        if ship is not None:
            report.missing[SHIP] += 1
            _resend(report, SHIP, ship, offer)
    return report


def _resend(report: CompletenessReport, job: str, message: Message[Any],
            offer: Offer | None) -> None:
    if offer is None:
        return
    if offer(message):
        report.requeued[job] += 1
    else:
        report.held += 1
