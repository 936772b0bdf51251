"""Backfill: ship every existing entity and belief of a tenant to a mirror (``mnemo mirror
sync``), for a mirror configured after the memory grew, or one that was wiped.

The records are the current state (dead beliefs too, so a mirror drops what it should not
hold), a page per ``apply``, so a crash leaves a mirror that the next sync, or shipping, or
reconcile completes. A sync of every tenant then moves the sink's cursor up to the outbox
head read *before* it started: every change up to there is in what it shipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.db.sqlite import Connection
from memory_core.mirrors.outbox import cursor_of, move_cursor
from memory_core.mirrors.records import read_records
from memory_core.mirrors.sink import KEY_FIELD, MirrorSink, order_records
from memory_core.progress import Counter, OnProgress, no_progress

PAGE = 500
_TABLES = {"entity": "entities", "belief": "beliefs"}


@dataclass
class SyncReport:
    sink: str
    per_tenant: dict[str, dict[str, int]] = field(default_factory=dict)
    cursor: int | None = None  # where the cursor stands after a full sync (None: not moved)
    duration_ms: int = 0

    def as_dict(self) -> dict[str, Any]:
        totals: dict[str, int] = {}
        for counts in self.per_tenant.values():
            for k, v in counts.items():
                totals[k] = totals.get(k, 0) + v
        return {"sink": self.sink, "tenants": self.per_tenant, "totals": totals,
                "cursor": self.cursor, "duration_ms": self.duration_ms}


def _keys(state: Connection, tenant: str, kind: str) -> Iterator[list[str]]:
    table, key = _TABLES[kind], KEY_FIELD[kind]
    after = ""
    while keys := [r[0] for r in state.execute(
            f"SELECT {key} FROM {table} WHERE tenant = ? AND {key} > ? ORDER BY {key} "
            "LIMIT ?", (tenant, after, PAGE))]:
        yield keys
        after = keys[-1]


def _count(state: Connection, sink: MirrorSink, tenants: Sequence[str]) -> int:
    """The entities and beliefs of ``tenants`` that a sync ships to ``sink``."""
    return sum(int(state.execute(f"SELECT count(*) FROM {_TABLES[kind]} WHERE tenant = ?",
                                 (tenant,)).fetchone()[0])
               for kind in _TABLES if kind in sink.kinds for tenant in tenants)


def sync_tenant(state: Connection, sink: MirrorSink, tenant: str,
                shipped: Callable[[int], object] | None = None) -> dict[str, int]:
    """Ship every entity and belief of ``tenant``; ``shipped(n)`` after each page of n."""
    counts = {"entities": 0, "beliefs": 0}
    for kind, label in (("entity", "entities"), ("belief", "beliefs")):
        if kind not in sink.kinds:
            continue
        for keys in _keys(state, tenant, kind):
            sink.apply(order_records(read_records(state, ((tenant, kind, k) for k in keys))))
            counts[label] += len(keys)
            if shipped is not None:
                shipped(len(keys))
    return counts


def sync(state: Connection, ops: Connection, sink: MirrorSink,
         tenants: Sequence[str] | None = None,
         on_progress: OnProgress = no_progress) -> SyncReport:
    """Backfill ``tenants`` (default: all; then the cursor moves to the head read first).
    ``on_progress("records", shipped, to ship)`` after each page."""
    began = time.monotonic()
    head = int(state.execute("SELECT coalesce(max(id), 0) FROM outbox").fetchone()[0])
    everyone = tenants is None
    names = ([r[0] for r in state.execute("SELECT tenant FROM tenants ORDER BY tenant")]
             if tenants is None else list(tenants))
    sink.open()
    report = SyncReport(sink.name)
    shipped = Counter(on_progress, "records", _count(state, sink, names))
    for tenant in names:
        report.per_tenant[tenant] = sync_tenant(state, sink, tenant, shipped)
    if everyone:
        move_cursor(ops, sink.name, head)
        report.cursor = cursor_of(ops, sink.name)
    report.duration_ms = int((time.monotonic() - began) * 1000)
    return report
