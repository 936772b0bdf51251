"""``after_turn`` latency and CPU per call on each broker (a script, not a test).

Example:
    .venv/bin/python bench/enqueue.py
    .venv/bin/python bench/enqueue.py --calls 20000 --brokers redis --journal on,off

``--journal on,off`` compares the turn journal (``MNEMO_TURN_JOURNAL``) on and off in ONE
run: one ``Memory`` per mode, each on a fresh data directory, called in alternation (on,
off, off, on, ...), so the machine's load drifts over both alike. The journal only exists on
Redis (the embedded queue is its own record).

Each call is ``after_turn`` as the chat process makes it (check the turn, check the tenant,
look the turn up, build the message, journal it, send it) on real LoCoMo turns
(../shared/data/locomo), with no worker running: the embedded broker writes one row to
``memory_ops.db``; Redis (127.0.0.1:6379 by default) gets the message under a namespace of
its own, deleted afterwards. Prints, per broker and mode, the wall time (p50, p90, p99,
p99.9, max) and the CPU time of the calling thread per call (``time.thread_time``: user +
system time this thread spent, which the machine's load does not inflate the way it does
wall time), plus the load average before and after and the number of CPUs, to judge the
tail by. Shortcuts to know about: Redis is on loopback and idle but for this bench; the
state db is small (one tenant, the turns are never recorded, so ``is_recorded`` looks up
an index that stays empty). A call whose Redis reply takes longer than
``MNEMO_REDIS_TIMEOUT_MS`` spools (and the next second's calls spool too, the cooldown):
cheaper calls, counted as ``spooled`` so the figures can be read with them in mind.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import redis  # noqa: E402
from locomo_data import load  # noqa: E402

from memory_core import Memory  # noqa: E402
from memory_core.chat.post_turn import TurnSender  # noqa: E402
from memory_core.db import migrate_stores, open_state  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.settings import Settings  # noqa: E402

LOCOMO = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
TENANT = "bench0"
WARM = 200


def real_turns(n: int) -> list[dict[str, Any]]:
    """``n`` turns of LoCoMo's conversations, in order, cycling with fresh turn uids."""
    base = []
    for c, conv in enumerate(load(LOCOMO)):
        for session in conv.sessions:
            for i, t in enumerate(session.turns):
                base.append((f"c{c}-s{session.number}", t.dia_id, t.speaker, t.text,
                             session.at + timedelta(minutes=i)))
    turns = []
    for k in range(n):
        session, dia, speaker, text, at = base[k % len(base)]
        cycle = k // len(base)
        turns.append({"tenant": TENANT, "session_id": f"{session}-{cycle}",
                      "turn_uid": f"{session}-{dia}-{cycle}", "speaker": speaker,
                      "text": text, "occurred_at": at.isoformat(), "index": None})
    return turns


@contextmanager
def opened(broker: str, redis_url: str, journal: bool) -> Iterator[tuple[Memory, str]]:
    """A Memory on a fresh data dir (migrated, tenant created) and its Redis namespace."""
    namespace = f"mnemo-bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        url = redis_url if broker == "redis" else None
        settings = Settings.from_env({}, data_dir=Path(tmp), broker_url=url, log_level="error",
                                     turn_journal=journal)
        configure_logging(settings, force=True)
        migrate_stores(settings)  # as `mnemo db migrate`: Memory.open only checks the schemas
        state = open_state(settings)
        create_tenant(state.conn, TENANT)
        state.close()
        mem = Memory.open(settings)
        mem._sender = TurnSender(settings, namespace=namespace)  # off the real namespace
        try:
            yield mem, namespace
        finally:
            mem.close()
            if broker == "redis":
                client = redis.Redis.from_url(redis_url)
                keys = list(client.scan_iter(match=f"{namespace}:*", count=1000))
                for i in range(0, len(keys), 1000):
                    client.delete(*keys[i:i + 1000])
                client.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(broker: str, calls: int, redis_url: str, modes: list[str]) -> dict[str, dict[str, float]]:
    """Time ``calls`` after_turn calls per mode, the modes called in alternation."""
    turns = real_turns(WARM + calls)
    spooled: dict[str, int] = {}
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    with ExitStack() as stack:
        mems = {m: stack.enter_context(opened(broker, redis_url, m == "on"))[0] for m in modes}
        for t in turns[:WARM]:  # warm: connections, statement caches, the Redis script
            for m in modes:
                mems[m].after_turn(t)
        order = list(modes)
        for t in turns[WARM:]:
            for m in order:
                after_turn = mems[m].after_turn
                c0 = time.thread_time()
                w0 = time.perf_counter()
                after_turn(t)
                w1 = time.perf_counter()
                c1 = time.thread_time()
                wall[m].append((w1 - w0) * 1000)
                cpu[m].append((c1 - c0) * 1e6)
            order.reverse()  # on, off, off, on, ...: neither always goes first
        for m in modes:  # calls that met a Redis timeout (MNEMO_REDIS_TIMEOUT_MS) and spooled
            spool = getattr(mems[m]._sender.enqueuer, "spool", None)
            spooled[m] = spool.size() if spool is not None else 0
    return {m: {"p50": statistics.median(wall[m]), "p90": percentile(wall[m], 0.90),
                "p99": percentile(wall[m], 0.99), "p999": percentile(wall[m], 0.999),
                "max": max(wall[m]), "mean": statistics.fmean(wall[m]),
                "cpu_mean": statistics.fmean(cpu[m]), "cpu_p50": statistics.median(cpu[m]),
                "spooled": spooled[m]}
            for m in modes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="timed calls per mode")
    parser.add_argument("--brokers", default="embedded,redis")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--journal", default="on,off",
                        help="on, off, or on,off to compare in one run (Redis only)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    print(f"after_turn over {args.calls:,} calls per mode, LoCoMo turns; {os.cpu_count()} CPUs, "
          f"nice {os.nice(0)}, load average {' '.join(f'{x:.2f}' for x in load_before)}")
    print("wall ms: p50 / p90 / p99 / p99.9 / max / mean;  CPU us per call (this thread): "
          "mean / p50")
    for broker in args.brokers.split(","):
        modes = args.journal.split(",") if broker == "redis" else ["off"]
        results = run(broker, args.calls, args.redis_url, modes)
        for mode, r in results.items():
            label = f"journal {mode}" if broker == "redis" else "(its own record)"
            print(f"{broker:8s} {label:16s} {r['p50']:.3f} / {r['p90']:.3f} / {r['p99']:.3f} / "
                  f"{r['p999']:.3f} / {r['max']:.2f} / {r['mean']:.3f}   "
                  f"CPU {r['cpu_mean']:.0f} / {r['cpu_p50']:.0f}"
                  + (f"   spooled {r['spooled']}" if r["spooled"] else ""))
        if {"on", "off"} <= set(results):
            on, off = results["on"], results["off"]
            print(f"{broker:8s} journal on - off  p50 {on['p50'] - off['p50']:+.3f} ms, "
                  f"p99 {on['p99'] - off['p99']:+.3f} ms, "
                  f"CPU {on['cpu_mean'] - off['cpu_mean']:+.0f} us per call")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
