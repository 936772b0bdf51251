"""Helpers for the backup / restore / drill tests: a memory with real turns in two tenants
(superseded beliefs, an entity merge, audit rows), and a JobEnv over it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_core.maintenance.base import JobEnv
from memory_core.model.merges import merge_entities
from memory_core.write.pipeline import process_turns
from tests.helpers.maintenance import World, make_world
from tests.helpers.post_turn import turn
from workers.audit import AuditEntry, write_audit

NOW = datetime(2025, 6, 1, 6, tzinfo=UTC)
WINDOW = "backup@2025-06-01T06:00:00Z"
MARKER = "Zanzibarville"  # said only in tenant t2


class Mem(World):
    """A maintenance ``World`` whose job clock and window default to the backup's."""

    def env(self, now: datetime = NOW, window: str = WINDOW) -> JobEnv:
        return super().env(now, window)


def open_memory(data_dir: Path, tenants: tuple[str, ...] = ("t1", "t2"),
                **overrides: Any) -> Mem:
    w = make_world(data_dir, tenants, **overrides)
    return Mem(w.settings, w.state, w.ops, w.index, w.start)


def feed(mem: Mem, tenant: str, n: int, start: int = 0) -> None:
    """Turns ``start..start+n`` of the post-turn helper's script (facts change over time)."""
    process_turns(mem.state, mem.index, [turn(i, tenant) for i in range(start, start + n)])


def build_memory(data_dir: Path) -> Mem:
    """t1: 40 turns (superseded beliefs), an entity merge and audit rows; t2: 12 turns and
    one that says MARKER."""
    mem = open_memory(data_dir)
    feed(mem, "t1", 40)
    feed(mem, "t2", 12)
    extra = turn(100, "t2")
    extra["text"] = f"I live in {MARKER} now."
    process_turns(mem.state, mem.index, [extra])
    ids = [r[0] for r in mem.state.conn.execute(
        "SELECT entity_id FROM entities WHERE tenant = 't1' AND entity_id != 'user' "
        "ORDER BY id LIMIT 2")]
    merge_entities(mem.state.conn, mem.index, "t1", ids[1], ids[0])
    write_audit(mem.ops.conn, "m1", [AuditEntry("t1", "belief_added", "belief", "b1"),
                                     AuditEntry("t2", "belief_added", "belief", "b2"),
                                     AuditEntry("t2", "episode_added", "episode", "e2")])
    return mem
