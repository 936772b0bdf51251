"""End-to-end throughput of the post-turn pipeline through the queue (a script, not a test).

Example:
    .venv/bin/python bench/pipeline.py --text locomo --embedders fastembed,hash
    .venv/bin/python bench/pipeline.py --text locomo --embedders fastembed --windows 5,0
    .venv/bin/python bench/pipeline.py --text locomo --embedders fastembed --quantize none,int8
    .venv/bin/python bench/pipeline.py --text generated --turns 10000 --brokers embedded,redis

For each broker x embedder x batching window: a fresh data directory, a real worker pool
(``--processes`` real processes x ``--threads`` threads, started as ``mnemo worker`` starts
them), then ``Memory.after_turn`` for every turn (one message per turn) and a wait until
every turn is recorded and every queue is empty (record_turn, which runs extract_beliefs ->
ego_anchor + micro_consolidate inline: ``memory_core.jobs``, ``Job.inline``). Prints
turns/s from the first enqueue to the drained queue, the worker processes' CPU-seconds per
turn (utime + stime of the processes, model loading excluded: far less load-dependent than
turns/s on a shared machine) and the rate that CPU cost projects on 2 free cores.

``--text locomo`` (the default): the real LoCoMo dev conversations (3,435 turns of 27 words
on average; ``../shared/data/locomo``), each conversation one tenant, the conversations
interleaved turn by turn as concurrent chats would be. ``--text generated``: the short
template sentences of ``bench/write_path.py`` (a flattering shortcut: ~9 words, few
distinct words).

The single-writer bound (``bench/pipeline_bound.py``) is measured first: the same turns
through the same steps in one thread with no queue, timing how long ``memory_state.db``'s
write lock is held per turn; no number of workers records turns faster than its inverse.
Redis runs under a namespace of its own, deleted afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import redis  # noqa: E402
from locomo_data import load  # noqa: E402
from pipeline_bound import writer_bound  # noqa: E402
from write_path import generate  # noqa: E402

from memory_core import Memory  # noqa: E402
from memory_core.brokers import make_broker  # noqa: E402
from memory_core.chat.post_turn import TurnSender  # noqa: E402
from memory_core.db import migrate_stores, open_ops, open_state  # noqa: E402
from memory_core.jobs import QUEUES  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from workers.pool import WorkerPool  # noqa: E402

LOCOMO = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
MODEL_PATH = REPO_ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
TICKS = os.sysconf("SC_CLK_TCK")


def locomo_turns(path: Path, limit: int | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The LoCoMo turns as after_turn payloads, conversations interleaved; their tenants."""
    per_conv = []
    for conv in load(path):
        rows = []
        for session, turn in conv.turns():
            idx = int(turn.dia_id.split(":")[1])
            rows.append({"tenant": conv.tenant, "session_id": f"session_{session.number}",
                         "turn_uid": turn.dia_id, "index": idx, "speaker": turn.speaker,
                         "text": turn.text,
                         "occurred_at": (session.at + timedelta(seconds=idx)).isoformat()})
        per_conv.append(rows)
    turns = [conv[i] for i in range(max(map(len, per_conv))) for conv in per_conv
             if i < len(conv)]
    return turns[:limit], sorted({t["tenant"] for t in turns[:limit]})


def generated_turns(n: int) -> tuple[list[dict[str, Any]], list[str]]:
    tenants = ["bench0", "bench1", "bench2"]
    return [t.to_dict() for t in generate(n, tenants)], tenants


