"""``after_turn`` latency on each broker (a script, not a test).

Example:
    .venv/bin/python bench/enqueue.py
    .venv/bin/python bench/enqueue.py --calls 10000 --brokers embedded,redis
    .venv/bin/python bench/enqueue.py --brokers redis --journal on,off

``--journal on,off`` runs each broker with the turn journal (``MNEMO_TURN_JOURNAL``) on and
off in one run (the journal only exists on Redis: the embedded queue is its own record).

Opens ``Memory`` on a fresh data directory, creates the tenant, then times ``after_turn``
(check the turn, check the tenant, build the message, send it) one call at a time, with no
worker running: the embedded broker writes one row to ``memory_ops.db``; Redis (127.0.0.1:6379
by default) gets the message under a namespace of its own, deleted afterwards. Prints p50,
p99 and max in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import redis  # noqa: E402
from write_path import generate  # noqa: E402

from memory_core import Memory  # noqa: E402
from memory_core.chat.post_turn import TurnSender  # noqa: E402
from memory_core.db import migrate_stores, open_state  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.settings import Settings  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(broker: str, calls: int, redis_url: str, journal: bool = True) -> dict[str, float]:
    namespace = f"mnemo-bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        url = redis_url if broker == "redis" else None
        settings = Settings.from_env({}, data_dir=Path(tmp), broker_url=url, log_level="error",
                                     turn_journal=journal)
        configure_logging(settings, force=True)
        migrate_stores(settings)  # as `mnemo db migrate`: Memory.open only checks the schemas
        state = open_state(settings)
        create_tenant(state.conn, "bench0")
        state.close()
        turns = [t.to_dict() for t in generate(calls + 100, ["bench0"])]
        mem = Memory.open(settings)
        mem._sender = TurnSender(settings, namespace=namespace)  # keep off the real namespace
        for t in turns[:100]:  # warm: connections, caches
            mem.after_turn(t)
        latencies = []
        for t in turns[100:]:
            started = time.perf_counter()
            mem.after_turn(t)
            latencies.append((time.perf_counter() - started) * 1000)
        mem.close()
    if broker == "redis":
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{namespace}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
    return {"p50": statistics.median(latencies), "p99": percentile(latencies, 0.99),
            "max": max(latencies), "mean": statistics.fmean(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--brokers", default="embedded,redis")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--journal", default="on",
                        help="on, off, or on,off to compare in one run")
    args = parser.parse_args()
    print(f"after_turn latency over {args.calls:,} calls (ms)")
    for broker in args.brokers.split(","):
        for mode in args.journal.split(","):
            r = run(broker, args.calls, args.redis_url, journal=mode == "on")
            print(f"{broker:9s} journal {mode:3s} p50 {r['p50']:.3f}  p99 {r['p99']:.3f}  "
                  f"max {r['max']:.2f}  mean {r['mean']:.3f}")


if __name__ == "__main__":
    main()
