"""The maintenance jobs on the Postgres primary do what they do on SQLite: the same turns in
both, every job body run at the same time, the same counts (the backup's exports too; the
restore drill passes on both)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from memory_core.clock import utcnow
from memory_core.db import migrate_stores, open_ops, open_state
from memory_core.db.pg_store import PgDatabase
from memory_core.embedders import HashEmbedder
from memory_core.maintenance.base import JobEnv
from memory_core.maintenance.bodies import BODIES
from memory_core.model.tenants import create_tenant
from memory_core.model.turns import TurnInput
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write.pipeline import process_turns
from tests.helpers.memory import belief_table, day
from tests.helpers.primary import reset

TEXTS = ["I live in Berlin", "I plan to fly to Lisbon on Friday", "I moved to Paris",
         "My friend Bob works at Acme", "Bob likes chess", "I will call Anna tomorrow"]
RECON = {"run_id": "r1", "partition": 0, "partitions": 1}


def _run_all(settings: Settings) -> tuple[dict[str, dict], list]:
    migrate_stores(settings)
    state, ops = open_state(settings), open_ops(settings)
    try:
        for tenant in ("t1", "default"):
            create_tenant(state.conn, tenant)
        index = VectorIndex(HashEmbedder(dim=32))
        index.ensure(state.conn)
        process_turns(state, index, [TurnInput("t1", "s1", f"u{i}", "user", t, day(i))
                                     for i, t in enumerate(TEXTS)])
        now = utcnow() + timedelta(days=400)
        out = {}
        for name, body in BODIES.items():
            env = JobEnv(settings, state, ops, index, now, f"manual:{name}")
            report = body(env, **(RECON if name == "global_reconsolidation" else {}))
            out[name] = report.counts
        return out, belief_table(state.conn)
    finally:
        state.close()
        ops.close()


def test_job_bodies_count_the_same_on_both_engines(tmp_path: Path, primary_urls) -> None:
    url = primary_urls[0]
    db = PgDatabase(url, None)
    db.migrate()
    reset(db)
    db.close()
    lite, lite_beliefs = _run_all(Settings.from_env({}, data_dir=tmp_path / "a", hash_dim=32))
    prim, prim_beliefs = _run_all(Settings.from_env(
        {}, data_dir=tmp_path / "b", hash_dim=32, state_backend="postgres",
        postgres_url=url.canonical))
    # the backup's size, its name and the Postgres dump's status differ by engine
    same = ("tenants", "beliefs", "episodes", "entity_merges", "audit_log", "existing")
    assert {k: prim["backup"][k] for k in same} == {k: lite["backup"][k] for k in same}
    assert prim["restore_drill"]["ok"] and lite["restore_drill"]["ok"]
    for name in BODIES:
        if name in ("backup", "restore_drill"):
            continue
        # FTS5's segment merge is SQLite's own upkeep: the primary's postings have none
        mine = {k: v for k, v in prim[name].items() if "duration" not in k}
        theirs = {k: v for k, v in lite[name].items()
                  if "duration" not in k and not k.startswith("fts_merge_steps_")}
        assert mine == theirs, name
    assert prim_beliefs == lite_beliefs
