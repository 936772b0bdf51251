"""FTS5 segment merging on a store (``maintenance.fts_merge``): segments per index before and
after, and how long each bounded step holds the write lock.

Usage: python -m bench.fts_merge STATE_DB [--pages N]
(works on STATE_DB in place: give it a copy, e.g. of bench/recall_scale.py's cached 100k
store). Prints, per index, the segments before/after, the steps, and the step time's
median, p95 and max in ms (wall: the write lock is held that long) and its CPU time, then a
second run's steps (0: nothing left to merge).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from memory_core.db.fts import FTS_TABLES
from memory_core.db.sqlite import Connection, connect
from memory_core.maintenance.fts_merge import MERGE_PAGES, merge_fts, merge_step


def segments(conn: Connection, fts: str) -> int:
    return int(conn.execute(f"SELECT count(DISTINCT segid) FROM {fts}_idx").fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("state_db", type=Path)
    parser.add_argument("--pages", type=int, default=MERGE_PAGES)
    args = parser.parse_args()
    conn = connect(args.state_db)
    before = {fts: segments(conn, fts) for fts in FTS_TABLES}
    held: dict[str, list[float]] = {fts: [] for fts in FTS_TABLES}

    cpu: dict[str, list[float]] = {fts: [] for fts in FTS_TABLES}

    def timed(c: Connection, fts: str, pages: int) -> bool:
        started, cpu_started = time.perf_counter(), time.thread_time()
        merged = merge_step(c, fts, pages)
        held[fts].append((time.perf_counter() - started) * 1000)
        cpu[fts].append((time.thread_time() - cpu_started) * 1000)
        return merged

    started = time.perf_counter()
    steps = merge_fts(conn, pages=args.pages, step=timed)
    total = time.perf_counter() - started
    print(f"pages per step {args.pages}; whole run {total:.2f} s")
    print("index          segments  steps  lock held ms p50   p95    max  CPU ms p50    max")
    for fts in FTS_TABLES:
        ms = sorted(held[fts])
        p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        print(f"{fts:14} {before[fts]:>3} -> {segments(conn, fts):<3} {steps[fts]:>5}  "
              f"{statistics.median(ms):>15.1f} {p95:>6.1f} {max(ms):>6.1f} "
              f"{statistics.median(cpu[fts]):>11.1f} {max(cpu[fts]):>6.1f}")
    print("second run, steps:", merge_fts(conn, pages=args.pages))
    conn.close()


if __name__ == "__main__":
    main()
