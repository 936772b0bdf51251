"""LongMemEval_S turn recall of mnemo against plain-retrieval baselines (a script, not a test).

Example:
    .venv/bin/python bench/longmemeval.py --limit 2
    nice -n 10 .venv/bin/python bench/longmemeval.py --embedder fastembed \\
        --model-path ../shared/models/all-MiniLM-L6-v2-onnx \\
        --embed-cache /tmp/lme_fastembed.sqlite --json-out /tmp/lme_fe.json

Each question's haystack (~50 sessions, ~490 turns) is ingested session by session through
the workers' write path (``process_turns`` then ``micro_consolidate`` per turn) into its own
tenant, all tenants in one store; then every question is recalled in its tenant (``now`` =
the end of the question's day, ``as_of`` unset) and scored as
../shared/data/longmemeval/README.md says: turn Recall@5/@10 per question type and overall,
and session recall_all@5. The baselines run in the same process on the same turns, one
index per question: FTS5 porter bm25, dense cosine with the same embedder, and their RRF
(k = 60); a document is the text mnemo embeds for the turn's episode
(``"[20 May 2023] user: ..."``). ``--embed-cache`` keeps the embedder's vectors in a file
(``bench/embed_cache.py``): they are the model's own, computed once, so only ingest time
(and the query-embedding part of latency, hence reported apart) is flattered. A fact counts
as its source turn(s): row ``mnemo`` takes the turns in prompt order (facts first, then
evidence), row ``mnemo_evidence`` the evidence items alone. The last line is ``overall R@5
mnemo=X evidence=X best_baseline=Y R@10 ...``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for extra in (REPO_ROOT, REPO_ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from bench_report import run_and_report  # noqa: E402
from embed_cache import CachedEmbedder  # noqa: E402
from locomo import _pct, _settings, _strategy, result_turns  # noqa: E402
from locomo_baselines import METHODS, TurnBaselines  # noqa: E402
from longmemeval_data import TYPES, Question, Scores, load  # noqa: E402

from memory_core import Budget, Memory  # noqa: E402
from memory_core.db import migrate_stores, open_state  # noqa: E402
from memory_core.embedders.base import Embedder  # noqa: E402
from memory_core.embedders.factory import make_embedder  # noqa: E402
from memory_core.log import configure_logging  # noqa: E402
from memory_core.model.episodes import episode_text  # noqa: E402
from memory_core.model.tenants import create_tenant  # noqa: E402
from memory_core.model.turns import TurnInput  # noqa: E402
from memory_core.settings import Settings  # noqa: E402
from memory_core.vectors import VectorIndex  # noqa: E402
from memory_core.write.pipeline import micro_consolidate, process_turns  # noqa: E402

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "longmemeval" / "longmemeval_s_dev48.json"
# A few LongMemEval turns (pasted documents) are longer than the default
# MNEMO_MAX_TURN_CHARS (32,768); a deployment holding such chats raises it the same way.
MAX_TURN_CHARS = 100_000
BUDGET = Budget(items=30, tokens=10_000_000)  # enough items for 10 turns; tokens not binding


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--limit", type=int, default=None,
                   help="the first N questions of each type (default: all 8)")
    p.add_argument("--embedder", choices=("hash", "fastembed"), default="hash")
    p.add_argument("--model-path", type=Path, default=None)
    p.add_argument("--quantize", choices=("none", "int8"), default="none",
                   help="fastembed: MNEMO_EMBED_QUANTIZE (int8 needs --model-path)")
    p.add_argument("--embed-cache", type=Path, default=None,
                   help="keep vectors in this SQLite file and reuse them (bench/embed_cache.py)")
    p.add_argument("--strategy", default="default", help="recall preset name")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                   help="override a strategy field (repeatable)")
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--data-dir", type=Path, default=None,
                   help="keep the databases here; an existing store is reused, not re-ingested")
    return p.parse_args(argv)


def ingest(settings: Settings, questions: list[Question], embedder: Embedder) -> None:
    """Every question's haystack into its own tenant, session by session."""
    db = open_state(settings)
    try:
        index = VectorIndex(embedder)
        index.ensure(db.conn)
        for q in questions:
            create_tenant(db.conn, q.tenant)
            sessions: dict[str, list[TurnInput]] = {}
            for t in q.turns:
                sessions.setdefault(t.session, []).append(TurnInput(
                    tenant=q.tenant, session_id=t.session, turn_uid=t.uid, speaker=t.speaker,
                    text=t.text, occurred_at=t.at, index=t.idx))
            for session, turns in sessions.items():
                process_turns(db, index, turns, max_turn_chars=MAX_TURN_CHARS)
                for turn in turns:
                    micro_consolidate(db, index, q.tenant, session, turn_uid=turn.turn_uid)
    finally:
        db.close()