def _cpu_s(pids: list[int]) -> float:
    """utime + stime of the processes (all their threads), in seconds."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def _settle(pids: list[int], timeout_s: float = 120) -> None:
    """Wait until the workers have loaded their model and sit idle (CPU flat for 1 s)."""
    deadline = time.monotonic() + timeout_s
    last = _cpu_s(pids)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = _cpu_s(pids)
        if now - last < 0.15 * len(pids):
            return
        last = now


def _drained(broker: Any) -> bool:
    return all(s.ready == s.delayed == s.in_flight == 0 for s in broker.queue_stats(QUEUES))


def _wait(state: Any, broker: Any, turns: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        done = state.conn.execute("SELECT count(*) FROM turns").fetchone()[0]
        if done >= turns and _drained(broker):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"not drained after {timeout_s:.0f} s ({done} turns recorded)")
        time.sleep(0.05)


def _settings(tmp: str, broker: str, embedder: str, window_ms: int, quantize: str,
              args: argparse.Namespace) -> Settings:
    # Info level, JSON: the workers' batching fronts log their batch sizes when they stop
    # (one summary line per message too: a few percent of a hash turn's CPU, less with a model).
    kw: dict[str, Any] = {"data_dir": Path(tmp), "log_level": "info", "log_format": "json",
                          "embedder": embedder, "embed_batch_window_ms": window_ms,
                          "broker_url": args.redis_url if broker == "redis" else None}
    if embedder == "fastembed":
        kw.update(embed_model=MODEL_NAME, embed_model_path=Path(args.model_path).resolve(),
                  embed_threads=args.embed_threads, embed_quantize=quantize)
    return Settings.from_env({}, **kw)


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 (this process's and the worker processes' it starts) to ``path``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("wb") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _batch_sizes(log_path: Path) -> Counter[int]:
    """Texts per embedding batch, summed over the workers' ``embedding_batches`` lines."""
    sizes: Counter[int] = Counter()
    for line in log_path.read_text(errors="replace").splitlines():
        if '"embedding_batches"' in line:
            sizes.update({int(k): v for k, v in json.loads(line)["batch_sizes"].items()})
    return sizes


