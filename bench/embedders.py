"""Throughput of the embedders on short, realistic chat-memory texts (a script, not a test).

Example:
    .venv/bin/python bench/embedders.py
    .venv/bin/python bench/embedders.py --n 2000 --sweep 16,32,64,128,256

Prints texts/s (median of ``--runs`` runs) for the hash embedder and for the fastembed
embedder loaded from a local model folder, and the batch size fastembed uses.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from memory_core.embedders import FastEmbedEmbedder, HashEmbedder  # noqa: E402
from memory_core.embedders import hash as hash_module  # noqa: E402

DEFAULT_MODEL_PATH = REPO_ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

_NAMES = ["Ana", "Ben", "Chloé", "Dmitri", "Emeka", "Fatima", "Gus", "Hana", "Ivo", "Jun"]
_PLACES = ["Lisbon", "Berlin", "Osaka", "Nairobi", "Toronto", "Porto", "Kraków", "Austin"]
_THINGS = [
    "the garden project",
    "my thesis",
    "the kitchen renovation",
    "our wedding",
    "the Rust rewrite",
    "the marathon",
    "a sourdough starter",
    "the quarterly report",
]
_TEMPLATES = [
    "I live in {place} now, moved there last {month}.",
    "My sister {name} works at a hospital in {place}.",
    "Remind me to call {name} about {thing} on {day}.",
    "I'm allergic to peanuts, so please keep that in mind for recipes.",
    "{name} and I started {thing} in {month}; it's going slowly.",
    "Can you summarise what we decided about {thing}?",
    "I prefer tea over coffee in the mornings, especially green tea.",
    "Our team meeting moved to {day} at 10am because {name} is travelling to {place}.",
    "I finished {thing} yesterday and I'm really proud of it!",
    "Don't suggest flights through {place}, I had a terrible layover there.",
    "What was the name of the restaurant {name} recommended in {place}?",
    "My daughter turns {age} in {month}; she loves dinosaurs and painting.",
]
_MONTHS = ["January", "March", "May", "July", "September", "November"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]


def make_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` short chat-style texts; the same list for the same ``n`` and ``seed``."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        template = rng.choice(_TEMPLATES)
        texts.append(
            template.format(
                name=rng.choice(_NAMES),
                place=rng.choice(_PLACES),
                thing=rng.choice(_THINGS),
                month=rng.choice(_MONTHS),
                day=rng.choice(_DAYS),
                age=rng.randint(3, 12),
            )
        )
    return texts


def median_rate(run: Callable[[], object], n: int, runs: int, before: Callable[[], None]) -> float:
    """Median texts/s of ``runs`` timed calls of ``run`` (``before`` runs untimed first)."""
    rates = []
    for _ in range(runs):
        before()
        started = time.perf_counter()
        run()
        rates.append(n / (time.perf_counter() - started))
    return statistics.median(rates)


def bench_hash(texts: Sequence[str], runs: int) -> None:
    embedder = HashEmbedder()
    n = len(texts)
    cold = median_rate(
        lambda: embedder.embed(texts), n, runs, hash_module._cached_blake2b_64.cache_clear
    )
    warm = median_rate(lambda: embedder.embed(texts), n, runs, lambda: None)
    print(f"hash      {embedder.identity:<40} {cold:>10,.0f} texts/s (cold token cache)")
    print(f"hash      {embedder.identity:<40} {warm:>10,.0f} texts/s (warm token cache)")


def bench_fastembed(
    texts: Sequence[str], runs: int, model_name: str, model_path: str, sweep: Sequence[int]
) -> None:
    embedder = FastEmbedEmbedder(model_name=model_name, model_path=model_path)
    started = time.perf_counter()
    embedder.load()
    print(f"fastembed load {time.perf_counter() - started:.2f}s  identity {embedder.identity}")
    default = embedder.batch_size
    for batch_size in sweep or [default]:
        embedder.batch_size = batch_size
        rate = median_rate(lambda: embedder.embed(texts), len(texts), runs, lambda: None)
        marker = "  <- default" if batch_size == default else ""
        print(f"fastembed batch_size={batch_size:<5} {rate:>10,.1f} texts/s{marker}")
    print(f"fastembed default batch_size: {default}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="number of texts (default 1000)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs, median kept")
    parser.add_argument("--model-path", default=str(DEFAULT_MODEL_PATH))
    parser.add_argument("--model-name", default=DEFAULT_MODEL_NAME)
    parser.add_argument(
        "--sweep", default="", help="comma-separated fastembed batch sizes to compare"
    )
    parser.add_argument("--skip-fastembed", action="store_true")
    args = parser.parse_args(argv)

    texts = make_texts(args.n)
    mean_words = statistics.mean(len(t.split()) for t in texts)
    print(f"{len(texts)} texts, {mean_words:.1f} words on average; {os.cpu_count()} CPUs")
    bench_hash(texts, args.runs)
    if not args.skip_fastembed:
        sweep = [int(part) for part in args.sweep.split(",") if part.strip()]
        bench_fastembed(texts, args.runs, args.model_name, args.model_path, sweep)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
