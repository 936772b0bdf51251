"""Reconcile: compare each mirror with the source of truth, tenant by tenant, and repair.

Three kinds of drift, by belief uid:
- **dead**: the mirror holds a fact as current that the state db has not (invalidated,
  superseded, ended, expired, deleted) — a missed tombstone;
- **missing**: a fact the mirror should hold and does not (a lost row or edge);
- **stale**: the mirror holds the fact but not its current version (a field differs).

A sink takes part through ``MirrorReader``: besides the ``MirrorSink`` methods, it reads back
what it holds for one tenant. ``live_only`` sinks (Neo4j: a graph of current edges) should
hold exactly the live beliefs (``is_live``); the others (Postgres: bi-temporal history) every
belief row. A repair is an ordinary ``apply`` of the current records of the drifted uids
(tombstones for the gone ones), so it is idempotent like shipping. Nothing crosses tenants:
each tenant is read and repaired on its own.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import Connection, atomic
from memory_core.mirrors.records import read_records
from memory_core.mirrors.sink import FIELDS, Record, is_live, order_records
from memory_core.progress import Counter, OnProgress, no_progress

PAGE = 500  # beliefs read, and records applied, at once
FACT_FIELDS = FIELDS["belief"]


class MirrorReader(Protocol):
    """A sink reconcile can read back (``Neo4jSink``; a Postgres reader plugs in alike)."""

    name: str
    live_only: bool

    def open(self) -> None: ...

    def apply(self, records: Sequence[Record]) -> None: ...

    def held_beliefs(self, tenant: str) -> Iterable[list[Mapping[str, Any]]]:
        """Every belief the mirror holds for ``tenant``, as rows of ``FACT_FIELDS`` in the
        record representation (times as ``memory_core.clock.to_db`` text), a page at a time.
        Reads only that tenant."""
        ...

    def held_tenants(self) -> set[str]:
        """The tenants the mirror holds anything for."""
        ...


def fact_version(row: Mapping[str, Any]) -> str:
    """A digest of a belief's mirrored fields: equal digests, same fact (no text moves)."""
    values = []
    for f in FACT_FIELDS:
        v = row.get(f)
        if f == "negated":
            v = int(bool(v))
        elif f == "confidence" and v is not None:
            v = round(float(v), 6)
        values.append(v)
    raw = json.dumps(values, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


@dataclass
class TenantDrift:
    tenant: str
    expected: int = 0  # facts the mirror should hold
    held: int = 0  # facts it holds
    dead: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    left: int | None = None  # drift a second look found after the repair (None: no repair)

    @property
    def drift(self) -> int:
        return len(self.dead) + len(self.missing) + len(self.stale)

    def counts(self) -> dict[str, int]:
        return {"expected": self.expected, "held": self.held, "dead": len(self.dead),
                "missing": len(self.missing), "stale": len(self.stale)}


@dataclass
class DriftReport:
    sink: str
    dry_run: bool
    tenants: list[TenantDrift] = field(default_factory=list)
    repaired: int = 0
    duration_ms: int = 0

    @property
    def drift(self) -> int:
        return sum(t.drift for t in self.tenants)

    @property
    def left(self) -> int:
        """Drift still there at the end: all of it on a dry run, else what the repair's
        second look found."""
        return sum(t.drift if t.left is None else t.left for t in self.tenants)

    def totals(self) -> dict[str, int]:
        keys = ("expected", "held", "dead", "missing", "stale")
        return {k: sum(t.counts()[k] for t in self.tenants) for k in keys}

    def as_dict(self) -> dict[str, Any]:
        """Counts and uids (ids only, never text) for --json."""
        return {"sink": self.sink, "dry_run": self.dry_run, "drift": self.drift,
                "repaired": self.repaired, "left": self.left, "duration_ms": self.duration_ms,
                "totals": self.totals(),
                "tenants": {t.tenant: {**t.counts(), "dead_uids": t.dead[:100],
                                       "missing_uids": t.missing[:100],
                                       "stale_uids": t.stale[:100]}
                            for t in self.tenants}}


def _source_pages(state: Connection, tenant: str) -> Iterator[list[Record]]:
    after = ""
    while uids := [r[0] for r in state.execute(
            "SELECT belief_uid FROM beliefs WHERE tenant = ? AND belief_uid > ? "
            "ORDER BY belief_uid LIMIT ?", (tenant, after, PAGE))]:
        yield read_records(state, ((tenant, "belief", u) for u in uids))
        after = uids[-1]


def compare_tenant(state: Connection, reader: MirrorReader, tenant: str,
                   compared: Callable[[int], object] | None = None) -> TenantDrift:
    """What ``reader`` holds for ``tenant`` against the state db (reads only);
    ``compared(n)`` after each page of ``n`` of its beliefs."""
    held: dict[str, tuple[str, bool]] = {}
    for page in reader.held_beliefs(tenant):
        for row in page:
            held[str(row["belief_uid"])] = (fact_version(row), is_live(row))
    out = TenantDrift(tenant, held=len(held))
    for records in _source_pages(state, tenant):
        if compared is not None:
            compared(len(records))
        for r in records:
            if r.row is None:
                continue
            live = is_live(r.row)
            if reader.live_only and not live:
                continue
            out.expected += 1
            mine = held.pop(r.key, None)
            if mine is None:
                out.missing.append(r.key)
            elif mine[0] != fact_version(r.row):
                (out.dead if mine[1] and not live else out.stale).append(r.key)
    out.dead.extend(held)  # held, but the state db has no such fact (or not as current)
    out.dead.sort()
    return out


def _repair(state: Connection, reader: MirrorReader, d: TenantDrift) -> int:
    uids = sorted({*d.dead, *d.missing, *d.stale})
    for start in range(0, len(uids), PAGE):
        chunk = uids[start:start + PAGE]
        reader.apply(order_records(read_records(state, ((d.tenant, "belief", u)
                                                       for u in chunk))))
    return len(uids)


def reconcile(state: Connection, reader: MirrorReader, tenants: Sequence[str] | None = None, *,
              dry_run: bool = True, on_progress: OnProgress = no_progress) -> DriftReport:
    """Compare (and unless ``dry_run``, repair) ``tenants`` — by default every tenant of the
    state db or the mirror. Raises the sink's MirrorUnavailable / MirrorError.
    ``on_progress("beliefs", compared, beliefs of the tenants)`` after each page."""
    began = time.monotonic()
    report = DriftReport(reader.name, dry_run)
    if tenants is None:
        known = {r[0] for r in state.execute("SELECT tenant FROM tenants")}
        tenants = sorted(known | reader.held_tenants())
    if not dry_run:
        reader.open()
    compared = Counter(on_progress, "beliefs", _belief_count(state, tenants))
    for tenant in tenants:
        d = compare_tenant(state, reader, tenant, compared)
        report.tenants.append(d)
        if d.drift and not dry_run:
            report.repaired += _repair(state, reader, d)
            d.left = compare_tenant(state, reader, tenant).drift
    report.duration_ms = int((time.monotonic() - began) * 1000)
    return report


def _belief_count(state: Connection, tenants: Sequence[str]) -> int:
    return sum(int(state.execute("SELECT count(*) FROM beliefs WHERE tenant = ?",
                                 (t,)).fetchone()[0]) for t in tenants)


def record_drift(ops: Connection, report: DriftReport) -> None:
    """Keep the drift a check left on the sink's cursor row (``mnemo health`` reads it):
    a dry run's findings, or what is left after a repair."""
    left = {t.tenant: t.counts() for t in report.tenants
            if (t.drift if t.left is None else t.left)}
    now = to_db(utcnow())
    with atomic(ops) as conn:
        conn.execute(
            "INSERT INTO mirror_cursors (sink, last_outbox_id, updated_at, drift, "
            "drift_checked_at) VALUES (?, 0, ?, ?, ?) ON CONFLICT (sink) DO UPDATE SET "
            "drift = excluded.drift, drift_checked_at = excluded.drift_checked_at",
            (report.sink, now, json.dumps(left, sort_keys=True), now))


def last_drift(ops: Connection, sink: str) -> tuple[str, dict[str, dict[str, int]]] | None:
    """(checked_at, {tenant: counts}) of the last check of ``sink``, None if never checked."""
    row = ops.execute("SELECT drift_checked_at, drift FROM mirror_cursors WHERE sink = ?",
                      (sink,)).fetchone()
    if row is None or row[0] is None:
        return None
    return row[0], json.loads(row[1] or "{}")
