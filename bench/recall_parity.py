"""Do two versions of the code recall the same? (a script, for changes meant to be speed only)

Example (each dump from a checkout of the code it tests, with that checkout's venv):
    .venv/bin/python bench/recall_parity.py dump scale --data /tmp/copy-of-100k-store \
        --out /tmp/new.json
    .venv/bin/python bench/recall_parity.py dump locomo --data /tmp/copy-of-locomo-store \
        --out /tmp/new.json [--embedder fastembed --model-path ../shared/models/... \
        --embed-cache /tmp/locomo_vectors.sqlite]
    .venv/bin/python bench/recall_parity.py compare /tmp/old.json /tmp/new.json

``dump scale`` recalls ``--queries`` of ``bench/recall_scale.py``'s generated questions on a
store it generated (``single-<size>-g1`` in its ``--cache``); ``dump locomo`` every LoCoMo
question on a store ``bench/locomo.py --data-dir`` ingested, with that bench's budget. Each
recall's facts and items (ids and scores), its degraded reason and its recall-log row (read
back) go to a JSON file. Recall writes its log into the store's ``memory_ops.db``: dump from
a copy of a store that other runs use.

``compare`` prints how many recalls differ in their result (ids, order, scores to 1e-9) and
in their log row (numbers to 1.5e-4: the log keeps four decimals, format 3 as float32s), and
the first few differences. It exits 1 when a result differs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
for extra in (REPO_ROOT, REPO_ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from memory_core import Memory  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.recall.explain import last_log  # noqa: E402
from memory_core.recall.result import RecallResult  # noqa: E402
from memory_core.settings import Settings  # noqa: E402

RESULT_TOLERANCE, LOG_TOLERANCE = 1e-9, 1.5e-4
SHOWN = 5


def _row(mem: Memory, result: RecallResult) -> dict[str, Any]:
    mem.flush_recall_log()
    logged = last_log(mem.ops_db.conn, result.tenant, result.log_id)
    for volatile in ("log_id", "at"):
        (logged or {}).pop(volatile, None)
    return {"facts": [[f.item_id, f.score] for f in result.facts],
            "items": [[i.item_id, i.score] for i in result.items],
            "degraded": result.degraded_reason, "log": logged}


def dump_scale(data: Path, queries: int) -> list[dict[str, Any]]:
    import recall_scale as rs

    settings = Settings.from_env({}, data_dir=data, log_level="error", log_format="json")
    configure_logging(settings)
    texts = rs.Texts(99, vocabulary_seed=rs.GENERATE_SEED)
    with Memory.open(settings) as mem:
        return [_row(mem, mem.recall(texts.question(), tenant=rs.TENANT))
                for _ in range(queries)]


def dump_locomo(args: argparse.Namespace) -> list[dict[str, Any]]:
    import locomo as lb
    from embed_cache import CachedEmbedder
    from locomo_data import load

    from memory_core.embedders.factory import make_embedder

    argv = ["--data-dir", str(args.data), "--embedder", args.embedder]
    if args.model_path:
        argv += ["--model-path", str(args.model_path)]
    if args.embed_cache:
        argv += ["--embed-cache", str(args.embed_cache)]
    bench_args = lb._args(argv)
    settings = lb._settings(bench_args, args.data)
    configure_logging(settings)
    embedder = make_embedder(settings)
    if bench_args.embed_cache:
        embedder = CachedEmbedder(embedder, bench_args.embed_cache)
    with Memory.open(settings, embedder=embedder) as mem:
        return [_row(mem, mem.recall(q.text, tenant=conv.tenant, budget=lb.BUDGET))
                for conv in load(bench_args.data) for q in conv.questions]


def difference(a: Any, b: Any, tolerance: float, path: str = "") -> str | None:
    """Where ``a`` and ``b`` first differ (numbers within ``tolerance``), or None."""
    if isinstance(a, float | int) and isinstance(b, float | int) and not (
            isinstance(a, bool) or isinstance(b, bool)):
        same = math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)
        return None if same else f"{path}: {a} != {b}"
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{path}: keys {sorted(set(a) ^ set(b))}"
        return next((d for k in a if (d := difference(a[k], b[k], tolerance, f"{path}.{k}"))),
                    None)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} != {len(b)} entries"
        return next((d for i, (x, y) in enumerate(zip(a, b, strict=True))
                     if (d := difference(x, y, tolerance, f"{path}[{i}]"))), None)
    return None if a == b else f"{path}: {str(a)[:80]} != {str(b)[:80]}"


def compare(old_path: Path, new_path: Path) -> int:
    old, new = json.loads(old_path.read_text()), json.loads(new_path.read_text())
    if len(old) != len(new):
        print(f"{len(old)} recalls against {len(new)}: not the same questions")
        return 1
    results = logs = 0
    for i, (a, b) in enumerate(zip(old, new, strict=True)):
        a_log, b_log = a.pop("log"), b.pop("log")
        if (d := difference(a, b, RESULT_TOLERANCE)) is not None:
            results += 1
            if results <= SHOWN:
                print(f"recall {i}: result differs at {d}")
        if (d := difference(a_log, b_log, LOG_TOLERANCE)) is not None:
            logs += 1
            if logs <= SHOWN:
                print(f"recall {i}: log differs at {d}")
    print(f"{len(old)} recalls: results differ in {results}, logs differ in {logs}")
    return 1 if results else 0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("workload", choices=("scale", "locomo"))
    d.add_argument("--data", type=Path, required=True, help="the store (a copy: see above)")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--queries", type=int, default=300, help="scale: how many recalls")
    d.add_argument("--embedder", choices=("hash", "fastembed"), default="hash")
    d.add_argument("--model-path", type=Path, default=None)
    d.add_argument("--embed-cache", type=Path, default=None)
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = p.parse_args(argv)
    if args.command == "compare":
        raise SystemExit(compare(args.old, args.new))
    rows = (dump_scale(args.data, args.queries) if args.workload == "scale"
            else dump_locomo(args))
    args.out.write_text(json.dumps(rows))
    print(f"{len(rows)} recalls -> {args.out}")


if __name__ == "__main__":
    main()
