"""What recall's search lists would cost held in the chat process: a feasibility probe for
LoCoMo's latency target (recall after query embedding at most 3x the FTS5 baseline's p95),
not a recall (a script, not a test).

Recall today reads every list from the store (``recall/keyword.py``, sqlite-vec): on
LoCoMo with fastembed the keyword, feedback and dense parts are ~75 % of its time after the
query embedding. This probe measures, question by question in one process, on a store
ingested by ``bench/locomo.py --data-dir``:

- ``recall``: ``Memory.recall`` after the query embedding (wall), and its keyword, feedback
  and dense parts (``timings_ms``);
- ``resident``: the same five lists computed from a snapshot of the tenant held in Python
  and numpy (the tokens of its episodes and beliefs as the FTS index holds them, their
  stored vectors): bm25 with the tenant's statistics over every row matching a query term
  (no term planning: more work than recall's planned search, not less), the feedback round
  seeded by the resident episode list's best 4, and exact dense top-k;
- ``fts5``: the per-conversation FTS5 baseline of ``bench/locomo.py``, same process;
- projections: recall after embedding with its three parts replaced by the resident
  lists' time (with and without reading their rows from the store), and with the three
  parts removed altogether (what the rest of recall costs on its own).

The resident lists are not recall's lists (no term plan, no visibility filter, no row
loads), so the projection is an estimate of what the shape could give, not a result; the
overlap of their top 10 with recall's own keyword list is printed to show they do the same
kind of work. Building the snapshot is timed too: that is what a write to the tenant would
cost again unless the snapshot is kept up to date incrementally.

    M=../shared/models/all-MiniLM-L6-v2-onnx
    .venv/bin/python bench/locomo.py --embedder fastembed --model-path $M \\
        --embed-cache /work/cache/locomo-fe.sqlite --data-dir /work/cache/locomo-fe
    .venv/bin/python bench/resident_probe.py --data-dir /work/cache/locomo-fe \\
        --embed-cache /work/cache/locomo-fe.sqlite --model-path $M
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import locomo as bench_locomo
from embed_cache import CachedEmbedder
from locomo_baselines import for_conversation
from locomo_data import load

from memory_core import Memory
from memory_core.clock import to_db, utcnow
from memory_core.db import fts
from memory_core.embedders.factory import make_embedder
from memory_core.log import configure_logging
from memory_core.recall.candidates import Candidate, Scope
from memory_core.recall.feedback import seed_terms
from memory_core.recall.keyword import load_first
from memory_core.recall.query import prepare_query
from memory_core.recall.strategy import DEFAULT
from memory_core.vectors import VectorIndex, stored_vector

K1, B = 1.2, 0.75
FEEDBACK_SEEDS = DEFAULT.feedback_seeds


@dataclass
class Table:
    """One kind of row of one tenant, resident and appendable: per token its rows and term
    frequencies (``array``: appended in place, read by numpy without a copy), each row's
    length, the stored vectors. bm25 weights are computed per query from the tenant's
    current N and average length, so appending a row never rewrites the others."""

    ids: list[int] = field(default_factory=list)  # row position -> row id
    texts: dict[int, str] = field(default_factory=dict)
    uids: dict[int, str] = field(default_factory=dict)
    rows: dict[str, array] = field(default_factory=dict)  # token -> row positions ('q')
    tfs: dict[str, array] = field(default_factory=dict)  # token -> term frequencies ('d')
    lengths: array = field(default_factory=lambda: array("d"))
    total: float = 0.0
    vectors: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))
    vector_ids: list[int] = field(default_factory=list)

    def append(self, row_id: int, uid: str, text: str) -> None:
        at = len(self.ids)
        self.ids.append(row_id)
        self.texts[row_id], self.uids[row_id] = text, uid
        toks = fts.tokens(text)
        self.lengths.append(len(toks))
        self.total += len(toks)
        counts: dict[str, int] = {}
        for t in toks:
            counts[t] = counts.get(t, 0) + 1
        for t, n in counts.items():
            if t not in self.rows:
                self.rows[t], self.tfs[t] = array("q"), array("d")
            self.rows[t].append(at)
            self.tfs[t].append(n)

    def append_vector(self, row_id: int, vector: np.ndarray) -> None:
        n = len(self.vector_ids)
        if n == len(self.vectors):  # grow by doubling: appends cost O(1) amortised
            grown = np.empty((max(64, 2 * n), vector.shape[0]), np.float32)
            grown[:n] = self.vectors[:n] if n else 0
            self.vectors = grown
        self.vectors[n] = vector
        self.vector_ids.append(row_id)

    def _idf(self, df: int) -> float:
        n = len(self.ids)
        return max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)

    def bm25_np(self, terms: list[str], k: int) -> list[int]:
        present = [t for t in dict.fromkeys(terms) if t in self.rows]
        if not present:
            return []
        lengths = np.frombuffer(self.lengths, dtype=np.float64)
        avgdl = self.total / len(self.ids)
        score = np.zeros(len(self.ids))
        for t in present:
            rows = np.frombuffer(self.rows[t], dtype=np.int64)
            tfs = np.frombuffer(self.tfs[t], dtype=np.float64)
            score[rows] += self._idf(len(rows)) * tfs * (K1 + 1) / (
                tfs + K1 * (1 - B + B * lengths[rows] / avgdl))
        hit = np.flatnonzero(score)
        top = hit[np.lexsort((-hit, -score[hit]))[:k]]  # ties: the newest row first
        return [self.ids[i] for i in top]

    def bm25(self, terms: list[str], k: int) -> list[int]:
        """The same ranking in plain Python (the reference the numpy one is checked by)."""
        avgdl = self.total / len(self.ids) if self.ids else 1.0
        score: dict[int, float] = defaultdict(float)
        for term in dict.fromkeys(terms):
            if term not in self.rows:
                continue
            idf = self._idf(len(self.rows[term]))
            for at, tf in zip(self.rows[term], self.tfs[term], strict=True):
                norm = K1 * (1 - B + B * self.lengths[at] / avgdl)
                score[at] += idf * tf * (K1 + 1) / (tf + norm)
        ranked = sorted(score.items(), key=lambda kv: (-kv[1], -kv[0]))[:k]
        return [self.ids[at] for at, _ in ranked]

    def dense(self, vector: np.ndarray, k: int) -> list[int]:
        n = len(self.vector_ids)
        if not n:
            return []
        sims = self.vectors[:n] @ vector
        top = np.argpartition(-sims, min(k, n - 1))[:k]
        return [self.vector_ids[i] for i in top[np.argsort(-sims[top])]]


def snapshot(conn, index: VectorIndex, tenant: str) -> dict[str, Table]:
    out = {}
    for kind, base in (("episode", "episodes"), ("belief", "beliefs")):
        table = Table()
        for row_id, uid, text in conn.execute(f"SELECT id, {kind}_uid, text FROM {base} "
                                              "WHERE tenant = ? ORDER BY id", (tenant,)):
            table.append(row_id, uid, text or "")
        vec_table = index._active_table(conn, base)
        if vec_table is not None:
            for row_id, blob in conn.execute(f"SELECT rowid, embedding FROM {vec_table} "
                                             "WHERE tenant = ?", (tenant,)):
                table.append_vector(row_id, stored_vector(blob))
        out[kind] = table
    return out


@dataclass(frozen=True)
class Seed:
    """What ``feedback.seed_terms`` reads of a seed candidate: its text."""

    text: str


def resident_lists(snap: dict[str, Table], text: str, vector: np.ndarray | None, *,
                   in_numpy: bool = False) -> dict[str, list[int]]:
    prepared = prepare_query(text, max_chars=10_000)
    terms = [t for w in prepared.terms for t in fts.tokens(w)]
    ep, be = snap["episode"], snap["belief"]
    ep_rank, be_rank = (ep.bm25_np, be.bm25_np) if in_numpy else (ep.bm25, be.bm25)
    over = 2  # as recall asks for more than it keeps: some rows are not visible
    lists = {"episode_fts": ep_rank(terms, over * DEFAULT.k_for("episode_fts")),
             "belief_fts": be_rank(terms, over * DEFAULT.k_for("belief_fts"))}
    episodes = lists["episode_fts"]
    if vector is not None:
        lists["episode_dense"] = ep.dense(vector, over * DEFAULT.k_for("episode_dense"))
        lists["belief_dense"] = be.dense(vector, over * DEFAULT.k_for("belief_dense"))

    seeds = [Seed(snap["episode"].texts[i]) for i in episodes[:FEEDBACK_SEEDS]]
    more = [t for w in seed_terms(prepared.terms, seeds) for t in fts.tokens(w)]  # type: ignore[arg-type]
    lists["feedback_fts"] = ep_rank(more, over * (DEFAULT.k_for("feedback_fts") + len(seeds)))
    return lists


def load_rows(conn, scope: Scope, lists: dict[str, list[int]]) -> None:
    """The rows of the lists' first k visible ids, read from the store as recall reads them
    (``load_first``, one pool): what a resident index of ids alone would still cost."""
    pool: dict[tuple[str, int], Candidate] = {}
    for name, ids in lists.items():
        kind = name.split("_")[0]
        kind = "episode" if kind == "feedback" else kind
        for cand in load_first(conn, kind, scope, ids, DEFAULT.k_for(name), pool):
            pool[cand.key] = cand


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--embedder", choices=("hash", "fastembed"), default="fastembed")
    p.add_argument("--model-path", type=Path, default=None)
    p.add_argument("--embed-cache", type=Path, default=None)
    args = p.parse_args()
    if not (args.data_dir / "memory_state.db").exists():
        raise SystemExit(f"{args.data_dir}: no store; ingest one with bench/locomo.py --data-dir")
    largs = bench_locomo._args(["--embedder", args.embedder, "--data-dir", str(args.data_dir)]
                               + (["--model-path", str(args.model_path)] if args.model_path
                                  else []))
    settings = bench_locomo._settings(largs, args.data_dir)
    configure_logging(settings)
    embedder = make_embedder(settings)
    if args.embed_cache:
        embedder = CachedEmbedder(embedder, args.embed_cache)
    convs = load(largs.data)
    rest, parts, resident, resident_np, fts5, overlap, builds = [], [], [], [], [], [], []
    same: list[bool] = []
    with_rows: list[float] = []
    appends: list[float] = []
    with Memory.open(settings, embedder=embedder) as mem, tempfile.TemporaryDirectory() as tmp:
        index = VectorIndex(embedder)
        conn = mem._state.conn
        for conv in convs:
            began = time.perf_counter()
            snap = snapshot(conn, index, conv.tenant)
            builds.append((time.perf_counter() - began) * 1000)
            base = for_conversation(conv, embedder, Path(tmp))
            for q in conv.questions:
                t0 = time.perf_counter()
                result = mem.recall(q.text, tenant=conv.tenant, budget=bench_locomo.BUDGET,
                                    strategy=DEFAULT)
                wall = (time.perf_counter() - t0) * 1000
                mem.flush_recall_log()
                tm = result.timings_ms
                rest.append(wall - tm.get("embed_ms", 0.0))
                parts.append(sum(tm.get(f"{p}_ms", 0.0) for p in ("keyword", "feedback",
                                                                   "dense")))
                vector = embedder.embed([q.text])[0] if embedder.semantic else None
                t1 = time.perf_counter()
                episodes = resident_lists(snap, q.text, vector)["episode_fts"]
                resident.append((time.perf_counter() - t1) * 1000)
                t2 = time.perf_counter()
                in_np = resident_lists(snap, q.text, vector, in_numpy=True)
                resident_np.append((time.perf_counter() - t2) * 1000)
                t3 = time.perf_counter()
                load_rows(conn, Scope(conv.tenant, to_db(utcnow())), in_np)
                with_rows.append(resident_np[-1] + (time.perf_counter() - t3) * 1000)
                same.append(in_np["episode_fts"] == episodes)
                evidence = [i.item_id for i in result.items if i.kind == "episode"][:10]
                ids = {f"episode:{snap['episode'].uids[i]}" for i in episodes[:10]}
                overlap.append(len(ids & set(evidence)) / max(1, len(evidence)))
                fts5.append(base.run(q.text)["fts5_porter"][1])
            base.close()
            # A turn written between two recalls of the tenant: what appending its episode
            # (text and vector) to the snapshot costs (copies of the tenant's own rows).
            ep = snap["episode"]
            for i in range(min(200, len(ep.ids))):
                row_id = ep.ids[i]
                t4 = time.perf_counter()
                ep.append(10**12 + i, "probe", ep.texts[row_id])
                ep.append_vector(10**12 + i, ep.vectors[i])
                appends.append((time.perf_counter() - t4) * 1000)
    projected = [r - p + s for r, p, s in zip(rest, parts, resident, strict=True)]
    projected_np = [r - p + s for r, p, s in zip(rest, parts, resident_np, strict=True)]
    projected_rows = [r - p + s for r, p, s in zip(rest, parts, with_rows, strict=True)]
    without = [r - p for r, p in zip(rest, parts, strict=True)]
    f95 = pct(fts5, 95)
    print(f"{len(rest)} questions, {len(convs)} tenants, embedder {embedder.identity}")
    print("| measure | p50 ms | p95 ms |\n|---|---:|---:|")
    for name, values in (("recall after embedding", rest),
                         ("  of it keyword + feedback + dense", parts),
                         ("resident lists (the same five lists)", resident),
                         ("projected recall after embedding", projected),
                         ("resident lists, bm25 in numpy", resident_np),
                         ("projected recall after embedding, numpy", projected_np),
                         ("resident lists in numpy + rows read from the store", with_rows),
                         ("projected recall after embedding, numpy + rows", projected_rows),
                         ("recall after embedding without the three parts", without),
                         ("FTS5 baseline", fts5)):
        print(f"| {name} | {pct(values, 50):.2f} | {pct(values, 95):.2f} |")
    print(f"ratio to the FTS5 baseline's p95: recall {pct(rest, 95) / f95:.1f}x, projected "
          f"{pct(projected, 95) / f95:.1f}x, numpy {pct(projected_np, 95) / f95:.1f}x, "
          f"numpy + rows {pct(projected_rows, 95) / f95:.1f}x, without the three parts "
          f"{pct(without, 95) / f95:.1f}x (target 3x)")
    print(f"snapshot build per tenant: p50 {statistics.median(builds):.1f} ms, max "
          f"{max(builds):.1f} ms; resident top-10 episodes also in recall's evidence top 10: "
          f"{statistics.mean(overlap):.2f}; numpy's episode list equal to Python's in "
          f"{sum(same)} of {len(same)} questions; appending one episode: p50 "
          f"{pct(appends, 50) * 1000:.0f} us, p95 {pct(appends, 95) * 1000:.0f} us")


if __name__ == "__main__":
    main()
