"""Re-running the extractor over a tenant's recorded turns (``mnemo beliefs reextract``).

Beliefs are drawn once, when a turn is recorded. When the extractor's rules change (a fix
that stops reading an assistant's words as the user's, a name it no longer mistakes), a
store keeps what the older rules drew, and turns that the new rules read better stay
unread. ``reextract`` brings a tenant's extracted beliefs to what the current extractor
draws from the same turns, as a fresh store would hold them. It plans, then applies:

- **plan** (read only): every turn goes through the extractor again. A stored belief of
  the extractor's source (``heuristic``) drawn from a turn whose extraction ran (its
  ``extract`` key is written) is *stale* when no current candidate of any turn is that
  belief (its content key: subject, predicate, object, valid-from, source). A turn whose
  extraction has not run yet counts among "any turn" (the worker drawing it later would
  find the belief invalidated and not revive it), but what it draws is left to the
  workers. A negation that a replacing statement wrote ("I like mild food now" ending
  "likes spicy food") stands while its statement does. A candidate of an extracted turn
  none of whose content keys is stored, under any status, is *new*; one the write rules
  would refuse (a subject that is no name) is *rejected* and never written.
- **apply**: stale beliefs are invalidated first (never true: history keeps them, a value
  one had closed is current again, mirrors get the change), then the new ones are written
  in world-time order by the write rules of the post-turn step (slots, superseding, the
  ego anchor), one short transaction per turn.

Idempotent and resumable: a second run plans nothing; a run killed part-way is finished
by the next. Nothing else is touched: beliefs the user or an operator stated, imported
ones, anchors, an invalidated belief (the extractor drawing it again does not revive it),
other tenants. What it logs: counts, never memory text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from memory_core.clock import to_db, utcnow
from memory_core.db.meta import get_meta, meta_by_prefix, set_meta, set_meta_once
from memory_core.db.sqlite import Connection, atomic
from memory_core.db.stores import Database
from memory_core.extraction.api import (
    DEFAULT_SOURCE,
    Extractor,
    candidates_for,
    default_extractor,
    extractor_name,
)
from memory_core.extraction.version import HEARTBEAT_RULES, RULES_VERSION
from memory_core.heartbeats import WORKER, Heartbeat
from memory_core.model import episodes
from memory_core.model.belief_rules import content_key, normalize_object, topic_family
from memory_core.model.beliefs import (
    Checked,
    apply_in_tx,
    invalidate_in_tx,
    predicted_texts,
    subject_label,
)
from memory_core.model.entities import HUB, SELF_LABELS, entity_name, lookup, mint_id
from memory_core.model.hygiene import check_subject, normalize_label
from memory_core.model.slots import load_rows
from memory_core.model.tenants import require_tenant
from memory_core.model.turns import TurnRow, get_turn, turns_page
from memory_core.model.write_tx import Embeds, write_tx
from memory_core.progress import OnProgress, no_progress
from memory_core.vectors import VectorIndex
from memory_core.vocabulary import INVALIDATED
from memory_core.write.pipeline import EXTRACTED, applied_keys, checked_turn, step_key

log = structlog.get_logger("mnemo.write")

PAGE = 500  # turns read per statement
# meta keys: when this store first ran a version of the rules (``<prefix><version>``: the
# time), and the version a tenant's beliefs were last re-extracted with (``<prefix><tenant>``)
RULES_SINCE = "extractor_rules:"
REEXTRACTED = "reextracted:"
REEXTRACTED_AT = "reextracted_at:"  # <prefix><tenant>: when that run read the turns


@dataclass(frozen=True)
class Change:
    """One belief reextract adds or invalidates (what the operator's listing shows)."""

    turn_uid: str
    subject: str
    predicate: str
    object_text: str
    negated: bool
    belief_uid: str | None  # None for a belief not written yet

    def to_dict(self) -> dict[str, object]:
        return {"turn_uid": self.turn_uid, "subject": self.subject,
                "predicate": self.predicate, "object": self.object_text,
                "negated": self.negated,
                "belief": None if self.belief_uid is None else f"belief:{self.belief_uid}"}


@dataclass
class ReextractReport:
    tenant: str
    dry_run: bool
    extractor: str
    turns: int = 0  # turns read
    not_extracted: int = 0  # turns whose extraction has not run yet: left to the workers
    added: list[Change] = field(default_factory=list)
    invalidated: list[Change] = field(default_factory=list)
    rejected: int = 0  # candidates the write rules refuse (never written)
    current_again: int = 0  # beliefs current again because a stale one was invalidated

    def summary(self) -> dict[str, object]:
        return {"tenant": self.tenant, "dry_run": self.dry_run, "extractor": self.extractor,
                "turns": self.turns, "not_extracted": self.not_extracted,
                "added": len(self.added), "invalidated": len(self.invalidated),
                "rejected": self.rejected, "current_again": self.current_again}


@dataclass(frozen=True)
class _Stored:
    id: int
    uid: str
    subject_id: str
    predicate: str
    object_text: str
    negated: bool
    valid_from: str
    source: str
    turn_uid: str


@dataclass
class _Plan:
    """What the extractor draws now: the content keys, the replacing statements' topics,
    and the candidates per turn that are not stored."""

    produced: set[str] = field(default_factory=set)
    replacing: set[tuple[str, str, str, frozenset[str]]] = field(default_factory=set)
    new: list[tuple[TurnRow, list[Checked]]] = field(default_factory=list)
    turns: set[str] = field(default_factory=set)  # the turns read


def _subject_ids(conn: Connection, tenant: str, label: str) -> list[str]:
    """The entities a candidate's subject can be stored under: the one its label names now,
    and the one the label would have minted (an alias re-pointed since, e.g. by a rename)."""
    norm = normalize_label(label)
    if norm in SELF_LABELS:
        return [HUB]
    found = lookup(conn, tenant, label)
    minted = mint_id(tenant, norm)
    return [found, minted] if found is not None and found != minted else [minted]


def _keys(tenant: str, subject_ids: Iterable[str], c: Checked) -> list[str]:
    norm = normalize_object(c.object_text)
    return [content_key(tenant, s, c.predicate, norm, c.valid_from, c.source, c.negated)
            for s in subject_ids]


def _existing(conn: Connection, tenant: str, uids: list[str]) -> set[str]:
    if not uids:
        return set()
    rows = conn.execute(f"SELECT belief_uid FROM beliefs WHERE tenant = ? AND belief_uid IN "
                        f"({','.join('?' * len(uids))})", (tenant, *uids)).fetchall()
    return {r[0] for r in rows}


def _extracted(conn: Connection, tenant: str, page: list[TurnRow], name: str) -> set[str]:
    """The turns of ``page`` whose extraction ran (their ``extract`` key is written)."""
    keys = {step_key(EXTRACTED, tenant, t.turn_uid, name): t.turn_uid for t in page}
    return {keys[k] for k in applied_keys(conn, list(keys))}


def _plan(conn: Connection, tenant: str, run: Extractor, name: str,
          report: ReextractReport, on_progress: OnProgress) -> _Plan:
    plan = _Plan()
    total = conn.execute("SELECT count(*) FROM turns WHERE tenant = ?", (tenant,)).fetchone()[0]
    last: TurnRow | None = None
    while page := turns_page(conn, tenant, last, PAGE):
        last = page[-1]
        done = _extracted(conn, tenant, page, name)
        for t in page:
            report.turns += 1
            pending = t.turn_uid not in done
            if pending:
                report.not_extracted += 1
            else:
                plan.turns.add(t.turn_uid)
            _plan_turn(conn, tenant, run, t, plan, report, pending=pending)
        on_progress("turns", report.turns, total)
    return plan


def _plan_turn(conn: Connection, tenant: str, run: Extractor, t: TurnRow, plan: _Plan,
               report: ReextractReport, *, pending: bool) -> None:
    """What ``t`` draws now. A ``pending`` turn (its extraction not run yet) is read only
    for what it will draw: a stored belief it draws is not stale (invalidated, the worker
    drawing it later would not revive it), and what it draws is the worker's to write."""
    checked, _ = candidates_for(run, checked_turn(t))
    drawn: list[tuple[Checked, list[str]]] = []
    for c in checked:
        label = subject_label(c, t.speaker)
        if normalize_label(label) not in SELF_LABELS and check_subject(label) is not None:
            report.rejected += not pending  # the write rules refuse it: never stored
            continue
        ids = _subject_ids(conn, tenant, label)
        keys = _keys(tenant, ids, c)
        plan.produced.update(keys)
        family = topic_family(c.predicate)
        if c.replaces and family is not None:
            plan.replacing.update((s, c.valid_from, c.source, family) for s in ids)
        drawn.append((c, keys))
    if pending:
        return
    stored = _existing(conn, tenant, [k for _, keys in drawn for k in keys])
    fresh = [c for c, keys in drawn if stored.isdisjoint(keys)]
    if fresh:
        plan.new.append((t, fresh))


def _stale(conn: Connection, tenant: str, source: str, plan: _Plan) -> list[_Stored]:
    """Stored beliefs of ``source`` drawn from a turn read that nothing drawn now produces."""
    rows = conn.execute(
        "SELECT id, belief_uid, subject_id, predicate, object_text, negated, valid_from, "
        "source, turn_uid FROM beliefs WHERE tenant = ? AND source = ? AND status != ? AND "
        "turn_uid IS NOT NULL ORDER BY id", (tenant, source, INVALIDATED)).fetchall()
    stale = []
    for r in rows:
        b = _Stored(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], r[7], r[8])
        if b.turn_uid not in plan.turns or b.uid in plan.produced:
            continue
        family = topic_family(b.predicate)
        if b.negated and family is not None and \
                (b.subject_id, b.valid_from, b.source, family) in plan.replacing:
            continue  # the negation a replacing statement still drawn wrote
        stale.append(b)
    return stale


