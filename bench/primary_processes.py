"""Two worker hosts and two chat hosts on one Postgres primary, against SQLite.

Four "hosts" (each its own data dir: its own ops database), all with
``MNEMO_STATE_BACKEND=postgres`` on one fresh database and a Redis broker (a namespace of
its own): two worker pools (``processes`` each) and two chat processes, each of which sends
every other turn of a LoCoMo conversation with ``after_turn`` and then, once every turn is
recorded and the queue is empty, recalls every question. The same turns go through the
workers' write path into SQLite in this process. Printed: belief equality, overlap@10 of
the two chat processes' recall with SQLite recall, and the wall time of the pools.

    python bench/primary_processes.py --postgres postgresql://postgres@127.0.0.1:5432/test \\
        [--redis redis://127.0.0.1:6379/0] [--turns N] [--processes 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_data
import primary_parity

from memory_core.backends import BackendURL, parse_backend_url
from memory_core.db import migrate_stores, open_state
from memory_core.embedders import HashEmbedder
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings

REPO = Path(__file__).resolve().parent.parent
HASH_DIM = 64


@dataclass
class Result:
    turns: int
    questions: int
    beliefs_sqlite: int
    beliefs_postgres: int
    beliefs_equal: bool
    overlap_at_10: list[float]  # one per chat process
    workers_s: float


def host_env(root: Path, name: str, pg: BackendURL, redis: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MNEMO_", "PG"))}
    env.update({"MNEMO_DATA_DIR": str(root / name), "MNEMO_STATE_BACKEND": "postgres",
                "MNEMO_POSTGRES_URL": pg.canonical, "MNEMO_BROKER_URL": redis,
                "MNEMO_HASH_DIM": str(HASH_DIM), "MNEMO_LOG_LEVEL": "error",
                "MNEMO_TURN_JOURNAL": "false", "MNEMO_EMBED_BATCH_WINDOW_MS": "0"})
    return env


def settings_of(env: dict[str, str]) -> Settings:
    return Settings.from_env({k: v for k, v in env.items() if k.startswith("MNEMO_")})


def run(conv: locomo_data.Conversation, pg: BackendURL, redis: str, root: Path, *,
        limit: int | None = None, processes: int = 1, timeout_s: float = 900) -> Result:
    from workers.pool import WorkerPool

    turns = primary_parity.conversation_turns(conv, limit)
    known = {t.turn_uid for t in turns}
    queries = [q.text for q in conv.questions if set(q.evidence) <= known]
    namespace = f"mnemo-primary-{uuid.uuid4().hex[:8]}"
    envs = {name: host_env(root, name, pg, redis) for name in ("w1", "w2", "c1", "c2")}
    for env in envs.values():
        migrate_stores(settings_of(env))  # the primary once, each host's ops database
    state = open_state(settings_of(envs["w1"]))
    create_tenant(state.conn, conv.tenant)
    (root / "turns.json").write_text(json.dumps([t.__dict__ | {
        "occurred_at": t.occurred_at.isoformat()} for t in turns]))
    (root / "queries.json").write_text(json.dumps(queries))
    pools = [WorkerPool(settings_of(envs[w]), processes=processes, threads=2, grace_s=5,
                        broker_options={"namespace": namespace}) for w in ("w1", "w2")]
    start = time.perf_counter()
    for pool in pools:
        pool.start()
    chats = [subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "primary_chat.py"), "--namespace", namespace,
         "--part", str(k), "--parts", "2", "--dir", str(root), "--tenant", conv.tenant,
         "--timeout", str(timeout_s)], env=envs[c], cwd=REPO)
        for k, c in enumerate(("c1", "c2"))]
    try:
        codes = [c.wait(timeout=timeout_s + 60) for c in chats]
    finally:
        for c in chats:
            if c.poll() is None:
                c.kill()
        for pool in pools:
            pool.stop()
    workers_s = time.perf_counter() - start
    if codes != [0, 0]:
        raise RuntimeError(f"a chat process failed: exit codes {codes}")
    rows = state.conn.execute(
        f"SELECT {', '.join(primary_parity.BELIEF_COLUMNS)} FROM beliefs").fetchall()
    postgres = sorted((tuple(r) for r in rows), key=repr)
    state.close()
    lite = Settings.from_env({}, data_dir=root / "sqlite", hash_dim=HASH_DIM)
    embedder = HashEmbedder(dim=HASH_DIM)
    primary_parity.ingest(lite, conv.tenant, turns, embedder)
    sqlite = primary_parity.belief_rows(lite)
    reference = primary_parity.recalled(lite, embedder, conv.tenant, queries)
    overlaps = [primary_parity.overlap_at(reference, json.loads(
        (root / f"recalled_{k}.json").read_text())) for k in (0, 1)]
    return Result(len(turns), len(queries), len(sqlite), len(postgres), sqlite == postgres,
                  overlaps, workers_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--postgres", required=True)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--conversation", type=int, default=0)
    ap.add_argument("--turns", type=int, default=0)
    ap.add_argument("--processes", type=int, default=1, help="worker processes per host")
    ap.add_argument("--data", type=Path, default=primary_parity.DATA,
                    help="LoCoMo's locomo_dev.json")
    args = ap.parse_args()
    conv = locomo_data.load(args.data)[args.conversation]
    server = parse_backend_url("postgres", "--postgres", args.postgres)
    with primary_parity.fresh_database(server) as url, tempfile.TemporaryDirectory() as tmp:
        r = run(conv, url, args.redis, Path(tmp), limit=args.turns or None,
                processes=args.processes)
    print(f"conversation {conv.sample_id}: {r.turns} turns, {r.questions} questions; 2 worker "
          f"hosts x {args.processes} process(es) x 2 threads, 2 chat processes, Redis")
    print(f"beliefs: sqlite {r.beliefs_sqlite}, postgres {r.beliefs_postgres}, "
          f"equal: {r.beliefs_equal}")
    print("recall overlap@10 with sqlite, per chat process: "
          + ", ".join(f"{o:.3f}" for o in r.overlap_at_10))
    print(f"after_turn to all recorded and the queue empty: {r.workers_s:.1f} s")


def _json_default(value: Any) -> Any:
    return str(value)


if __name__ == "__main__":
    main()
