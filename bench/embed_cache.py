"""An embedder that remembers its vectors in a file, for benchmarks that re-embed the same text.

A benchmark run embeds every memory twice or more (mnemo's write path, the dense baseline)
and a second run embeds them all again; with fastembed on long texts that is the whole cost
of the run (LongMemEval: ~0.2 s of CPU per turn). ``CachedEmbedder`` wraps the real
embedder, keeps its ``identity``, ``dim``, ``kind`` and ``semantic``, and stores each vector
under sha256(identity, text) in a SQLite file, so the vectors are the model's own, computed
once. Only ingest time changes, and the query-embedding part of recall latency (a cached
query costs a lookup): report recall time after embedding.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memory_core.db.sqlite import atomic, connect
from memory_core.embedders.base import Embedder, WrappingEmbedder, check_texts


class CachedEmbedder(WrappingEmbedder):
    """``inner``'s vectors, computed once per (identity, text) and kept in ``path``."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        super().__init__(inner)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = connect(self.path)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, v BLOB)")
        self.hits = 0
        self.misses = 0

    def _key(self, text: str) -> bytes:
        return hashlib.sha256(f"{self.identity}\0{text}".encode()).digest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        keys = [self._key(t) for t in items]
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        with self._lock:
            found: dict[bytes, bytes] = {}
            for start in range(0, len(keys), 500):
                chunk = list(dict.fromkeys(keys[start:start + 500]))
                found.update(self._db.execute(
                    f"SELECT key, v FROM vectors WHERE key IN ({','.join('?' * len(chunk))})",
                    chunk).fetchall())
        missing = list(dict.fromkeys(t for t, k in zip(items, keys, strict=True)
                                     if k not in found))
        self.hits += len(items) - len(missing)
        self.misses += len(missing)
        if missing:
            vectors = self.inner.embed(missing)
            rows = [(self._key(t), np.asarray(v, dtype=np.float32).tobytes())
                    for t, v in zip(missing, vectors, strict=True)]
            with self._lock, atomic(self._db):
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            found.update(rows)
        for i, k in enumerate(keys):
            out[i] = np.frombuffer(found[k], dtype=np.float32)
        return out

    def close(self) -> None:
        self._db.close()

