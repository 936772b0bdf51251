"""End-to-end throughput of the post-turn pipeline through the queue (a script, not a test).

Example:
    .venv/bin/python bench/pipeline.py
    .venv/bin/python bench/pipeline.py --turns 10000 --processes 2 --threads 2 --brokers embedded

For each broker: a fresh data directory, a real worker pool (``--processes`` x
``--threads``, the hash embedder), then ``after_turn`` for every turn (the realistic chat
turns of ``bench/write_path.py``) and a wait until every turn is recorded and every queue is
empty (record_turn -> extract_beliefs -> ego_anchor + micro_consolidate). Prints the enqueue
time, the time to drain after the last enqueue, and turns/s from the first enqueue to the
drained queue. Redis (127.0.0.1:6379 by default) runs under a namespace of its own, deleted
afterwards.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import redis  # noqa: E402
from write_path import generate  # noqa: E402

from memory_core import Memory  # noqa: E402
from memory_core.brokers import make_broker  # noqa: E402
from memory_core.chat.post_turn import TurnSender  # noqa: E402
from memory_core.db import migrate_stores, open_ops, open_state  # noqa: E402
from memory_core.jobs import QUEUES  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from workers.pool import WorkerPool  # noqa: E402

TENANTS = ["bench0", "bench1", "bench2"]


def _drained(broker: Any) -> bool:
    return all(s.ready == s.delayed == s.in_flight == 0 for s in broker.queue_stats(QUEUES))


def _wait(state: Any, broker: Any, turns: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        done = state.conn.execute("SELECT count(*) FROM turns").fetchone()[0]
        if done >= turns and _drained(broker):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"not drained after {timeout_s:.0f} s ({done} turns recorded)")
        time.sleep(0.05)


def _settings(tmp: str, broker: str, redis_url: str) -> Settings:
    return Settings.from_env({}, data_dir=Path(tmp), log_level="error",
                             broker_url=redis_url if broker == "redis" else None)


def run(broker_kind: str, args: argparse.Namespace) -> dict[str, float]:
    namespace = f"mnemo-bench-{uuid.uuid4().hex[:8]}" if broker_kind == "redis" else "mnemo"
    with tempfile.TemporaryDirectory() as tmp:
        settings = _settings(tmp, broker_kind, args.redis_url)
        configure_logging(settings, force=True)
        migrate_stores(settings)  # as `mnemo db migrate` (the pool's start migrates too)
        state = open_state(settings)
        for tenant in TENANTS:
            create_tenant(state.conn, tenant)
        turns = [t.to_dict() for t in generate(args.turns, TENANTS)]
        options = {"namespace": namespace} if broker_kind == "redis" else {}
        broker = make_broker(settings, **options)
        pool = WorkerPool(settings, processes=args.processes, threads=args.threads,
                          grace_s=5, broker_options=options)
        pool.start()
        mem = Memory.open(settings)
        mem._sender = TurnSender(settings, namespace=namespace)
        try:
            began = time.perf_counter()
            for t in turns:
                mem.after_turn(t)
            enqueued = time.perf_counter()
            _wait(state, broker, len(turns), args.timeout)
            drained = time.perf_counter()
        finally:
            mem.close()
            pool.stop()
            broker.close()
        rows = {t: state.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("turns", "episodes", "beliefs", "entities")}
        ops = open_ops(settings)
        rows["audit_log"] = ops.conn.execute("SELECT count(*) FROM audit_log").fetchone()[0]
        ops.close()
        state.close()
    if broker_kind == "redis":
        client = redis.Redis.from_url(args.redis_url)
        keys = list(client.scan_iter(match=f"{namespace}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
    return {"enqueue_s": enqueued - began, "drain_s": drained - enqueued,
            "total_s": drained - began, "turns_per_s": len(turns) / (drained - began), **rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--brokers", default="embedded,redis")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    print(f"{args.turns:,} turns, {args.processes} worker processes x {args.threads} threads, "
          "hash embedder")
    for kind in args.brokers.split(","):
        r = run(kind, args)
        print(f"{kind:9s} {r['turns_per_s']:,.0f} turns/s  (enqueue {r['enqueue_s']:.1f} s, "
              f"drain after the last enqueue {r['drain_s']:.1f} s, total {r['total_s']:.1f} s)"
              f"  rows: turns {r['turns']}, episodes {r['episodes']}, beliefs {r['beliefs']}, "
              f"entities {r['entities']}, audit {r['audit_log']}")


if __name__ == "__main__":
    main()
