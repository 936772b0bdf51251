"""Helpers for the maintenance-job tests: both databases on tmp files, a JobEnv per clock,
turns through the real write path, real recalls into the recall log, table snapshots."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.clock import utcnow
from memory_core.db import open_ops, open_state
from memory_core.db.stores import Database
from memory_core.embedders import HashEmbedder
from memory_core.maintenance.base import JobEnv
from memory_core.model.beliefs import BeliefInput, mutate_belief
from memory_core.model.tenants import create_tenant
from memory_core.recall import engine
from memory_core.recall.explain import write_recall_log
from memory_core.recall.fusion import Budget
from memory_core.recall.strategy import get_strategy
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write.pipeline import process_turn

# Tables a maintenance job may change (the vector tables follow their base rows).
SNAPSHOT_TABLES = ("turns", "episodes", "episode_turns", "entities", "entity_aliases",
                   "beliefs", "tombstones", "outbox", "applied_jobs", "hygiene_rejections")
OPS_TABLES = ("recall_log", "digests")


@dataclass
class World:
    settings: Settings
    state: Database
    ops: Database
    index: VectorIndex
    start: datetime  # about when the rows were written (the write path's own clock)

    @property
    def conn(self) -> Any:
        return self.state.conn

    def env(self, now: datetime, window: str = "test@window") -> JobEnv:
        return JobEnv(self.settings, self.state, self.ops, self.index, now, window)

    def after(self, **delta: float) -> JobEnv:
        """A JobEnv whose clock is ``delta`` after ``start``."""
        return self.env(self.start + timedelta(**delta))

    def turn(self, tenant: str, uid: str, text: str, *, session: str = "s1",
             occurred: datetime | None = None) -> int:
        """One turn through the write path (extraction included); returns its episode id."""
        when = occurred or self.start
        process_turn(self.state, self.index, {
            "tenant": tenant, "session_id": session, "turn_uid": uid, "speaker": "user",
            "text": text, "occurred_at": when.isoformat()})
        return int(self.conn.execute(
            "SELECT et.episode_id FROM episode_turns et JOIN turns t ON t.id = et.turn_id "
            "WHERE t.tenant = ? AND t.turn_uid = ?", (tenant, uid)).fetchone()[0])

    def belief(self, tenant: str, subject: str, predicate: str, obj: str,
               valid_from: datetime, **kw: Any) -> int:
        out = mutate_belief(self.conn, self.index, tenant,
                            BeliefInput(subject, predicate, obj, valid_from, **kw))
        assert out.belief_id is not None, out
        return out.belief_id

    def recall(self, tenant: str, query: str, *, now: datetime | None = None,
               as_of: datetime | None = None, items: int = 10) -> list[str]:
        """A real recall whose explanation goes to the recall log; returns the ids of its
        facts and items."""
        result, explanation = engine.recall(
            self.conn, self.index, query=query, tenant=tenant, strategy=get_strategy(None),
            max_query_chars=4096, budget=Budget(items, 4000), as_of=as_of,
            now=now or self.start)
        write_recall_log(self.ops.conn, tenant, result.query_digest, result.strategy,
                         explanation, keep=500)
        return [f.fact_id for f in result.facts] + [item.item_id for item in result.items]

    def close(self) -> None:
        self.state.close()
        self.ops.close()


def make_world(data_dir: Path, tenants: tuple[str, ...] = ("t1", "t2"),
               **overrides: Any) -> World:
    settings = Settings.from_env({}, data_dir=data_dir, hash_dim=32, **overrides)
    state, ops = open_state(settings), open_ops(settings)
    for tenant in tenants:
        create_tenant(state.conn, tenant)
    index = VectorIndex(HashEmbedder(dim=32))
    index.ensure(state.conn)
    return World(settings, state, ops, index, utcnow())


def snapshot(world: World) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables a job may change, in both databases."""
    out = {}
    for table in SNAPSHOT_TABLES:
        out[table] = sorted(world.conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
    for table in OPS_TABLES:
        out["ops." + table] = sorted(world.ops.conn.execute(f"SELECT * FROM {table}")
                                     .fetchall(), key=repr)
    out["vectors"] = [tuple(sorted(world.index.counts(world.conn).items()))]
    return out


def episode(world: World, episode_id: int) -> dict[str, Any]:
    row = world.conn.execute(
        "SELECT tier, importance, access_count, last_access_at, decayed_at FROM episodes "
        "WHERE id = ?", (episode_id,)).fetchone()
    assert row is not None, f"episode {episode_id} is gone"
    return dict(zip(("tier", "importance", "access_count", "last_access_at", "decayed_at"),
                    row, strict=True))
