"""The CPU budget of one LoCoMo turn on the write path, part by part (a script, not a test).

Example:
    .venv/bin/python bench/embed_budget.py
    .venv/bin/python bench/embed_budget.py --turns 400 --sizes 1,32 --threads 1 --rounds 3

1. The steps of each turn run in one thread exactly as the actors call them
   (``workers.steps``: record_turn -> extract_beliefs -> ego_anchor + micro_consolidate,
   with the audit rows), no queue, hash embedder: CPU-ms per turn per step, and every
   ``embed`` call recorded: texts per turn by kind, and their model tokens.
2. Those recorded texts replayed through fastembed (all-MiniLM-L6-v2 from ``../shared``,
   fp32 and its int8 copy) as a worker's batching front would hand them over: consecutive
   texts in batches of ``--sizes``, each batch deduplicated and cut into runs of similar
   length (``similar_length_runs``), with 1 or 2 onnxruntime threads. CPU time of the
   process (``time.process_time``: both onnxruntime threads count, spinning included), per
   turn; configurations interleaved round by round, medians.
3. int8 against fp32: cosine of the two vectors of each text, and how many of the fp32
   top-10 turns of each LoCoMo question (dense, the conversation's turns) int8 keeps.

CPU time is inflated on a loaded machine (cores shared with other processes' threads run
slower per instruction): compare the rows of one run, not figures of different runs. Each
section states the GFLOP/s that one thread's float32 matrix product (384x1536, the model's
feed-forward shape) reached in CPU time at that moment, so a figure can be scaled to a
machine where that product runs at another speed. The extractor's rules compile on first
use; they are warmed on the turns first (a one-off per process, reported apart).
"""

from __future__ import annotations

import argparse
import os
import re