def _change(conn: Connection, tenant: str, b: _Stored) -> Change:
    return Change(b.turn_uid, entity_name(conn, tenant, b.subject_id), b.predicate,
                  b.object_text, b.negated, b.uid)


def _invalidate(state_db: Database, index: VectorIndex, tenant: str, stale: list[_Stored],
                report: ReextractReport, on_progress: OnProgress) -> None:
    by_turn: dict[str, list[_Stored]] = defaultdict(list)
    for b in stale:
        by_turn[b.turn_uid].append(b)
    done = 0
    for beliefs in by_turn.values():
        with write_tx(state_db.conn, index, tenant) as tx:
            for b in beliefs:
                row = load_rows(tx.conn, tenant, "id = ?", (b.id,))
                if not row or row[0].status == INVALIDATED:
                    continue  # gone or invalidated since the plan read it
                report.current_again += len(invalidate_in_tx(tx, row[0]))
                report.invalidated.append(_change(tx.conn, tenant, b))
        done += len(beliefs)
        on_progress("invalidate", done, len(stale))


def _add(state_db: Database, index: VectorIndex, tenant: str, plan: _Plan,
         report: ReextractReport, on_progress: OnProgress) -> None:
    conn = state_db.conn
    todo = sorted(plan.new, key=lambda item: (item[0].occurred_at, item[0].session_id,
                                              item[0].index, item[0].id))
    for n, (t, fresh) in enumerate(todo, 1):
        embeds = Embeds(index)
        embeds.prepare(predicted_texts(conn, tenant, [(c, t.speaker) for c in fresh]))
        with write_tx(conn, index, tenant, embeds) as tx:
            if get_turn(tx.conn, tenant, t.turn_uid) is None:
                continue  # forgotten since the plan read it: nothing is drawn from it
            inserted = False
            for c in fresh:
                outcome = apply_in_tx(tx, c, t.speaker)
                if outcome.action == "inserted":
                    inserted = True
                    report.added.append(Change(
                        t.turn_uid, entity_name(tx.conn, tenant, outcome.subject_id or HUB),
                        c.predicate, c.object_text, c.negated, outcome.belief_uid))
                elif outcome.action == "rejected":
                    report.rejected += 1
            if inserted:
                episodes.note_beliefs(tx, t.id, t.text)
        on_progress("add", n, len(todo))


