"""What one write transaction collects and flushes: vectors, outbox rows, count deltas.

A write API function computes its embeddings first (``Embeds.prepare``), then opens one short
transaction, hands a ``WriteTx`` to the rule-applying helpers and calls ``flush()`` before
commit. Collecting the side rows lets a batch of turns write them with ``executemany``, and
makes "every belief mutation appends to the outbox in the same transaction" hold by
construction: the outbox rows are flushed by the same transaction that made the change.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import Connection, atomic
from memory_core.vectors import VectorIndex


class Embeds:
    """Vectors of texts, computed before the transaction opens.

    ``get`` of a text that was not prepared embeds it on the spot: rare (a rename or a merge
    triggered inside a write re-renders texts) and CPU-only, never network I/O for the
    embedders mnemo ships with a local model.
    """

    def __init__(self, index: VectorIndex) -> None:
        self.index = index
        self._cache: dict[str, np.ndarray] = {}

    def prepare(self, texts: Iterable[str]) -> None:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vectors = self.index.embedder.embed(missing)
            self._cache.update(zip(missing, vectors, strict=True))

    def get(self, text: str) -> np.ndarray:
        if text not in self._cache:
            self.prepare([text])
        return self._cache[text]


@dataclass
class WriteTx:
    """Side effects of one transaction, for one tenant."""

    conn: Connection
    index: VectorIndex
    tenant: str
    now: str  # storage-encoded system time of this transaction
    embeds: Embeds
    count_deltas: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    outbox: list[tuple[str, str, str]] = field(default_factory=list)  # kind, object_id, op
    vec_upserts: dict[str, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    vec_deletes: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    actions: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def count(self, deltas: dict[str, tuple[int, int]], sign: int) -> None:
        for entity_id, (beliefs, degree) in deltas.items():
            slot = self.count_deltas[entity_id]
            slot[0] += sign * beliefs
            slot[1] += sign * degree

    def change(self, kind: str, object_id: str, op: str = "upsert") -> None:
        self.outbox.append((kind, object_id, op))

    def vector(self, base: str, rowid: int, text: str) -> None:
        self.vec_deletes[base].discard(rowid)
        self.vec_upserts[base][rowid] = text

    def drop_vector(self, base: str, rowid: int) -> None:
        self.vec_upserts[base].pop(rowid, None)
        self.vec_deletes[base].add(rowid)

    def act(self, action: str, n: int = 1) -> None:
        self.actions[action] += n

    def flush(self) -> None:
        """Write what was collected; call inside the transaction, last."""
        conn = self.conn
        deltas = [(b, d, self.tenant, e) for e, (b, d) in self.count_deltas.items() if b or d]
        if deltas:
            conn.executemany(
                "UPDATE entities SET belief_count = belief_count + ?, "
                "graph_degree = graph_degree + ? WHERE tenant = ? AND entity_id = ?", deltas)
        if self.outbox:
            conn.executemany(
                "INSERT INTO outbox (tenant, kind, object_id, op, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [(self.tenant, k, o, op, self.now) for k, o, op in self.outbox])
        for base, rowids in self.vec_deletes.items():
            if rowids:
                self.index.delete(self.conn, base, sorted(rowids))
        for base, items in self.vec_upserts.items():
            if items:
                self.index.upsert(conn, base, [(rowid, self.tenant, self.embeds.get(text))
                                               for rowid, text in items.items()])
        self.count_deltas.clear()
        self.outbox.clear()
        self.vec_deletes.clear()
        self.vec_upserts.clear()


@contextlib.contextmanager
def write_tx(conn: Connection, index: VectorIndex, tenant: str,
             embeds: Embeds | None = None) -> Iterator[WriteTx]:
    """One short write transaction for ``tenant``: the vector index recorded, the rules applied
    by the caller on the yielded ``WriteTx``, its side rows flushed before commit. Embed first
    (``embeds``), never inside."""
    with atomic(conn, tenants=(tenant,)):
        index.ensure(conn)
        tx = WriteTx(conn, index, tenant, to_db(utcnow()), embeds or Embeds(index))
        yield tx
        tx.flush()
