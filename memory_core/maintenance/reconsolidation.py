"""``global_reconsolidation``: the daily pass that makes memory independent of arrival order.

The work is split into P partitions (``MNEMO_RECON_PARTITIONS``) by a stable hash
(``partitions.bucket``): beliefs and entities by (tenant, subject entity id), episodes by
(tenant, UTC day), so duplicates (the same words on the same day) meet. One call runs one
partition and returns the next as a follow-up; the last returns ``done=True``. A partition
runs these phases:

1. ``entities``: merge entity duplicates (``recon_subjects.merge_duplicate``);
2. ``beliefs``: stale content keys fixed or folded into their twin, slots re-resolved, missing
   vectors embedded;
3. ``episodes``: duplicate groups merged whatever session they came from, tiers settled
   (``recon_episodes.plan_group``), missing vectors embedded;
4. ``counts``: the partition's entity counts recomputed;
5. ``reindex`` (last partition only): when the state db's vectors were built by another
   embedder, ``VectorIndex.reindex`` re-embeds every row (batched, resumable) and flips.

Every page is one short transaction that also saves the partition's progress (phase, cursor,
counts) in the state db, so a kill anywhere loses only the open page and a rerun ends exactly
where an uninterrupted run ends; each page's effect is idempotent too, so a second run of the
same window, or a new run over a reconsolidated memory, changes nothing. Embedding happens
before a page's transaction; the transaction re-reads what it changes. Memory stays bounded:
rows are streamed by id, and episodes are walked one tenant-day at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memory_core.clock import to_db
from memory_core.db.sqlite import atomic
from memory_core.errors import InvalidInputError
from memory_core.maintenance import recon_episodes as ep
from memory_core.maintenance import recon_subjects as subj
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.partitions import (
    Progress,
    is_done,
    load_progress,
    mark_done,
    save_progress,
)
from memory_core.model.write_tx import Embeds, WriteTx

JOB = "global_reconsolidation"
PHASES = ("entities", "beliefs", "episodes", "counts", "reindex", "done")
_SCAN_CAP = 20_000  # rows read per page while looking for the partition's rows


@dataclass
class _Run:
    env: JobEnv
    run_id: str
    partition: int
    partitions: int
    progress: Progress
    now: str = ""
    txs: dict[str, WriteTx] = field(default_factory=dict)
    runs: dict[str, tuple[str, str] | None] = field(default_factory=dict)  # tenant -> run

    @property
    def conn(self) -> Any:
        return self.env.state.conn

    @property
    def batch(self) -> int:
        return self.env.settings.recon_batch

    @property
    def scan_limit(self) -> int:
        return min(self.batch * self.partitions, _SCAN_CAP)

    @property
    def last(self) -> bool:
        return self.partition == self.partitions - 1

    def tx(self, tenant: str, embeds: Embeds) -> WriteTx:
        return self.txs.setdefault(tenant, WriteTx(self.conn, self.env.index, tenant,
                                                   self.now, embeds))

    def commit_page(self, cursor: Any, next_phase: str | None = None) -> None:
        """Flush the page's side rows and save progress: call last, inside the page's
        transaction."""
        for tx in self.txs.values():
            tx.flush()
        self.txs.clear()
        self.progress.cursor = cursor
        if next_phase is not None:
            self.progress.phase, self.progress.cursor = next_phase, None
        save_progress(self.conn, self.run_id, self.partition, self.progress)
        if self.progress.phase == "done":
            mark_done(self.conn, self.run_id, self.partition, self.now, self.last)


def _check(run_id: object, partition: object, partitions: object) -> None:
    if not isinstance(run_id, str) or not run_id.strip() or len(run_id) > 200:
        raise InvalidInputError("global_reconsolidation needs a run_id: the window key, "
                                "1-200 characters")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise InvalidInputError("partitions must be a whole number of at least 1 "
                                "(MNEMO_RECON_PARTITIONS)")
    if isinstance(partition, bool) or not isinstance(partition, int) \
            or not 0 <= partition < partitions:
        raise InvalidInputError(f"partition must be from 0 to {partitions - 1}: the chain "
                                "starts at 0")


def global_reconsolidation(env: JobEnv, *, run_id: str, partition: int,
                           partitions: int) -> JobReport:
    """Reconsolidate one partition of every tenant (see the module docstring); idempotent
    and resumable. Follow-up: the next partition, until the last (``done=True``)."""
    _check(run_id, partition, partitions)
    report = JobReport(JOB, done=partition == partitions - 1)
    if not report.done:
        report.follow_ups = [(JOB, {"run_id": run_id, "partition": partition + 1,
                                    "partitions": partitions})]
    conn = env.state.conn
    env.index.ensure(conn)
    if is_done(conn, run_id, partition):
        report.counts = {"partition": partition, "already_done": 1}
        return report
    run = _Run(env, run_id, partition, partitions,
               load_progress(conn, run_id, partition, PHASES[0]), now=to_db(env.now))
    while run.progress.phase != "done":
        _PHASE_BODIES[run.progress.phase](run)
    report.counts = {"partition": partition, **run.progress.counts}
    return report


def _next_phase(run: _Run) -> str:
    return PHASES[PHASES.index(run.progress.phase) + 1]


def _advance(run: _Run) -> None:
    with atomic(run.conn):
        run.commit_page(None, _next_phase(run))


# --- phases: each runs pages until its end, then advances -------------------------------

def _scan_pages(run: _Run, table: str, column: str
                ) -> Iterator[tuple[list[tuple[int, str, str]], int]]:
    """``(rows of the partition, last id read)`` of ``table`` from the saved cursor, a page
    at a time, until the end of the table (``recon_subjects.scan``)."""
    after = run.progress.cursor or 0
    while True:
        rows, last = subj.scan(run.conn, table, column, after, run.scan_limit,
                               run.partition, run.partitions)
        if last is None:
            return
        yield rows, last
        after = last


def _entities(run: _Run) -> None:
    for rows, last in _scan_pages(run, "entities", "entity_id"):
        embeds = Embeds(run.env.index)
        subj.prepare_merges(run.conn, embeds, rows)
        with atomic(run.conn):
            for _, tenant, entity_id in rows:
                if subj.merge_duplicate(run.tx(tenant, embeds), entity_id):
                    run.progress.add("entities_merged")
            run.commit_page(last)
    _advance(run)


def _beliefs(run: _Run) -> None:
    index = run.env.index
    for rows, last in _scan_pages(run, "beliefs", "subject_id"):
        ids = [r[0] for r in rows]
        embeds = Embeds(index)
        missing = set(index.without_vector(run.conn, "beliefs", ids))
        embeds.prepare(b.text for b in subj.load_beliefs(run.conn, sorted(missing)))
        with atomic(run.conn):
            for b in subj.load_beliefs(run.conn, ids):  # as they are now
                action = subj.fix_key(run.tx(b.tenant, embeds), b)
                if action:
                    run.progress.add(action)
            still = subj.load_beliefs(run.conn, index.without_vector(run.conn, "beliefs",
                                                               sorted(missing)))
            for b in still:  # (a copy folded into its twin above is gone)
                run.tx(b.tenant, embeds).vector("beliefs", b.id, b.text)
            run.progress.add("beliefs_embedded", len(still))
            run.progress.add("beliefs_checked", len(ids))
            run.commit_page(last)
    _advance(run)


def _episode_vectors(run: _Run, plans: list[ep.GroupPlan]) -> list[tuple[int, str, str]]:
    """(id, tenant, text) of survivors with no vector (their final text)."""
    by_id = {p.survivor.id: p for p in plans}
    missing = run.env.index.without_vector(run.conn, "episodes", sorted(by_id))
    return [(i, by_id[i].survivor.tenant, by_id[i].fields.text) for i in missing]


def _plans(run: _Run, days: list[tuple[str, str]]) -> list[ep.GroupPlan]:
    plans: list[ep.GroupPlan] = []
    for tenant, day in days:
        if tenant not in run.runs:
            run.runs[tenant] = ep.current_run(run.conn, tenant)
        plans.extend(ep.plan_group(group, run.runs[tenant])
                     for group in ep.load_day(run.conn, tenant, day))
    return plans


def _day_page(run: _Run, tenant: str, day: str) -> tuple[list[tuple[str, str]], bool]:
    """The partition's next days after (tenant, day), about ``batch`` episodes of them, and
    whether the walk reached the end. Days are walked through the tier/time index."""
    days: list[tuple[str, str]] = []
    size = 0
    while size < run.batch:
        found = ep.next_day(run.conn, tenant, day) if tenant else None
        if found is None:
            row = run.conn.execute("SELECT tenant FROM tenants WHERE tenant > ? ORDER BY "
                                   "tenant LIMIT 1", (tenant,)).fetchone()
            if row is None:
                return days, True
            tenant, day = row[0], ""
            continue
        day = found
        if ep.day_bucket(tenant, day, run.partitions) == run.partition:
            days.append((tenant, day))
            size += ep.day_size(run.conn, tenant, day)
    return days, False


def _episodes(run: _Run) -> None:
    tenant, day = run.progress.cursor or ("", "")
    while True:
        days, end = _day_page(run, tenant, day)
        if not days:
            return _advance(run)
        embeds = Embeds(run.env.index)
        plans = _plans(run, days)
        embeds.prepare([p.fields.text for p in plans if p.fields.text != p.survivor.fields.text]
                       + [t for _, _, t in _episode_vectors(run, plans)])
        with atomic(run.conn):
            plans = _plans(run, days)  # as they are now
            for plan in plans:
                if plan.changed:
                    ep.apply_plan(run.tx(plan.survivor.tenant, embeds), plan)
                    run.progress.add("episodes_merged", len(plan.losers))
                    run.progress.add("episodes_updated", int(not plan.losers))
            vectors = _episode_vectors(run, plans)
            for row_id, tenant_id, text in vectors:
                run.tx(tenant_id, embeds).vector("episodes", row_id, text)
            run.progress.add("episodes_embedded", len(vectors))
            run.progress.add("episode_groups", len(plans))
            tenant, day = days[-1]
            run.commit_page([tenant, day], _next_phase(run) if end else None)
        if end:
            return None


def _counts(run: _Run) -> None:
    for rows, last in _scan_pages(run, "entities", "entity_id"):
        by_tenant: dict[str, list[str]] = {}
        for _, tenant, entity_id in rows:
            by_tenant.setdefault(tenant, []).append(entity_id)
        with atomic(run.conn):
            for tenant, ids in sorted(by_tenant.items()):
                run.progress.add("counts_fixed", subj.recount(run.conn, tenant, ids))
            run.commit_page(last)
    _advance(run)


def _reindex(run: _Run) -> None:
    index = run.env.index
    if run.last and not index.state(run.conn).match:
        # Another embedder built the vectors: re-embed every row into a new generation
        # (resumable on its own cursor), then flip. Dense recall stays off until then.
        report = index.reindex(run.conn, batch_size=run.batch)
        run.progress.add("reembedded", sum(report.embedded.values()))
    _advance(run)


_PHASE_BODIES: dict[str, Callable[[_Run], None]] = {
    "entities": _entities,
    "beliefs": _beliefs,
    "episodes": _episodes,
    "counts": _counts,
    "reindex": _reindex,
}
