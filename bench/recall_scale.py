"""Recall latency and peak memory for one tenant with 10k, 100k and 1M memories (a script).

Example:
    .venv/bin/python bench/recall_scale.py
    .venv/bin/python bench/recall_scale.py --sizes 10000,100000 --queries 300

For each size it generates one tenant's memory straight into a fresh state db (4 episodes,
each with its raw turn, for every belief; chat-like texts of 6-60 words drawn from a
Zipf-distributed vocabulary with names, places and dates), then, in a fresh process, opens
``Memory`` with the hash embedder and times ``recall()`` on generated questions: p50 and p95
of the whole call (query embedding, every list, graph walk, fusion, recall-log write) and
the process's peak RSS; each size is timed in ``--rounds`` fresh processes and the table
gives the medians, with a CPU reference (a fixed pure-Python loop, timed after each round)
to show how fast the machine was. Questions draw their words from the stored vocabulary
(Zipf-distributed: some rare, some in thousands of memories). Vectors are not generated:
with a keyword-grade (hash) embedder the default strategy does not run dense search (its
neighbours only repeat FTS), so they would not change the figures; with a semantic embedder
they would (sqlite-vec is brute force).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from memory_core.clock import to_db  # noqa: E402
from memory_core.db import migrate_stores, open_state  # noqa: E402
from memory_core.db.sqlite import atomic  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.settings import Settings  # noqa: E402

TENANT = "scale"
NAMES = ["Ana", "Ben", "Chloe", "Dmitri", "Emeka", "Fatima", "Gus", "Hana", "Ivo", "Jun",
         "Kofi", "Lena", "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara"]
PLACES = ["Lisbon", "Berlin", "Osaka", "Nairobi", "Toronto", "Porto", "Krakow", "Austin",
          "Lima", "Hanoi", "Oslo", "Accra", "Quito", "Perth", "Cork", "Bergen"]
_COMMON_TEXT = ("i you we the a to and of in is it that for on with my was this have be at so "
                "but just like about really today yesterday week going think know want need got")
COMMON = _COMMON_TEXT.split()
GENERATE_SEED = 7
WARM_UP = 20
PREDICATES = ["likes", "lives_in", "works_at", "visited", "plans_to", "attended", "has_pet"]


def _vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


class Texts:
    """Chat-like sentences: common words, Zipf-distributed content words, names, places."""

    def __init__(self, seed: int, vocabulary_seed: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.vocab = _vocabulary(random.Random(seed if vocabulary_seed is None
                                               else vocabulary_seed))
        weights = [1.0 / (rank + 1) for rank in range(len(self.vocab))]
        self.cum = list(_accumulate(weights))

    def word(self) -> str:
        return self.rng.choices(self.vocab, cum_weights=self.cum, k=1)[0]

    def sentence(self, lo: int = 6, hi: int = 60) -> str:
        n = self.rng.randint(lo, hi)
        out = []
        for _ in range(n):
            r = self.rng.random()
            out.append(self.rng.choice(COMMON) if r < 0.5 else self.rng.choice(NAMES)
                       if r < 0.55 else self.rng.choice(PLACES) if r < 0.58 else self.word())
        return " ".join(out).capitalize() + "."

    def question(self) -> str:
        return (f"What did {self.rng.choice(NAMES)} say about {self.word()} and {self.word()} "
                f"in {self.rng.choice(PLACES)}?")


def _accumulate(values: list[float]) -> list[float]:
    total, out = 0.0, []
    for v in values:
        total += v
        out.append(total)
    return out


def generate(settings: Settings, size: int, seed: int = GENERATE_SEED,
             batch: int = 20_000) -> float:
    """Write ``size`` memories (80% episodes with their turns, 20% beliefs); seconds taken."""
    started = time.perf_counter()
    texts = Texts(seed)
    migrate_stores(settings)  # as `mnemo db migrate`: Memory.open only checks the schemas
    db = open_state(settings)
    conn = db.conn
    create_tenant(conn, TENANT)
    t0 = 1_600_000_000
    n_beliefs = size // 5
    n_episodes = size - n_beliefs
    entities = [f"ent_{i}" for i in range(max(10, size // 50))]
    with atomic(conn):
        now = to_db(_dt(t0))
        conn.executemany("INSERT OR IGNORE INTO entities (tenant, entity_id, name, created_at, "
                         "updated_at) VALUES (?, ?, ?, ?, ?)",
                         [(TENANT, e, f"{texts.rng.choice(NAMES)} {e}", now, now)
                          for e in ["user", *entities]])
    for start in range(0, n_episodes, batch):
        rows = []
        for i in range(start, min(start + batch, n_episodes)):
            when = to_db(_dt(t0 + i * 60))
            rows.append((i + 1, f"t{i}", f"s{i // 40}", i % 40, when, texts.sentence()))
        with atomic(conn):
            conn.executemany(
                "INSERT INTO turns (id, tenant, turn_uid, session_id, idx, speaker, "
                "occurred_at, text, recorded_at) VALUES (?, 'scale', ?, ?, ?, 'user', ?, ?, ?)",
                [(r[0], r[1], r[2], r[3], r[4], r[5], r[4]) for r in rows])
            conn.executemany(
                "INSERT INTO episodes (id, tenant, episode_uid, session_id, tier, text, "
                "occurred_at, importance, created_at, updated_at) VALUES (?, 'scale', ?, ?, "
                "'long_term', ?, ?, 0.5, ?, ?)",
                [(r[0], f"ep_{r[1]}", r[2], "user: " + r[5], r[4], r[4], r[4]) for r in rows])
            conn.executemany("INSERT INTO episode_turns (episode_id, turn_id) VALUES (?, ?)",
                             [(r[0], r[0]) for r in rows])
    _write_beliefs(conn, texts, entities, n_beliefs, n_episodes, t0, batch)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return time.perf_counter() - started


def _write_beliefs(conn: Any, texts: Texts, entities: list[str], n_beliefs: int,
                   n_episodes: int, t0: int, batch: int) -> None:
    for start in range(0, n_beliefs, batch):
        rows = []
        for i in range(start, min(start + batch, n_beliefs)):
            subject, obj = texts.rng.choice(entities), texts.rng.choice(entities)
            pred = texts.rng.choice(PREDICATES)
            when = to_db(_dt(t0 + i * 240))
            rows.append((f"b{i}", subject, pred, f"{texts.word()} {texts.word()}", obj,
                         f"{subject} {pred.replace('_', ' ')} {texts.word()} {texts.word()}",
                         when, f"t{texts.rng.randrange(n_episodes)}"))
        with atomic(conn):
            conn.executemany(
                "INSERT INTO beliefs (tenant, belief_uid, subject_id, predicate, object_text, "
                "object_entity_id, text, valid_from, recorded_at, status, source, confidence, "
                "turn_uid) VALUES ('scale', ?, ?, ?, ?, ?, ?, ?, ?, 'active', 'heuristic', 0.8,"
                " ?)", [(*r[:7], r[6], r[7]) for r in rows])


def _dt(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def cpu_reference_ms(repeats: int = 15) -> float:
    """Median time of a fixed pure-Python loop: how fast this machine is right now (on a
    shared VM it moves by half from minute to minute, and recall with it)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for i in range(200_000):
            total += i * i
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def measure(data_dir: str, queries: int) -> dict:
    """Runs in a fresh process: open Memory, warm up, time ``queries`` recalls."""
    from memory_core import Memory

    settings = Settings.from_env({}, data_dir=Path(data_dir), log_level="error",
                                 log_format="json")
    from memory_core.log import configure_logging

    configure_logging(settings)
    texts = Texts(99, vocabulary_seed=GENERATE_SEED)  # questions use the stored words
    qs = [texts.question() for _ in range(queries + WARM_UP)]
    times = []
    with Memory.open(settings) as mem:
        for i, q in enumerate(qs):
            t = time.perf_counter()
            mem.recall(q, tenant=TENANT)
            if i >= WARM_UP:  # the first calls warm the page cache and the statements
                times.append((time.perf_counter() - t) * 1000)
    q = statistics.quantiles(times, n=100, method="inclusive")
    return {"p50_ms": round(q[49], 2), "p95_ms": round(q[94], 2),
            "cpu_ref_ms": cpu_reference_ms(),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def _measure_in_child(data_dir: str, queries: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--measure", data_dir, "--queries",
                          str(queries)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="10000,100000,1000000")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5,
                   help="fresh processes timed per size; the table gives their medians")
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--measure", help=argparse.SUPPRESS)  # internal: the child process
    args = p.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.queries)))
        return
    rows = []
    print("| memories | generate s | db MB | recall p50 ms | recall p95 ms | p95 of each round "
          "| CPU reference ms | peak RSS MB |")
    print("|---:|---:|---:|---:|---:|---|---:|---:|")
    for size in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="mnemo-scale-") as tmp:
            settings = Settings.from_env({}, data_dir=Path(tmp), log_level="error")
            gen_s = generate(settings, size)
            db_mb = settings.state_db_path.stat().st_size / 2**20
            rounds = [_measure_in_child(tmp, args.queries) for _ in range(args.rounds)]
        res = {"memories": size, "generate_s": round(gen_s, 1), "db_mb": round(db_mb, 1),
               "p50_ms": statistics.median(r["p50_ms"] for r in rounds),
               "p95_ms": statistics.median(r["p95_ms"] for r in rounds),
               "p95_rounds_ms": [r["p95_ms"] for r in rounds],
               "cpu_ref_ms": statistics.median(r["cpu_ref_ms"] for r in rounds),
               "peak_rss_mb": max(r["peak_rss_mb"] for r in rounds)}
        rows.append(res)
        print(f"| {size:,} | {res['generate_s']} | {res['db_mb']} | {res['p50_ms']} | "
              f"{res['p95_ms']} | {' / '.join(map(str, res['p95_rounds_ms']))} | "
              f"{res['cpu_ref_ms']} | {res['peak_rss_mb']} |", flush=True)
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