def reextract(state_db: Database, index: VectorIndex, tenant: str, *, dry_run: bool = False,
              extractor: Extractor | None = None,
              on_progress: OnProgress = no_progress) -> ReextractReport:
    """Bring ``tenant``'s extracted beliefs to what ``extractor`` (default: the heuristic
    extractor) draws from its recorded turns; with ``dry_run``, only say what would change
    (``added`` then lists beliefs not written yet, with no id). Raises UnknownTenantError."""
    conn = state_db.conn
    require_tenant(conn, tenant)
    run = extractor or default_extractor()
    name = extractor_name(run)
    report = ReextractReport(tenant, dry_run, name)
    began = to_db(utcnow())  # turns extracted after the plan read them are not covered
    plan = _plan(conn, tenant, run, name, report, on_progress)
    stale = _stale(conn, tenant, DEFAULT_SOURCE, plan)
    if dry_run:
        report.invalidated = [_change(conn, tenant, b) for b in stale]
        report.added = [Change(t.turn_uid, subject_label(c, t.speaker), c.predicate,
                               c.object_text, c.negated, None)
                        for t, fresh in plan.new for c in fresh]
    else:
        _invalidate(state_db, index, tenant, stale, report, on_progress)
        _add(state_db, index, tenant, plan, report, on_progress)
        if extractor is None:  # the tenant's beliefs are this release's rules' now
            with atomic(conn):
                set_meta(conn, REEXTRACTED + tenant, RULES_VERSION)
                set_meta(conn, REEXTRACTED_AT + tenant, began)
    log.info("beliefs_reextracted", **report.summary())
    return report


