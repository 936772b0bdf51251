"""What the facts channel adds to recall latency, measured side by side in one process.

Example:
    .venv/bin/python bench/facts_latency.py
    .venv/bin/python bench/facts_latency.py --sizes 10000,100000 --queries 300

For each size it generates one tenant's memory with ``bench/recall_scale.py``'s generator
(80% episodes with their raw turn, 20% beliefs between generated entities) plus beliefs of
the hub ``user`` (1% of the memories, the recall-scale predicates), so that first-person
questions have a real hub to look up. Then, in a fresh process with the hash embedder, it
times each question twice, alternating which goes first: ``recall(fact_budget=8)`` (the
facts channel on) and ``recall(fact_budget=0)`` (off: beliefs are still searched, but not
ranked as facts). Half the questions are recall-scale's ("What did Ana say about W1 and W2
in Lisbon?"), half first-person ones with a predicate cue ("Where do I live now, near W1?"),
which run the hub's subject/predicate lookup. It prints p50/p95 of the whole call for both,
their difference, the caller thread's CPU time for both (``time.thread_time``: on a loaded
machine wall time mostly measures waiting for a core), and p50/p95 of the channel's own
time (``timings_ms["facts_ms"]``, wall).

Shortcut named: generated text and entities, not real conversations (the channel's cost
depends on how many beliefs recall found and on the hub's beliefs per asked predicate, both
bounded, not on the text); no vectors (hash embedder: no dense search).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.recall_scale import (  # noqa: E402
    GENERATE_SEED,
    PREDICATES,
    TENANT,
    WARM_UP,
    Texts,
    cpu_reference_ms,
    generate,
)
from memory_core.clock import to_db  # noqa: E402
from memory_core.db import open_state  # noqa: E402
from memory_core.db.sqlite import atomic  # noqa: E402
from memory_core.settings import Settings  # noqa: E402

FIRST_PERSON = ("Where do I live now, near {w}?", "What do I like about {w}?",
                "Where do I work these days, {w}?", "What do I plan to do about {w}?",
                "Which places have I visited, like {w}?", "Do I have a pet called {w}?")


def add_hub_beliefs(settings: Settings, size: int, seed: int = 11) -> int:
    """Beliefs of the hub (1% of ``size``), spread over the recall-scale predicates."""
    rng = random.Random(seed)
    texts = Texts(seed, vocabulary_seed=GENERATE_SEED)
    n = max(10, size // 100)
    db = open_state(settings, migrate=False)
    try:
        with atomic(db.conn):
            db.conn.executemany(
                "INSERT INTO beliefs (tenant, belief_uid, subject_id, predicate, object_text, "
                "text, valid_from, recorded_at, status, source, confidence, turn_uid) VALUES "
                "(?, ?, 'user', ?, ?, ?, ?, ?, 'active', 'heuristic', 0.8, ?)",
                [(TENANT, f"hub{i}", pred, obj, f"user {pred.replace('_', ' ')} {obj}",
                  when, when, f"t{rng.randrange(size * 4 // 5)}")
                 for i in range(n)
                 for pred, obj, when in [(rng.choice(PREDICATES),
                                          f"{texts.word()} {texts.word()}",
                                          to_db(_when(rng)))]])
    finally:
        db.close()
    return n


def _when(rng: random.Random) -> datetime:
    return datetime.fromtimestamp(1_600_000_000 + rng.randrange(10_000_000), UTC)


def _quantiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return round(q[49], 3), round(q[94], 3)


def measure(data_dir: str, queries: int) -> dict:
    """Runs in a fresh process: both variants of every question, alternating the order."""
    from memory_core import Memory
    from memory_core.log import configure_logging

    settings = Settings.from_env({}, data_dir=Path(data_dir), log_level="error",
                                 log_format="json")
    configure_logging(settings)
    texts = Texts(99, vocabulary_seed=GENERATE_SEED)
    qs = [texts.question() if i % 2 else FIRST_PERSON[i // 2 % len(FIRST_PERSON)].format(
        w=texts.word()) for i in range(queries + WARM_UP)]
    on: list[float] = []
    off: list[float] = []
    cpu_on: list[float] = []
    cpu_off: list[float] = []
    channel: list[float] = []
    facts: list[int] = []
    with Memory.open(settings) as mem:
        for i, q in enumerate(qs):
            order = (8, 0) if i % 2 else (0, 8)
            for budget in order:
                t, c = time.perf_counter(), time.thread_time()
                result = mem.recall(q, tenant=TENANT, fact_budget=budget)
                ms = (time.perf_counter() - t) * 1000
                cpu = (time.thread_time() - c) * 1000
                if i < WARM_UP:
                    continue
                (cpu_on if budget else cpu_off).append(cpu)
                if budget:
                    on.append(ms)
                    channel.append(result.timings_ms.get("facts_ms", 0.0))
                    facts.append(len(result.facts))
                else:
                    off.append(ms)
    return {"on": _quantiles(on), "off": _quantiles(off), "facts_ms": _quantiles(channel),
            "cpu_on": _quantiles(cpu_on), "cpu_off": _quantiles(cpu_off),
            "facts_mean": round(statistics.mean(facts), 2), "cpu_ref_ms": cpu_reference_ms()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--measure", help=argparse.SUPPRESS)  # internal: the child process
    args = p.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.queries)))
        return
    rows = []
    print("| memories | hub beliefs | facts off p50 / p95 ms | facts on p50 / p95 ms | added "
          "p50 / p95 ms | thread CPU off / on p50 ms | thread CPU off / on p95 ms | channel "
          "p50 / p95 ms | facts per recall | CPU reference ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="mnemo-facts-") as tmp:
            settings = Settings.from_env({}, data_dir=Path(tmp), log_level="error")
            generate(settings, size)
            hub = add_hub_beliefs(settings, size)
            out = subprocess.run([sys.executable, __file__, "--measure", tmp, "--queries",
                                  str(args.queries)], capture_output=True, text=True,
                                 check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
        res.update(memories=size, hub_beliefs=hub)
        rows.append(res)
        added = (round(res["on"][0] - res["off"][0], 3), round(res["on"][1] - res["off"][1], 3))
        print(f"| {size:,} | {hub:,} | {res['off'][0]} / {res['off'][1]} | {res['on'][0]} / "
              f"{res['on'][1]} | {added[0]} / {added[1]} | {res['cpu_off'][0]} / "
              f"{res['cpu_on'][0]} | {res['cpu_off'][1]} / {res['cpu_on'][1]} | "
              f"{res['facts_ms'][0]} / "
              f"{res['facts_ms'][1]} | {res['facts_mean']} | {res['cpu_ref_ms']} |", flush=True)
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