def _flatten(items: list[list[str]]) -> list[str]:
    return list(dict.fromkeys(u for turns in items for u in turns))


def run(args: argparse.Namespace, data_dir: Path) -> dict:
    settings = _settings(args, data_dir)
    configure_logging(settings)
    embedder = make_embedder(settings)
    if args.embed_cache:
        embedder = CachedEmbedder(embedder, args.embed_cache)
    questions = load(args.data, args.limit)
    strategy = _strategy(args)
    scores = {name: Scores() for name in ("mnemo", "mnemo_evidence", *METHODS)}
    lat: dict[str, list[float]] = {"embed": [], "rest": [], **{m: [] for m in METHODS}}
    started = time.perf_counter()
    fresh = not (data_dir / "memory_state.db").exists()
    migrate_stores(settings)
    if fresh:
        ingest(settings, questions, embedder)
    ingest_s = time.perf_counter() - started
    with Memory.open(settings, embedder=embedder) as mem, tempfile.TemporaryDirectory() as tmp:
        for q in questions:
            base = TurnBaselines(q.tenant, [t.uid for t in q.turns],
                                 [episode_text(t.speaker, t.text, t.at) for t in q.turns],
                                 embedder, Path(tmp))
            day_end = q.at.replace(hour=0, minute=0) + timedelta(days=1, seconds=-1)
            t0 = time.perf_counter()
            result = mem.recall(q.text, tenant=q.tenant, budget=BUDGET, strategy=strategy,
                                now=day_end)
            wall = (time.perf_counter() - t0) * 1000
            embed_ms = result.timings_ms.get("embed_ms", 0.0)
            lat["embed"].append(embed_ms)
            lat["rest"].append(wall - embed_ms)
            scores["mnemo"].add(q, _flatten(result_turns(result)))
            scores["mnemo_evidence"].add(q, _flatten(result_turns(result, facts=False)))
            mem.flush_recall_log()  # the baselines are timed on a quiet process (locomo.py)
            for method, (ranked, ms) in base.run(q.text).items():
                scores[method].add(q, ranked)
                lat[method].append(ms)
            base.close()
    return {
        "embedder": embedder.identity, "strategy": " ".join([strategy.name, *args.set]),
        "questions": len(questions), "turns": sum(len(q.turns) for q in questions),
        "ingest_seconds": round(ingest_s, 1) if fresh else None,
        "scores": {name: s.table() for name, s in scores.items()},
        "latency_ms": {name: {"p50": round(_pct(v, 50), 2), "p95": round(_pct(v, 95), 2)}
                       for name, v in lat.items()},
    }


def _print(report: dict) -> None:
    print(f"embedder {report['embedder']}  strategy {report['strategy']}  questions "
          f"{report['questions']}  turns {report['turns']}  ingest {report['ingest_seconds']} s")
    header = ["method", "R@5", "R@10", "S_all@5", *(f"{t} R@10" for t in TYPES),
              "p50 ms", "p95 ms"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    lat = report["latency_ms"]
    for name, table in report["scores"].items():
        overall = table["overall"]
        cells = [f"{overall[m]:.3f}" for m in ("R@5", "R@10", "S_all@5")]
        cells += [f"{table[t]['R@10']:.3f}" if t in table else "-" for t in TYPES]
        if name.startswith("mnemo"):
            cells += [f"{lat['embed']['p50']:.2f}+{lat['rest']['p50']:.2f}",
                      f"{lat['embed']['p95']:.2f}+{lat['rest']['p95']:.2f}"]
        else:
            cells += [f"{lat[name]['p50']:.2f}", f"{lat[name]['p95']:.2f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    best5 = max(report["scores"][m]["overall"]["R@5"] for m in METHODS)
    best10 = max(report["scores"][m]["overall"]["R@10"] for m in METHODS)
    mnemo = report["scores"]["mnemo"]["overall"]
    evidence = report["scores"]["mnemo_evidence"]["overall"]
    print(f"overall R@5 mnemo={mnemo['R@5']:.3f} evidence={evidence['R@5']:.3f} "
          f"best_baseline={best5:.3f} R@10 mnemo={mnemo['R@10']:.3f} "
          f"evidence={evidence['R@10']:.3f} best_baseline={best10:.3f}")


def main(argv: list[str] | None = None) -> None:
    run_and_report(_args(argv), "mnemo-lme-", run, _print)


if __name__ == "__main__":
    main()