def run(broker_kind: str, embedder: str, window_ms: int, quantize: str,
        turns: list[dict[str, Any]], tenants: list[str],
        args: argparse.Namespace) -> dict[str, Any]:
    namespace = f"mnemo-bench-{uuid.uuid4().hex[:8]}" if broker_kind == "redis" else "mnemo"
    with tempfile.TemporaryDirectory() as tmp, _stderr_to(Path(tmp) / "workers.log"):
        settings = _settings(tmp, broker_kind, embedder, window_ms, quantize, args)
        configure_logging(settings, force=True)
        migrate_stores(settings)  # as `mnemo db migrate` (the pool's start migrates too)
        state = open_state(settings)
        for tenant in tenants:
            create_tenant(state.conn, tenant)
        options = {"namespace": namespace} if broker_kind == "redis" else {}
        broker = make_broker(settings, **options)
        pool = WorkerPool(settings, processes=args.processes, threads=args.threads,
                          grace_s=5, broker_options=options)
        pool.start()
        pids = [p.pid for p in pool._procs if p.pid]
        mem = Memory.open(settings)
        mem._sender = TurnSender(settings, namespace=namespace)
        try:
            _settle(pids)
            cpu0 = _cpu_s(pids)
            began = time.perf_counter()
            chat_cpu = time.process_time()
            for t in turns:
                mem.after_turn(t)
            chat_cpu = time.process_time() - chat_cpu
            enqueued = time.perf_counter()
            _wait(state, broker, len(turns), args.timeout)
            drained = time.perf_counter()
            worker_cpu = _cpu_s(pids) - cpu0
        finally:
            mem.close()
            pool.stop()
            broker.close()
        rows = {t: state.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("turns", "episodes", "beliefs", "entities")}
        ops = open_ops(settings)
        rows["audit_log"] = ops.conn.execute("SELECT count(*) FROM audit_log").fetchone()[0]
        ops.close()
        state.close()
        sizes = _batch_sizes(Path(tmp) / "workers.log")
    if broker_kind == "redis":
        client = redis.Redis.from_url(args.redis_url)
        keys = list(client.scan_iter(match=f"{namespace}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
    n = len(turns)
    return {"enqueue_s": enqueued - began, "drain_s": drained - enqueued,
            "total_s": drained - began, "turns_per_s": n / (drained - began),
            "cpu_ms_per_turn": worker_cpu / n * 1000, "chat_cpu_ms_per_turn": chat_cpu / n * 1000,
            "batch_sizes": sizes, **rows}


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", choices=("locomo", "generated"), default="locomo")
    parser.add_argument("--turns", type=int, default=None,
                        help="at most this many turns (generated: default 10,000)")
    parser.add_argument("--embedders", "--embedder", default="fastembed,hash")
    parser.add_argument("--windows", default="5",
                        help="batching windows in ms, comma-separated (0: no batching)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--embed-threads", type=int, default=1,
                        help="onnxruntime threads per worker process (fastembed)")
    parser.add_argument("--quantize", default="none",
                        help="fastembed model variants, comma-separated: none (fp32), int8 "
                             "(MNEMO_EMBED_QUANTIZE)")
    parser.add_argument("--brokers", default="embedded")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--model-path", default=str(MODEL_PATH))
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument("--no-bound", action="store_true", help="skip the single-writer bound")
    parser.add_argument("--only-bound", action="store_true", help="only the single-writer bound")
    parser.add_argument("--timeout", type=float, default=1800)
    return parser.parse_args()


def main() -> None:
    args = _parse()
    if args.text == "locomo":
        turns, tenants = locomo_turns(args.data, args.turns)
    else:
        turns, tenants = generated_turns(args.turns or 10_000)
    words = sum(len(t["text"].split()) for t in turns) / len(turns)
    print(f"{len(turns):,} {args.text} turns ({words:.1f} words on average), {len(tenants)} "
          f"tenants, {args.processes} worker processes x {args.threads} threads, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    if not args.no_bound:
        with tempfile.TemporaryDirectory() as tmp:
            b = writer_bound(Path(tmp), turns, tenants)
        print(f"single-writer bound: memory_state.db write lock held "
              f"{b['state_held_s'] / b['turns'] * 1000:.2f} ms per turn wall, "
              f"{b['state_held_cpu_s'] / b['turns'] * 1000:.2f} ms CPU "
              f"({b['state_tx'] / b['turns']:.1f} transactions) -> at most "
              f"{b['bound_turns_per_s']:,.0f} turns/s for any pool at this load, "
              f"{b['bound_cpu_turns_per_s']:,.0f} turns/s on a free core; one thread, no "
              f"queue, hash embedder: {b['one_thread_turns_per_s']:,.0f} turns/s, "
              f"{b['cpu_s'] / b['turns'] * 1000:.2f} CPU-ms per turn", flush=True)
    if args.only_bound:
        return
    for kind in args.brokers.split(","):
        for embedder in args.embedders.split(","):
            variants = args.quantize.split(",") if embedder == "fastembed" else ["none"]
            for quantize, window in itertools.product(
                    variants, (int(w) for w in args.windows.split(","))):
                r = run(kind, embedder, window, quantize, turns, tenants, args)
                projected = 2000 / r["cpu_ms_per_turn"]
                name = f"{embedder}/{quantize}" if quantize != "none" else embedder
                sizes = r["batch_sizes"]
                batches = sum(sizes.values())
                if batches:
                    mean = sum(k * v for k, v in sizes.items()) / batches
                    hist = ", ".join(f"{k}: {v}" for k, v in sorted(sizes.items()))
                    print(f"  texts per embedding batch: mean {mean:.2f} over {batches} "
                          f"batches ({hist})", flush=True)
                print(f"{kind:8s} {name:14s} window {window} ms: "
                      f"{r['turns_per_s']:,.1f} turns/s  "
                      f"worker CPU {r['cpu_ms_per_turn']:.2f} ms/turn -> "
                      f"{projected:,.0f} turns/s on 2 free cores  "
                      f"(after_turn {r['chat_cpu_ms_per_turn']:.2f} CPU-ms/turn; enqueue "
                      f"{r['enqueue_s']:.1f} s, drain after the last enqueue "
                      f"{r['drain_s']:.1f} s)  rows: turns {r['turns']}, episodes "
                      f"{r['episodes']}, beliefs {r['beliefs']}, entities {r['entities']}, "
                      f"audit {r['audit_log']}", flush=True)


if __name__ == "__main__":
    main()
