"""The baselines of ../shared/data/locomo/README.md, computed on this machine.

Each turn is one document, "[8 May 2023] Speaker: text". FTS5 bm25 (porter unicode61), dense
cosine with the same embedder as mnemo (brute force in numpy), and their RRF (k = 60). The
query is the one mnemo's recall builds: non-stopword terms, each quoted, joined with OR.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
from locomo_data import Conversation, day_label

from memory_core.db.sqlite import connect
from memory_core.embedders.base import Embedder
from memory_core.recall.query import prepare_query

METHODS = ("fts5_porter", "dense", "rrf")


def for_conversation(conv: Conversation, embedder: Embedder, workdir: Path) -> TurnBaselines:
    """The baselines over one LoCoMo conversation's turns."""
    return TurnBaselines(conv.tenant, [t.dia_id for _, t in conv.turns()],
                         [f"[{day_label(s.at)}] {t.speaker}: {t.text}" for s, t in conv.turns()],
                         embedder, workdir)


class TurnBaselines:
    """The three baselines over one index of turns: ``ids[i]`` is the turn of ``docs[i]``."""

    def __init__(self, name: str, ids: list[str], docs: list[str], embedder: Embedder,
                 workdir: Path) -> None:
        self.ids = ids
        self.conn = connect(Path(workdir) / f"baseline-{name}.db")
        self.conn.execute("DROP TABLE IF EXISTS docs")
        self.conn.execute("CREATE VIRTUAL TABLE docs USING fts5(text, "
                          "tokenize='porter unicode61 remove_diacritics 2')")
        self.conn.executemany("INSERT INTO docs (rowid, text) VALUES (?, ?)",
                              [(i, d) for i, d in enumerate(docs)])
        self.embedder = embedder
        self.matrix = embedder.embed(docs)
        self.fts_cpu_ms = 0.0  # CPU time of the last FTS5 search (this thread)

    def fts(self, question: str, k: int) -> list[str]:
        q = prepare_query(question, max_chars=100_000)
        if not q.fts:
            return []
        rows = self.conn.execute("SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rank "
                                 "LIMIT ?", (q.fts, k)).fetchall()
        return [self.ids[r[0]] for r in rows]

    def dense(self, vector: np.ndarray, k: int) -> list[str]:
        sims = self.matrix @ vector
        top = np.argsort(-sims)[:k]
        return [self.ids[i] for i in top]

    def run(self, question: str, k: int = 50) -> dict[str, tuple[list[str], float]]:
        """Ranked turn ids and latency (ms) of each method for one question."""
        out = {}
        t0, c0 = time.perf_counter(), time.thread_time()
        fts = self.fts(question, k)
        t1 = time.perf_counter()
        self.fts_cpu_ms = (time.thread_time() - c0) * 1000
        vector = self.embedder.embed([question])[0]
        dense = self.dense(vector, k)
        t2 = time.perf_counter()
        out["fts5_porter"] = (fts, (t1 - t0) * 1000)
        out["dense"] = (dense, (t2 - t1) * 1000)
        scores: dict[str, float] = {}
        for ranked in (fts, dense):
            for rank, dia in enumerate(ranked, start=1):
                scores[dia] = scores.get(dia, 0.0) + 1.0 / (60 + rank)
        fused = sorted(scores, key=lambda d: -scores[d])[:k]
        out["rrf"] = (fused, (time.perf_counter() - t0) * 1000)
        return out

    def close(self) -> None:
        self.conn.close()


def workdir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="mnemo-locomo-baselines-")