def note_rules(conn: Connection) -> None:
    """Record when this store first ran the current rules (a worker calls it as it starts):
    turns recorded before then were extracted by older rules. Idempotent."""
    with atomic(conn):
        set_meta_once(conn, RULES_SINCE + RULES_VERSION, to_db(utcnow()))


@dataclass(frozen=True)
class OlderWorker:
    """A worker whose heartbeat says it runs other extractor rules (``rules`` None: a
    release older than the heartbeat's naming them)."""

    process_id: str
    rules: str | None
    last_seen: str
    running: bool  # not marked stopped (it may still be extracting)


@dataclass(frozen=True)
class RulesDrift:
    """Which tenants hold beliefs drawn by rules older than the current ones."""

    version: str  # the current rules
    since: str | None  # when a worker of this store first ran them (None: none has yet)
    behind: dict[str, int]  # tenant -> turns recorded before ``until``, not re-extracted
    older_workers: tuple[OlderWorker, ...] = ()
    until: str | None = None  # turns recorded before this may hold older rules' beliefs

    @property
    def upgrading(self) -> bool:
        """Workers of older rules still run: re-extract once they are replaced."""
        return any(w.running for w in self.older_workers)

    def to_dict(self) -> dict[str, object]:
        return {"rules_version": self.version, "since": self.since, "until": self.until,
                "tenants_behind": len(self.behind), "turns_behind": sum(self.behind.values()),
                "behind": [{"tenant": t, "turns": n} for t, n in sorted(self.behind.items())],
                "older_workers": [w.__dict__ for w in self.older_workers],
                "upgrading": self.upgrading}


def older_workers(beats: Iterable[Heartbeat]) -> tuple[OlderWorker, ...]:
    """The workers among ``beats`` that run other rules than this release's."""
    return tuple(OlderWorker(b.process_id, b.detail.get(HEARTBEAT_RULES), to_db(b.last_seen_at),
                             b.stopped_at is None)
                 for b in beats if b.role == WORKER
                 and b.detail.get(HEARTBEAT_RULES) != RULES_VERSION)


def rules_drift(conn: Connection, beats: Iterable[Heartbeat] = ()) -> RulesDrift:
    """The tenants whose turns older rules may have extracted, and that ``reextract`` has
    not brought to the current ones since (read only; one scan of the turns).

    Older rules ran until this store first ran the current ones, or, during a rolling
    upgrade, until the last beat of a worker of an older release among ``beats`` (the ops
    db's heartbeats, kept ``MNEMO_HEARTBEAT_KEEP_S``): turns recorded before then count. A
    tenant re-extracted before then counts again."""
    since = get_meta(conn, RULES_SINCE + RULES_VERSION)
    if since is None:
        return RulesDrift(RULES_VERSION, None, {})
    older = older_workers(beats)
    until = max([since, *(w.last_seen for w in older)])
    done_at = meta_by_prefix(conn, REEXTRACTED_AT)
    done = {t for t, version in meta_by_prefix(conn, REEXTRACTED).items()
            if version == RULES_VERSION and (until == since or done_at.get(t, "") >= until)}
    behind = {t: n for t, n in conn.execute(
        "SELECT tenant, count(*) FROM turns WHERE recorded_at < ? GROUP BY tenant", (until,))
        if t not in done}
    return RulesDrift(RULES_VERSION, since, behind, older, until)


__all__ = ["Change", "OlderWorker", "ReextractReport", "RulesDrift", "note_rules", "older_workers",
           "reextract", "rules_drift"]
