"""Recall latency and peak memory for one tenant with 10k, 100k and 1M memories, alone or
among many tenants (a script).

Example:
    .venv/bin/python bench/recall_scale.py
    .venv/bin/python bench/recall_scale.py --sizes 10000,100000 --queries 300
    .venv/bin/python bench/recall_scale.py --sizes '' --many 1000x1000,10x100000 \
        --cache /tmp/mnemo-scale-cache

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

``--many TENANTSxMEMORIES``: the same tenant (the same memories) once in a store with
TENANTS - 1 other tenants of as many memories each (every tenant drawing from the same
vocabulary, written a batch per tenant in turn), once alone in its own store; the two are
timed in turn in fresh processes, ``--rounds`` times each, and the table gives both and
their ratio (shared / alone).

Each recall is timed in wall time and in the process's CPU time (``time.process_time``: on a
shared, loaded machine the wall time mostly measures the wait for a core), and its
``keyword_ms`` (``timings_ms``) is kept; the tables give p50 and p95 of each.

``--cache DIR``: a generated store is kept in ``DIR/<kind>-<parameters>-g<generator
version>`` and reused by later runs (only pending migrations are applied): generating a
million memories took 2 minutes on a quiet machine and over an hour on a busy
one. The tables say "(cached)" when a store was reused; its generate time is the one
recorded when it was built.

``--backend postgres`` (single-tenant sizes only): a copy of each size's (cached) SQLite
store is promoted (``memory_core.mirrors.promote``, COPY) into a fresh database on
``--pg-server`` and recall is timed through the same code path with
``MNEMO_STATE_BACKEND=postgres``; the database and the copy are removed at the end.
``--backend sqlite,postgres`` times both, in turn in each round, side by side. The row names
the primary's vector column: pgvector ``vector`` (HNSW) or ``real[]`` (exact scan), though
with the hash embedder the default strategy runs no dense search either way.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
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


@functools.cache
def _zipf_vocabulary(seed: int) -> tuple[list[str], list[float]]:
    """The vocabulary of ``seed`` and its cumulative Zipf weights (made once per seed: a
    thousand tenants share one)."""
    vocab = _vocabulary(random.Random(seed))
    return vocab, list(_accumulate([1.0 / (rank + 1) for rank in range(len(vocab))]))


class Texts:
    """Chat-like sentences: common words, Zipf-distributed content words, names, places."""

    def __init__(self, seed: int, vocabulary_seed: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.vocab, self.cum = _zipf_vocabulary(seed if vocabulary_seed is None
                                                else vocabulary_seed)

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


class _Tenant:
    """One tenant's generated memory, written in chunks (so tenants can take turns)."""

    def __init__(self, tenant: str, size: int, seed: int, t0: int) -> None:
        self.tenant = tenant
        # Every tenant draws from the same vocabulary: their words overlap, as people's do.
        self.texts = Texts(seed, vocabulary_seed=GENERATE_SEED)
        self.t0 = t0
        self.n_beliefs = size // 5
        self.n_episodes = size - self.n_beliefs
        self.entities = [f"ent_{i}" for i in range(max(10, size // 50))]
        self.episodes_done = 0
        self.beliefs_done = 0

    @property
    def done(self) -> bool:
        return (self.episodes_done >= self.n_episodes
                and self.beliefs_done >= self.n_beliefs)

    def start(self, conn: Any) -> None:
        create_tenant(conn, self.tenant)
        with atomic(conn):
            now = to_db(_dt(self.t0))
            conn.executemany(
                "INSERT OR IGNORE INTO entities (tenant, entity_id, name, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?)",
                [(self.tenant, e, f"{self.texts.rng.choice(NAMES)} {e}", now, now)
                 for e in ["user", *self.entities]])

    def write(self, conn: Any, batch: int, next_id: int) -> int:
        """Write the next ``batch`` memories (episodes first, then beliefs); the next id."""
        texts, tenant, t0 = self.texts, self.tenant, self.t0
        if self.episodes_done < self.n_episodes:
            rows = []
            for i in range(self.episodes_done, min(self.episodes_done + batch, self.n_episodes)):
                when = to_db(_dt(t0 + i * 60))
                rows.append((next_id, f"t{i}", f"s{i // 40}", i % 40, when, texts.sentence()))
                next_id += 1
            self.episodes_done += len(rows)
            with atomic(conn):
                conn.executemany(
                    "INSERT INTO turns (id, tenant, turn_uid, session_id, idx, speaker, "
                    "occurred_at, text, recorded_at) VALUES (?, ?, ?, ?, ?, 'user', ?, ?, ?)",
                    [(r[0], tenant, r[1], r[2], r[3], r[4], r[5], r[4]) for r in rows])
                conn.executemany(
                    "INSERT INTO episodes (id, tenant, episode_uid, session_id, tier, text, "
                    "occurred_at, importance, created_at, updated_at) VALUES (?, ?, ?, ?, "
                    "'long_term', ?, ?, 0.5, ?, ?)",
                    [(r[0], tenant, f"ep_{r[1]}", r[2], "user: " + r[5], r[4], r[4], r[4])
                     for r in rows])
                conn.executemany("INSERT INTO episode_turns (episode_id, turn_id) VALUES (?, ?)",
                                 [(r[0], r[0]) for r in rows])
            return next_id
        rows = []
        for i in range(self.beliefs_done, min(self.beliefs_done + batch, self.n_beliefs)):
            subject, obj = texts.rng.choice(self.entities), texts.rng.choice(self.entities)
            pred = texts.rng.choice(PREDICATES)
            when = to_db(_dt(t0 + i * 240))
            rows.append((tenant, f"b{i}", subject, pred, f"{texts.word()} {texts.word()}", obj,
                         f"{subject} {pred.replace('_', ' ')} {texts.word()} {texts.word()}",
                         when, f"t{texts.rng.randrange(self.n_episodes)}"))
        self.beliefs_done += len(rows)
        with atomic(conn):
            conn.executemany(
                "INSERT INTO beliefs (tenant, belief_uid, subject_id, predicate, object_text, "
                "object_entity_id, text, valid_from, recorded_at, status, source, confidence, "
                "turn_uid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', 'heuristic', 0.8, ?)",
                [(*r[:8], r[7], r[8]) for r in rows])
        return next_id


def generate(settings: Settings, size: int, seed: int = GENERATE_SEED,
             batch: int = 20_000, others: int = 0, other_size: int = 0) -> float:
    """Write ``size`` memories of TENANT (80% episodes with their turns, 20% beliefs) and,
    with ``others``, as many more tenants of ``other_size`` memories each, every tenant
    writing a batch in turn; seconds taken. TENANT's memories are the same with or without
    the others (its own generator)."""
    started = time.perf_counter()
    migrate_stores(settings)  # as `mnemo db migrate`: Memory.open only checks the schemas
    db = open_state(settings)
    conn = db.conn
    t0 = 1_600_000_000
    tenants = [_Tenant(TENANT, size, seed, t0)] + [
        _Tenant(f"other{k:05d}", other_size, seed + 1 + k, t0) for k in range(others)]
    for tenant in tenants:
        tenant.start(conn)
    next_id = 1
    step = batch if not others else max(1, min(batch, other_size, size))
    while not all(t.done for t in tenants):
        for tenant in tenants:
            if not tenant.done:
                next_id = tenant.write(conn, step, next_id)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return time.perf_counter() - started


GENERATOR_VERSION = 1  # bumped when ``generate`` would write other memories


def built_store(cache: Path | None, key: str, build: Any) -> tuple[Path, float, bool]:
    """A generated store for ``key``: (its data dir, seconds taken to build it, whether it
    came from ``cache``). Without ``cache`` it is built in a fresh temporary directory (the
    caller removes it); with one, built once into ``cache/key`` and reused by later runs,
    which only apply pending migrations (``mnemo db migrate``), never regenerate."""
    if cache is None:
        tmp = Path(tempfile.mkdtemp(prefix="mnemo-scale-"))
        return tmp, build(Settings.from_env({}, data_dir=tmp, log_level="error")), False
    target = cache / f"{key}-g{GENERATOR_VERSION}"
    if (target / "BUILT").exists():
        migrate_stores(Settings.from_env({}, data_dir=target, log_level="error"))
        return target, float((target / "BUILT").read_text()), True
    partial = cache / f"{key}-g{GENERATOR_VERSION}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    seconds = build(Settings.from_env({}, data_dir=partial, log_level="error"))
    (partial / "BUILT").write_text(f"{seconds:.1f}")
    partial.rename(target)  # a crash mid-build leaves only the .partial, rebuilt next time
    return target, seconds, False


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


def measure(data_dir: str, queries: int, pg_url: str | None = None) -> dict:
    """Runs in a fresh process: open Memory, warm up, time ``queries`` recalls (wall and
    this process's CPU time, and the keyword search's share from ``timings_ms``); with
    ``pg_url``, on the Postgres primary there (``MNEMO_STATE_BACKEND=postgres``)."""
    from memory_core import Memory

    primary: dict[str, Any] = ({"state_backend": "postgres", "postgres_url": pg_url}
                               if pg_url else {})
    settings = Settings.from_env({}, data_dir=Path(data_dir), log_level="error",
                                 log_format="json", **primary)
    from memory_core.log import configure_logging

    configure_logging(settings)
    texts = Texts(99, vocabulary_seed=GENERATE_SEED)  # questions use the stored words
    qs = [texts.question() for _ in range(queries + WARM_UP)]
    times, cpu, keyword = [], [], []
    with Memory.open(settings) as mem:
        for i, q in enumerate(qs):
            t, c = time.perf_counter(), time.process_time()
            result = mem.recall(q, tenant=TENANT)
            if i >= WARM_UP:  # the first calls warm the page cache and the statements
                times.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
                keyword.append(result.timings_ms.get("keyword_ms", 0.0))

    def pct(values: list[float], n: int) -> float:
        return round(statistics.quantiles(values, n=100, method="inclusive")[n - 1], 2)

    return {"p50_ms": pct(times, 50), "p95_ms": pct(times, 95),
            "cpu_p50_ms": pct(cpu, 50), "cpu_p95_ms": pct(cpu, 95),
            "keyword_p50_ms": pct(keyword, 50), "keyword_p95_ms": pct(keyword, 95),
            "cpu_ref_ms": cpu_reference_ms(),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def _measure_in_child(data_dir: str, queries: int, pg_url: str | None = None) -> dict:
    out = subprocess.run([sys.executable, __file__, "--measure", data_dir, "--queries",
                          str(queries), *(["--measure-pg-url", pg_url] if pg_url else [])],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def promote_store(data_dir: str, url: str) -> float:
    """Runs in a fresh process (so the parent's peak RSS, which the measuring children
    inherit, stays small): as an operator would, bring the Postgres mirror at ``url`` level
    with the store in ``data_dir`` (`mnemo mirror reconcile --sink postgres`; promote
    refuses while it drifts), then promote the store into it; seconds taken."""
    from memory_core.mirrors.outbox import make_sink
    from memory_core.mirrors.promote import promote
    from memory_core.mirrors.readers import reader_for
    from memory_core.mirrors.reconcile import reconcile

    settings = Settings.from_env({}, data_dir=Path(data_dir), log_level="error",
                                 postgres_url=url)
    started = time.perf_counter()
    sink = make_sink(settings, "postgres")
    state = open_state(settings)
    try:
        reader = reader_for(sink)
        assert reader is not None
        reconcile(state.conn, reader, dry_run=False)
    finally:
        state.close()
        sink.close()
    promote(settings)
    return time.perf_counter() - started


@contextlib.contextmanager
def promoted_copy(data: Path, server: str) -> Iterator[tuple[Path, str, str, float]]:
    """A copy of the store in ``data`` promoted into a fresh database on ``server``
    (``postgresql://USER@HOST:PORT/DB``, the database to connect to for CREATE/DROP):
    (the copy's data dir, the primary's URL, its vector column type, seconds to reconcile
    the Postgres mirror and promote). The database and the copy are removed on exit;
    ``data`` is only read."""
    import psycopg

    from memory_core.backends import parse_backend_url

    srv = parse_backend_url("postgres", "--pg-server", server)
    name = f"mnemo_scale_{uuid.uuid4().hex[:8]}"
    admin: dict[str, Any] = {"host": srv.host, "port": srv.port, "user": srv.user,
                             "dbname": srv.database, "autocommit": True}
    copy = Path(tempfile.mkdtemp(prefix="mnemo-scale-pg-")) / "data"
    with psycopg.connect(**admin) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        shutil.copytree(data, copy)
        url = f"postgresql://{srv.user}@{srv.host_for_url}:{srv.port}/{name}"
        out = subprocess.run([sys.executable, __file__, "--promote", str(copy), url],
                             capture_output=True, text=True, check=True)
        seconds = float(out.stdout.strip().splitlines()[-1])
        with psycopg.connect(**{**admin, "dbname": name}) as conn:
            row = conn.execute("SELECT value FROM mnemo_primary.meta "
                               "WHERE key = 'vector_type'").fetchone()
        yield copy, url, str(row[0]) if row else "real[]", seconds
    finally:
        with psycopg.connect(**admin) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(copy.parent, ignore_errors=True)


def _med(rounds: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in rounds), 2)


def _single(sizes: list[int], args: argparse.Namespace) -> list[dict]:
    rows = []
    print("| memories | generate s | db MB | recall p50 ms | recall p95 ms | CPU p50 / p95 ms "
          "| keyword p50 / p95 ms | p95 of each round | CPU reference ms | peak RSS MB |")
    print("|---:|---:|---:|---:|---:|---|---|---|---:|---:|")
    for size in sizes:
        data, gen_s, cached = built_store(args.cache, f"single-{size}",
                                          functools.partial(generate, size=size))
        try:
            db_mb = (data / "memory_state.db").stat().st_size / 2**20
            with contextlib.ExitStack() as stack:
                # backend -> (data dir, primary URL or None, label)
                targets: dict[str, tuple[str, str | None, str]] = {}
                for backend in args.backends:
                    if backend == "sqlite":
                        targets[backend] = (str(data), None, "sqlite")
                        continue
                    copy, url, vtype, promote_s = stack.enter_context(
                        promoted_copy(data, args.pg_server))
                    dense = "pgvector HNSW" if vtype == "vector" else "real[] exact scan"
                    targets[backend] = (str(copy), url, f"postgres, {dense}, mirrored + "
                                        f"promoted in {promote_s:.0f} s")
                got: dict[str, list[dict]] = {b: [] for b in targets}
                for _ in range(args.rounds):
                    for backend, (d, url, _label) in targets.items():
                        got[backend].append(_measure_in_child(d, args.queries, url))
        finally:
            if args.cache is None:
                shutil.rmtree(data, ignore_errors=True)
        for backend, rounds in got.items():
            label = targets[backend][2]
            res = {"memories": size, "backend": label, "generate_s": round(gen_s, 1),
                   "cached": cached, "db_mb": round(db_mb, 1),
                   **{k: _med(rounds, k) for k in rounds[0] if k != "peak_rss_mb"},
                   "p95_rounds_ms": [r["p95_ms"] for r in rounds],
                   "peak_rss_mb": max(r["peak_rss_mb"] for r in rounds)}
            rows.append(res)
            _print_single(res, size, cached, label if args.backends != ["sqlite"] else "")
    return rows


def _print_single(res: dict, size: int, cached: bool, label: str) -> None:
    print(f"| {size:,}{f' ({label})' if label else ''} | "
          f"{res['generate_s']}{' (cached)' if cached else ''} | "
          f"{res['db_mb']} | {res['p50_ms']} | {res['p95_ms']} | {res['cpu_p50_ms']} / "
          f"{res['cpu_p95_ms']} | {res['keyword_p50_ms']} / {res['keyword_p95_ms']} | "
          f"{' / '.join(map(str, res['p95_rounds_ms']))} | {res['cpu_ref_ms']} | "
          f"{res['peak_rss_mb']} |", flush=True)


def _many(specs: list[tuple[int, int]], args: argparse.Namespace) -> list[dict]:
    """One tenant among ``n - 1`` others of the same size in one store, against the same
    tenant (the same memories) alone in a store of its own; the two measured in turn, in
    fresh processes, ``--rounds`` times each."""
    rows = []
    print("| tenants x memories | shared db MB | generate s (shared / alone) | p50 ms shared "
          "/ alone | p50 ratio | p95 ms shared / alone | p95 ratio | CPU p50 ms shared / "
          "alone | CPU p50 ratio | keyword p50 ms shared / alone "
          "| p95 of each round (shared; alone) | CPU reference ms |")
    print("|---|---:|---|---|---:|---|---:|---|---:|---|---|---:|")
    for n, m in specs:
        shared, gen_shared, cached_shared = built_store(
            args.cache, f"many-{n}x{m}",
            functools.partial(generate, size=m, others=n - 1, other_size=m))
        alone, gen_alone, cached_alone = built_store(args.cache, f"single-{m}",
                                                     functools.partial(generate, size=m))
        try:
            db_mb = (shared / "memory_state.db").stat().st_size / 2**20
            got: dict[Path, list[dict]] = {shared: [], alone: []}
            for _ in range(args.rounds):
                for d in (alone, shared):
                    got[d].append(_measure_in_child(str(d), args.queries))
        finally:
            if args.cache is None:
                shutil.rmtree(shared, ignore_errors=True)
                shutil.rmtree(alone, ignore_errors=True)
        med = {d: {k: _med(got[d], k) for k in got[d][0]} for d in got}
        res = {"tenants": n, "memories_per_tenant": m, "shared_db_mb": round(db_mb, 1),
               "generate_s": [round(gen_shared, 1), round(gen_alone, 1)],
               "cached": [cached_shared, cached_alone],
               "shared": med[shared], "alone": med[alone],
               **{f"{k}_ratio": round(med[shared][f"{k}_ms"] / med[alone][f"{k}_ms"], 2)
                  for k in ("p50", "p95", "cpu_p50", "cpu_p95")},
               "p95_rounds_ms": {"shared": [r["p95_ms"] for r in got[shared]],
                                 "alone": [r["p95_ms"] for r in got[alone]]}}
        rows.append(res)
        sh, al = med[shared], med[alone]
        gen = " / ".join(f"{s:.1f}{' (cached)' if c else ''}" for s, c in
                         ((gen_shared, cached_shared), (gen_alone, cached_alone)))
        print(f"| {n:,} x {m:,} | {res['shared_db_mb']} | {gen} | {sh['p50_ms']} / "
              f"{al['p50_ms']} | {res['p50_ratio']} | {sh['p95_ms']} / {al['p95_ms']} | "
              f"{res['p95_ratio']} | {sh['cpu_p50_ms']} / {al['cpu_p50_ms']} | "
              f"{res['cpu_p50_ratio']} | {sh['keyword_p50_ms']} / {al['keyword_p50_ms']} | "
              f"{' / '.join(map(str, res['p95_rounds_ms']['shared']))}; "
              f"{' / '.join(map(str, res['p95_rounds_ms']['alone']))} | "
              f"{sh['cpu_ref_ms']} / {al['cpu_ref_ms']} |", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="10000,100000,1000000",
                   help="one tenant alone, at each size ('' for none)")
    p.add_argument("--many", default="",
                   help="many-tenants mode: TENANTSxMEMORIES, comma-separated, e.g. "
                        "1000x1000,10x100000")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5,
                   help="fresh processes timed per size; the table gives their medians")
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--cache", type=Path, default=None,
                   help="keep each generated store in DIR/<parameters> and reuse it in later "
                        "runs (pending migrations are applied; delete the directory to "
                        "regenerate), e.g. /tmp/mnemo-scale-cache")
    p.add_argument("--backend", default="sqlite",
                   help="state backend(s) for --sizes: sqlite, postgres (a promoted copy of "
                        "the SQLite store in a fresh database on --pg-server), or "
                        "sqlite,postgres (both, in turn in each round)")
    p.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432/postgres",
                   help="Postgres server for --backend postgres (the database named is used "
                        "only to create and drop the fresh one)")
    p.add_argument("--measure", help=argparse.SUPPRESS)  # internal: the child process
    p.add_argument("--measure-pg-url", help=argparse.SUPPRESS)
    p.add_argument("--promote", nargs=2, help=argparse.SUPPRESS)  # internal: DATA_DIR URL
    args = p.parse_args(argv)
    if args.promote:
        print(promote_store(*args.promote))
        return
    if args.measure:
        print(json.dumps(measure(args.measure, args.queries, args.measure_pg_url)))
        return
    args.backends = [b for b in args.backend.split(",") if b]
    if not args.backends or set(args.backends) - {"sqlite", "postgres"}:
        raise SystemExit("--backend takes sqlite, postgres or sqlite,postgres")
    out: dict[str, list[dict]] = {}
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if sizes:
        out["single"] = _single(sizes, args)
    specs = [tuple(int(v) for v in x.lower().split("x")) for x in args.many.split(",") if x]
    if specs:
        if any(len(spec) != 2 or min(spec) < 1 for spec in specs):
            raise SystemExit("--many takes TENANTSxMEMORIES, e.g. 1000x1000,10x100000")
        out["many"] = _many([(a, b) for a, b in specs], args)
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
