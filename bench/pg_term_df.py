"""A common term's document frequency on the Postgres primary, on a ``TermStats`` cache miss:
counted in full (the ``T_fts_v`` view, as before) against counted up to the planner's cap
(``pg_fts.doc_counts``: the planner only asks whether a term is that common).

Usage: python -m bench.pg_term_df --postgres postgresql://USER@HOST[:PORT]/DB
(makes and drops a database of its own on that server). Writes synthetic postings for one
tenant's tokens straight into ``episodes_fts_p`` (only the postings are read here), one
token per document frequency, then VACUUM ANALYZE (a long-lived primary's tables are
vacuumed: index-only scans). Prints, per document frequency, the median and p95 wall time
of each count over ``--runs`` runs at the client, and the median of the server's execution
time (``EXPLAIN ANALYZE``: no round trip, no client scheduling) over as many runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

import psycopg

from memory_core.backends import parse_backend_url
from memory_core.db import pg_fts
from memory_core.db.fts import tenant_prefix
from memory_core.db.pg_store import PgDatabase
from memory_core.model.tenants import create_tenant
from memory_core.recall.strategy import RecallStrategy

DFS = (1_000, 10_000, 50_000, 200_000)


def _ms(fn: object, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def _server_ms(raw: psycopg.Connection, sql: str, params: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        plan = raw.execute(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {sql}",
                           params).fetchone()[0]  # type: ignore[index]
        times.append(float(plan[0]["Execution Time"]))
    return statistics.median(times)


def run(url: str, runs: int, cap: int) -> None:
    db = PgDatabase(parse_backend_url("postgres", "--postgres", url), None)
    db.migrate()
    create_tenant(db.conn, "t1")
    raw = db.conn.raw
    prefix = tenant_prefix("t1")
    for i, df in enumerate(DFS):
        raw.execute("INSERT INTO episodes_fts_p (token, doc, tf, len) SELECT %s, d, 1, 20 "
                    "FROM generate_series(%s::bigint, %s::bigint) AS d",
                    (f"{prefix}common{df}", i * 10_000_000 + 1, i * 10_000_000 + df))
    for rare in range(50):  # other tokens around them in the index
        raw.execute("INSERT INTO episodes_fts_p (token, doc, tf, len) SELECT %s, d, 1, 20 "
                    "FROM generate_series(1, 200) AS d", (f"{prefix}rare{rare}",))
    raw.commit()
    raw.autocommit = True
    raw.execute("VACUUM ANALYZE episodes_fts_p")
    raw.autocommit = False
    print(f"cap {cap} (fts_common_df); {runs} runs each; client wall ms median / p95, "
          "server execution ms median")
    full_sql = "SELECT term, doc FROM episodes_fts_v WHERE term IN (%s)"
    capped_sql = pg_fts._DOC_COUNTS.format(t="episodes")
    for df in DFS:
        token = f"{prefix}common{df}"

        def full(t: str = token) -> object:
            return raw.execute(full_sql, (t,)).fetchall()

        def capped(t: str = token) -> object:
            return pg_fts.doc_counts(db.conn, "episodes", [t], cap)

        assert full()[0][1] == df and capped()[token] == min(df, cap)  # type: ignore[index]
        f50, f95 = _ms(full, runs)
        c50, c95 = _ms(capped, runs)
        fs = _server_ms(raw, full_sql, (token,), runs)
        cs = _server_ms(raw, capped_sql, {"toks": [token], "cap": cap}, runs)
        print(f"df {df:>7}: full count {f50:7.2f} / {f95:7.2f} (server {fs:7.2f})   "
              f"capped {c50:6.2f} / {c95:6.2f} (server {cs:6.2f})")
    raw.rollback()
    db.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--postgres", required=True, help="postgresql://USER@HOST[:PORT]/DB")
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    cap = RecallStrategy().fts_common_df
    name = f"mnemo_bench_df_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.postgres, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        run(args.postgres.rsplit("/", 1)[0] + f"/{name}", args.runs, cap)
    finally:
        with psycopg.connect(args.postgres, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
