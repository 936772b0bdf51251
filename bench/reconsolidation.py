"""global_reconsolidation at scale: time per partition, total time, peak RSS (a script).

Example:
    nice -n 10 .venv/bin/python bench/reconsolidation.py
    .venv/bin/python bench/reconsolidation.py --sizes 20000,100000 --partitions 16

For each size (beliefs; subjects = beliefs / 10, turns = beliefs / 4, over 4 tenants) it
builds a state db in a fresh process (``bench/recon_corpus.py``: the real schema, rows as the
write path stores them, hash-embedder vectors of dim 16, a few defects to repair), then runs
the whole partition chain in another fresh process, as the chained maintenance tasks would
(one ``global_reconsolidation`` call per partition; a worker runs them one after another),
and reports each partition's time, the total, and that process's peak RSS (``VmHWM``) and
peak anonymous memory (``RssAnon`` sampled after each partition): file pages SQLite reads
through its memory map (``MNEMO_SQLITE_MMAP_MB``, 256 by default) count in RSS too.
A second run of the same chain (the next day's window) shows the cost on a memory that is
already reconsolidated.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
for path in (REPO_ROOT, REPO_ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from memory_core.db import open_ops, open_state  # noqa: E402
from memory_core.embedders import HashEmbedder  # noqa: E402
from memory_core.maintenance.base import JobEnv  # noqa: E402
from memory_core.maintenance.reconsolidation import global_reconsolidation  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from memory_core.vectors import VectorIndex  # noqa: E402

DIM = 16
NOW = datetime(2024, 6, 1, tzinfo=UTC)


def _settings(data_dir: str, partitions: int = 16, batch: int = 500,
              mmap_mb: int | None = None) -> Settings:
    extra = {} if mmap_mb is None else {"sqlite_mmap_mb": mmap_mb}
    return Settings.from_env({}, data_dir=Path(data_dir), hash_dim=DIM,
                             recon_partitions=partitions, recon_batch=batch, **extra)


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def cmd_build(data_dir: str, beliefs: int) -> dict[str, Any]:
    from recon_corpus import build

    settings = _settings(data_dir)
    db = open_state(settings)
    try:
        started = time.perf_counter()
        made = build(db.conn, VectorIndex(HashEmbedder(dim=DIM)), beliefs)
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = sum(p.stat().st_size for p in Path(data_dir).glob("memory_state.db*"))
        return {**made, "build_s": round(time.perf_counter() - started, 1),
                "state_db_mb": round(size / 2**20)}
    finally:
        db.close()


def _chain(env: JobEnv, run_id: str, partitions: int) -> dict[str, Any]:
    times, anon, totals = [], [], {}
    started, cpu = time.perf_counter(), time.process_time()
    for p in range(partitions):
        t = time.perf_counter()
        report = global_reconsolidation(env, run_id=run_id, partition=p, partitions=partitions)
        times.append(round(time.perf_counter() - t, 2))
        anon.append(_status_mb("RssAnon"))
        for k, v in report.counts.items():
            if k != "partition" and isinstance(v, int):
                totals[k] = totals.get(k, 0) + v
    return {"total_s": round(time.perf_counter() - started, 1),
            "cpu_s": round(time.process_time() - cpu, 1), "partition_s": times,
            "rss_anon_mb_after_each": anon, "counts": totals}


def cmd_run(data_dir: str, partitions: int, batch: int, mmap_mb: int) -> dict[str, Any]:
    settings = _settings(data_dir, partitions, batch, mmap_mb)
    state, ops = open_state(settings), open_ops(settings)
    try:
        env = JobEnv(settings, state, ops, VectorIndex(HashEmbedder(dim=DIM)), NOW, "bench")
        first = _chain(env, "bench-1", partitions)
        second = _chain(env, "bench-2", partitions)
        return {"partitions": partitions, "batch": batch, "mmap_mb": settings.sqlite_mmap_mb,
                "first": first, "second": second,
                "peak_rss_mb": _status_mb("VmHWM"),
                "peak_rss_anon_mb": max(first["rss_anon_mb_after_each"]
                                        + second["rss_anon_mb_after_each"])}
    finally:
        state.close()
        ops.close()


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"{args[0]} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _print(rows: list[dict[str, Any]]) -> None:
    print(f"{'beliefs':>9} {'subjects':>8} {'turns':>7} {'db MB':>6} {'total s':>8} "
          f"{'cpu s':>6} {'max part s':>10} {'2nd run s':>9} {'peak RSS MB':>11} "
          f"{'peak anon MB':>12}")
    for r in rows:
        run = r["run"]
        print(f"{r['beliefs']:>9,} {r['subjects']:>8,} {r['turns']:>7,} "
              f"{r['state_db_mb']:>6} {run['first']['total_s']:>8} "
              f"{run['first']['cpu_s']:>6} "
              f"{max(run['first']['partition_s']):>10} {run['second']['total_s']:>9} "
              f"{run['peak_rss_mb']:>11} {run['peak_rss_anon_mb']:>12}")
    for r in rows:
        print(f"\n{r['beliefs']:,} beliefs, seconds per partition: "
              f"{r['run']['first']['partition_s']}")
        print(f"  repairs: {r['run']['first']['counts']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd")
    b = sub.add_parser("build")
    b.add_argument("dir")
    b.add_argument("beliefs", type=int)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("partitions", type=int)
    r.add_argument("batch", type=int)
    r.add_argument("mmap_mb", type=int)
    parser.add_argument("--sizes", default="100000,1000000", help="beliefs per corpus")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--mmap-mb", type=int, default=Settings().sqlite_mmap_mb,
                        help="MNEMO_SQLITE_MMAP_MB of the measured process (default: mnemo's)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if args.cmd == "build":
        print(json.dumps(cmd_build(args.dir, args.beliefs)))
        return
    if args.cmd == "run":
        print(json.dumps(cmd_run(args.dir, args.partitions, args.batch, args.mmap_mb)))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="mnemo-recon-bench-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            data_dir = str(Path(tmp) / f"n{size}")
            built = _child("build", data_dir, str(size))
            run = _child("run", data_dir, str(args.partitions), str(args.batch),
                         str(args.mmap_mb))
            rows.append({"beliefs": size, **built, "run": run})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    _print(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
