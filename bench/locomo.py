"""LoCoMo evidence recall of mnemo against plain-retrieval baselines (a script, not a test).

Example:
    .venv/bin/python bench/locomo.py
    .venv/bin/python bench/locomo.py --embedder fastembed \\
        --model-path ../shared/models/all-MiniLM-L6-v2-onnx --json-out /tmp/locomo.json \\
        --embed-cache /tmp/locomo_fastembed.sqlite --data-dir /tmp/locomo-fe

Ingests each conversation turn by turn through the workers' write path (one tenant per
conversation, turn time = session date), recalls every category 1-4 question, and prints
evidence Recall@5/@10/@20 and All@10 per category for mnemo and for the baselines computed
here on the same machine (FTS5 porter bm25 over turns, dense over turns with the same
embedder, their RRF), with recall latency p50/p95 split into query embedding and the rest,
the rest against the FTS5 baseline's p95 and broken into its parts (``timings_ms``). A
fact counts as its source turn(s): row ``mnemo`` takes the turns in prompt order (facts
first, then evidence), row ``mnemo_evidence`` the evidence items alone. ``--embed-cache``
keeps the model's vectors in a file (``bench/embed_cache.py``): a rerun embeds nothing new,
and only the query-embedding part of latency (reported apart) is flattered. The baselines are
timed after mnemo's recall-log row is written (``flush_recall_log``, outside every timed
call): until session 8 the row was built on the log's thread while they ran, which doubled
the FTS5 baseline's wall p95 (3.3 against 1.4-1.6 ms; its CPU time was the same).
The metric is described in ../shared/data/locomo/README.md. The last line is
``overall R@10 mnemo=X evidence=X best_baseline=Y``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for extra in (REPO_ROOT, REPO_ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from bench_report import run_and_report  # noqa: E402
from embed_cache import CachedEmbedder  # noqa: E402
from locomo_baselines import METHODS, for_conversation  # noqa: E402
from locomo_data import CATEGORIES, Scores, load  # noqa: E402
from locomo_ingest import ingest  # noqa: E402

from memory_core import Budget, Memory  # noqa: E402
from memory_core.db import migrate_stores  # noqa: E402
from memory_core.embedders.factory import make_embedder  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.recall.result import RecallResult  # noqa: E402
from memory_core.recall.strategy import RecallStrategy, get_strategy  # noqa: E402
from memory_core.settings import Settings  # noqa: E402

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
BUDGET = Budget(items=40, tokens=1_000_000)  # enough items for 20 turns; tokens not binding


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--embedder", choices=("hash", "fastembed"), default="hash")
    p.add_argument("--model-path", type=Path, default=None)
    p.add_argument("--quantize", choices=("none", "int8"), default="none",
                   help="fastembed: MNEMO_EMBED_QUANTIZE (int8 needs --model-path)")
    p.add_argument("--strategy", default="default", help="recall preset name")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                   help="override a strategy field, e.g. --set feedback_rank_budget=2000 "
                        "(repeatable; for tuning on categories)")
    p.add_argument("--resident-rows", type=int, default=None,
                   help="MNEMO_RECALL_RESIDENT_ROWS (0: keyword lists from the store)")
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--embed-cache", type=Path, default=None,
                   help="keep vectors in this SQLite file and reuse them (bench/embed_cache.py)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="keep the databases here (default: a temporary folder); an existing "
                        "store is reused, not re-ingested")
    return p.parse_args(argv)


def _settings(args: argparse.Namespace, data_dir: Path) -> Settings:
    kw: dict = {"data_dir": data_dir, "embedder": args.embedder, "log_level": "warning"}
    if args.embedder == "fastembed":
        kw["embed_model"] = MODEL_NAME
        if args.model_path:
            kw["embed_model_path"] = args.model_path.resolve()
        kw["embed_quantize"] = args.quantize
    if getattr(args, "resident_rows", None) is not None:  # longmemeval.py has no such flag
        kw["recall_resident_rows"] = args.resident_rows
    return Settings.from_env({}, **kw)


def _strategy(args: argparse.Namespace) -> RecallStrategy:
    changes = {}
    for item in args.set:
        field, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: write FIELD=JSON, e.g. feedback_seeds=4")
        changes[field] = json.loads(value)
    return get_strategy(args.strategy).with_(**changes) if changes else get_strategy(
        args.strategy)


def result_turns(result: RecallResult, *, facts: bool = True) -> list[list[str]]:
    """The turns of a result in the order the prompt shows them: each fact counts as its
    source turn(s) (``facts``), then each evidence item as its turns."""
    return [*(list(f.turn_uids) for f in (result.facts if facts else ())),
            *(list(i.turn_uids) for i in result.items)]


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] \
        if len(values) > 1 else values[0]


def run(args: argparse.Namespace, data_dir: Path) -> dict:
    settings = _settings(args, data_dir)
    configure_logging(settings)
    embedder = make_embedder(settings)
    if args.embed_cache:
        embedder = CachedEmbedder(embedder, args.embed_cache)
    convs = load(args.data)
    scores = {name: Scores() for name in ("mnemo", "mnemo_evidence", *METHODS)}
    lat: dict[str, list[float]] = {"embed": [], "rest": [], **{m: [] for m in METHODS},
                                   "cpu": [], "fts5_cpu": []}
    parts: dict[str, list[float]] = {}
    started = time.perf_counter()
    strategy = _strategy(args)
    fresh = not (data_dir / "memory_state.db").exists()
    migrate_stores(settings)  # as `mnemo db migrate`: Memory.open only checks the schemas
    paths = {ingest(settings, conv, embedder) for conv in convs} if fresh else {"reused"}
    ingest_s = time.perf_counter() - started
    with Memory.open(settings, embedder=embedder) as mem, tempfile.TemporaryDirectory() as tmp:
        for conv in convs:
            base = for_conversation(conv, embedder, Path(tmp))
            for q in conv.questions:
                t0, c0 = time.perf_counter(), time.thread_time()
                result = mem.recall(q.text, tenant=conv.tenant, budget=BUDGET,
                                    strategy=strategy)
                wall = (time.perf_counter() - t0) * 1000
                lat["cpu"].append((time.thread_time() - c0) * 1000)
                embed_ms = result.timings_ms.get("embed_ms", 0.0)
                lat["embed"].append(embed_ms)
                lat["rest"].append(wall - embed_ms)
                for part, ms in result.timings_ms.items():
                    if part not in ("embed_ms", "total_ms"):
                        parts.setdefault(part, []).append(ms)
                scores["mnemo"].add(q.category, result_turns(result), q.evidence)
                scores["mnemo_evidence"].add(q.category, result_turns(result, facts=False),
                                             q.evidence)
                mem.flush_recall_log()  # see the docstring: the baselines run on a quiet process
                for method, (ranked, ms) in base.run(q.text).items():
                    scores[method].add(q.category, [[d] for d in ranked], q.evidence)
                    lat[method].append(ms)
                lat["fts5_cpu"].append(base.fts_cpu_ms)
            base.close()
    return {
        "embedder": embedder.identity, "write_path": sorted(paths),
        "strategy": " ".join([strategy.name, *args.set]),
        "questions": sum(len(c.questions) for c in convs), "ingest_seconds": round(ingest_s, 1),
        "scores": {name: s.table() for name, s in scores.items()},
        "latency_ms": {name: {"p50": round(_pct(v, 50), 2), "p95": round(_pct(v, 95), 2)}
                       for name, v in lat.items()},
        "recall_parts_ms": parts_table(parts, len(lat["rest"]), sum(lat["rest"])),
    }


def parts_table(parts: dict[str, list[float]], n: int, rest_total: float) -> dict:
    """p50/p95 of each part of recall (``timings_ms``; a part absent from a recall counts
    0 there) and its share of the time after embedding."""
    out = {}
    for part, values in sorted(parts.items()):
        full = values + [0.0] * (n - len(values))
        out[part.removesuffix("_ms")] = {
            "p50": round(_pct(full, 50), 2), "p95": round(_pct(full, 95), 2),
            "share": round(sum(values) / rest_total, 3) if rest_total else 0.0}
    return out


def print_latency(report: dict, baseline: str = "fts5_porter") -> None:
    lat, parts = report["latency_ms"], report["recall_parts_ms"]
    print(f"\nmnemo latency: query embedding p50 {lat['embed']['p50']:.2f} ms, p95 "
          f"{lat['embed']['p95']:.2f} ms; after embedding p50 {lat['rest']['p50']:.2f} ms, "
          f"p95 {lat['rest']['p95']:.2f} ms = {lat['rest']['p95'] / lat[baseline]['p95']:.1f}x "
          f"the FTS5 baseline's p95 ({lat[baseline]['p95']:.2f} ms, same run)")
    if lat.get("cpu"):
        print(f"CPU time of the calling thread (load-proof; includes the query embedding's "
              f"share on this thread, a lookup with --embed-cache): mnemo recall p50 "
              f"{lat['cpu']['p50']:.2f} ms, p95 {lat['cpu']['p95']:.2f} ms = "
              f"{lat['cpu']['p95'] / max(lat['fts5_cpu']['p95'], 1e-6):.1f}x the FTS5 "
              f"baseline's CPU p95 ({lat['fts5_cpu']['p95']:.2f} ms)")
    print("parts of recall after embedding (keyword includes the feedback round's FTS; "
          "dense runs beside keyword on a helper thread when there is one):")
    print("| part | p50 ms | p95 ms | share of the time |\n|---|---:|---:|---:|")
    for part, row in parts.items():
        print(f"| {part} | {row['p50']:.2f} | {row['p95']:.2f} | {row['share']:.0%} |")


def _print(report: dict) -> None:
    print(f"embedder {report['embedder']}  write path {','.join(report['write_path'])}  "
          f"strategy {report['strategy']}  questions {report['questions']}  "
          f"ingest {report['ingest_seconds']} s")
    cats = [*CATEGORIES.values()]
    header = ["method", *(f"{c} R@10" for c in cats), "all R@5", "all R@10", "all R@20",
              "all All@10", "p50 ms", "p95 ms"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    lat = report["latency_ms"]
    for name, table in report["scores"].items():
        if name.startswith("mnemo"):
            p50 = lat["embed"]["p50"] + lat["rest"]["p50"]
            p95 = f"{lat['embed']['p95']:.2f}+{lat['rest']['p95']:.2f}"
        else:
            p50, p95 = lat[name]["p50"], f"{lat[name]['p95']:.2f}"
        cells = [f"{table.get(c, {}).get('R@10', 0):.3f}" for c in cats]
        overall = table["overall"]
        cells += [f"{overall[m]:.3f}" for m in ("R@5", "R@10", "R@20", "All@10")]
        print(f"| {name} | " + " | ".join(cells) + f" | {p50:.2f} | {p95} |")
    print("\nmnemo per category:")
    print("| category | n | R@5 | R@10 | R@20 | All@10 |\n|---|---:|---:|---:|---:|---:|")
    for cat, row in report["scores"]["mnemo"].items():
        print(f"| {cat} | {row['n']} | {row['R@5']:.3f} | {row['R@10']:.3f} | "
              f"{row['R@20']:.3f} | {row['All@10']:.3f} |")
    print_latency(report)
    best = max(report["scores"][m]["overall"]["R@10"] for m in METHODS)
    mnemo = report["scores"]["mnemo"]["overall"]["R@10"]
    evidence = report["scores"]["mnemo_evidence"]["overall"]["R@10"]
    print(f"overall R@10 mnemo={mnemo:.3f} evidence={evidence:.3f} best_baseline={best:.3f}")


def main(argv: list[str] | None = None) -> None:
    run_and_report(_args(argv), "mnemo-locomo-", run, _print)


if __name__ == "__main__":
    main()