# One BLAS thread for the calibration below (set before numpy loads).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
for extra in (REPO_ROOT, REPO_ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import numpy as np  # noqa: E402
from locomo_data import load  # noqa: E402
from pipeline import LOCOMO, MODEL_NAME, MODEL_PATH, locomo_turns  # noqa: E402

from memory_core.embedders import FastEmbedEmbedder  # noqa: E402
from memory_core.embedders.base import Embedder, WrappingEmbedder, check_texts  # noqa: E402
from memory_core.embedders.batching import similar_length_runs  # noqa: E402
from memory_core.model.episodes import episode_text  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from workers.audit import report  # noqa: E402
from workers.context import WorkerContext  # noqa: E402
from workers.steps import STEPS  # noqa: E402


class Recorder(WrappingEmbedder):
    """Keeps every call's texts (and the step that made it), then embeds with ``inner``."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.calls: list[tuple[str, list[str]]] = []
        self.step = ""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        if items:
            self.calls.append((self.step, items))
        return self.inner.embed(items)


def sgemm_gflops(seconds: float = 1.0) -> float:
    """GFLOP/s of one thread's float32 (128x384) @ (384x1536) in CPU time."""
    a = np.random.default_rng(0).standard_normal((128, 384), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((384, 1536), dtype=np.float32)
    flops, done, began = 2 * 128 * 384 * 1536, 0, time.process_time()
    while time.process_time() - began < seconds:
        a @ b
        done += 1
    return done * flops / (time.process_time() - began) / 1e9


def warm_extractor(turns: list[dict[str, Any]]) -> float:
    """Run the extractor over the turns once (its rules compile on first use): CPU-s."""
    from memory_core.extraction.api import candidates_for
    from memory_core.model.turns import TurnInput, check_turn
    began = time.process_time()
    for turn in turns:
        candidates_for(None, check_turn(TurnInput.from_dict(turn), 100_000))
    return time.process_time() - began


def run_steps(turns: list[dict[str, Any]], tenants: list[str],
              data_dir: Path) -> tuple[dict[str, float], Recorder, int]:
    """The turns through the steps in one thread (hash): CPU-s per step, the recorder, and
    the vectors written."""
    settings = Settings.from_env({}, data_dir=data_dir, log_level="error",
                                 embed_batch_window_ms=0)
    ctx = WorkerContext.open(settings)
    recorder = Recorder(ctx.index.embedder)
    ctx.index.embedder = recorder
    written = [0]
    upsert = ctx.index.upsert

    def counting_upsert(conn: Any, base: str, rows: Any) -> Any:
        rows = list(rows)
        written[0] += len(rows)
        return upsert(conn, base, rows)

    ctx.index.upsert = counting_upsert  # type: ignore[method-assign]
    cpu: dict[str, float] = defaultdict(float)
    try:
        for tenant in tenants:
            create_tenant(ctx.state.conn, tenant)
        for turn in turns:
            todo: list[tuple[str, dict[str, Any]]] = [
                ("record_turn", {"tenant": turn["tenant"], "turn": dict(turn)})]
            while todo:
                name, kwargs = todo.pop(0)
                recorder.step = name
                began = time.process_time()
                result = STEPS[name](ctx, **kwargs)
                report(ctx.ops, result.audit)
                cpu[name] += time.process_time() - began
                todo.extend(result.follow_ups)
    finally:
        ctx.close()
    return cpu, recorder, written[0]


def replay(embedder: Embedder, texts: list[str], size: int) -> np.ndarray:
    """Embed ``texts`` in batches of ``size`` as the batching front runs a batch."""
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    for start in range(0, len(texts), size):
        chunk = texts[start:start + size]
        unique = list(dict.fromkeys(chunk))
        rows = np.empty((len(unique), embedder.dim), dtype=np.float32)
        for run in similar_length_runs(unique):
            rows[run] = embedder.embed([unique[i] for i in run])
        where = {t: i for i, t in enumerate(unique)}
        out[start:start + len(chunk)] = rows[[where[t] for t in chunk]]
    return out


# The episode text's day label (``episodes.episode_text``): "[8 May 2023] ".
_DATE = re.compile(r"^\[[^\]]*\] ")


def _tokens(texts: Sequence[str], model_path: Path) -> list[int]:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(model_path / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return [len(e.ids) for e in tok.encode_batch(list(texts))]


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def section_steps(turns: list[dict[str, Any]], tenants: list[str],
                  model_path: Path) -> list[str]:
    warm = warm_extractor(turns)
    with tempfile.TemporaryDirectory() as tmp:
        cpu, rec, written = run_steps(turns, tenants, Path(tmp))
    n = len(turns)
    print(f"\n1. steps in one thread, hash embedder, no queue ({n} turns; extractor warmed "
          f"first: {warm:.2f} CPU-s, once per process), sgemm {sgemm_gflops():.1f} GFLOP/s, "
          f"load average {os.getloadavg()[0]:.1f}: CPU-ms per turn")
    for name, seconds in sorted(cpu.items(), key=lambda kv: -kv[1]):
        print(f"   {name:18s} {seconds / n * 1000:6.2f}")
    print(f"   {'total':18s} {sum(cpu.values()) / n * 1000:6.2f}")
    texts = [t for _, call in rec.calls for t in call]
    per_step = Counter(step for step, call in rec.calls for _ in call)
    distinct = len(set(texts))
    print(f"   embed calls {len(rec.calls) / n:.2f} per turn, texts {len(texts) / n:.3f} per "
          f"turn ({', '.join(f'{s} {c / n:.3f}' for s, c in per_step.most_common())}); "
          f"distinct texts {distinct / n:.3f} per turn; vectors written {written / n:.3f} "
          "per turn")
    lengths = _tokens(texts, model_path)
    by_step: dict[str, list[int]] = defaultdict(list)
    i = 0
    for step, call in rec.calls:
        by_step[step].extend(lengths[i:i + len(call)])
        i += len(call)
    print(f"   model tokens per turn {sum(lengths) / n:.1f} (with [CLS]/[SEP]); per text "
          f"p50 {_pct(lengths, 50)}, p95 {_pct(lengths, 95)}, max {max(lengths)}; "
          f"over 128: {sum(x > 128 for x in lengths)}, over 256: "
          f"{sum(x > 256 for x in lengths)} of {len(lengths)}; by step: "
          + ", ".join(f"{s} {statistics.mean(v):.1f} tokens x {len(v)}"
                      for s, v in by_step.items()))
    return texts


def section_embedding(texts: list[str], n_turns: int, args: argparse.Namespace,
                      cache: Path, label: str = "") -> dict[str, np.ndarray]:
    models: dict[tuple[str, int], FastEmbedEmbedder] = {}
    for variant in args.variants.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            model = FastEmbedEmbedder(MODEL_NAME, model_path=str(args.model_path),
                                      cache_dir=str(cache), threads=threads, quantize=variant
                                      if variant == "int8" else "none", batch_size=64)
            model.load()
            models[(variant, threads)] = model
    sizes = [int(s) for s in args.sizes.split(",")]
    cpu: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    wall: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for (variant, threads), model in models.items():
            for size in sizes:
                began, began_cpu = time.perf_counter(), time.process_time()
                vectors[variant] = replay(model, texts, size)
                cpu[(variant, threads, size)].append(time.process_time() - began_cpu)
                wall[(variant, threads, size)].append(time.perf_counter() - began)
    tokens = sum(_tokens(texts, args.model_path))
    print(f"\n2. embedding the recorded texts{label} ({len(texts)} texts of {n_turns} turns, "
          f"{tokens / n_turns:.1f} model tokens per turn), median of {args.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.1f}, sgemm {sgemm_gflops():.1f} GFLOP/s:")
    print("| model | ort threads | batch | CPU-ms per turn | CPU-ms per text | CPU-us per "
          "token | wall ms per turn | vs fp32 1 thread batch 1 |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|")
    base = statistics.median(cpu[(args.variants.split(",")[0], 1, sizes[0])])
    for (variant, threads, size), values in cpu.items():
        med = statistics.median(values)
        print(f"| {variant} | {threads} | {size} | {med / n_turns * 1000:.2f} | "
              f"{med / len(texts) * 1000:.2f} | {med / tokens * 1e6:.0f} | "
              f"{statistics.median(wall[(variant, threads, size)]) / n_turns * 1000:.2f} | "
              f"{med / base:.2f} |")
    return {variant: model for (variant, _), model in models.items()}  # type: ignore[misc]


def section_quality(models: dict[str, Any], args: argparse.Namespace) -> None:
    fp32, int8 = models["fp32"], models["int8"]
    convs = load(args.data)[:args.quality_conversations]
    cos: list[float] = []
    kept: list[float] = []
    for conv in convs:
        docs = [episode_text(t.speaker, t.text, s.at.isoformat()) for s, t in conv.turns()]
        questions = [q.text for q in conv.questions]
        a, b = fp32.embed(docs), int8.embed(docs)
        cos.extend(np.einsum("ij,ij->i", a, b).tolist())
        qa, qb = fp32.embed(questions), int8.embed(questions)
        top_a = np.argsort(-(qa @ a.T), axis=1)[:, :10]
        top_b = np.argsort(-(qb @ b.T), axis=1)[:, :10]
        kept.extend(len(set(x) & set(y)) / 10 for x, y in zip(top_a, top_b, strict=True))
    print(f"\n3. int8 against fp32 ({len(convs)} conversations, {len(cos)} turns, {len(kept)} "
          f"questions): cosine of the two vectors of a turn mean {statistics.mean(cos):.4f}, "
          f"p5 {_pct(cos, 5):.4f}, min {min(cos):.4f}; fp32's dense top-10 kept by int8: "
          f"mean {statistics.mean(kept):.3f}, p5 {_pct(kept, 5):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--sizes", default="1,8,32,64")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--variants", default="fp32,int8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quality-conversations", type=int, default=2)
    parser.add_argument("--model-path", type=Path, default=MODEL_PATH)
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument("--without-date", action="store_true",
                        help="also embed the texts without the episode's date prefix")
    args = parser.parse_args()
    turns, tenants = locomo_turns(args.data, args.turns)
    print(f"{len(turns)} LoCoMo turns, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    texts = section_steps(turns, tenants, args.model_path)
    with tempfile.TemporaryDirectory() as cache:
        models = section_embedding(texts, len(turns), args, Path(cache))
        if args.without_date:
            section_embedding([_DATE.sub("", t) for t in texts], len(turns), args,
                              Path(cache), " without the date prefix")
        if {"fp32", "int8"} <= set(models):
            section_quality(models, args)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
