"""FTS5 segment merging, in bounded steps (part of ``macro_sleep``).

Every write to a full-text index adds a small segment, and FTS5 merges them only as more
arrive (``automerge``): a store that was written in bursts keeps many segments per index
(9-14 seen at 100k rows), and each query reads every one. ``'optimize'`` merges them all
into one, in a single write transaction that blocks the workers for as long as that takes
on a large store. Instead, ``'merge'`` with a negative page budget merges any two or more
segments of a level, writing at most about that many pages, in a transaction of its own:
the write lock is held for one step, and the steps repeat until a step finds nothing left
to merge (``total_changes`` moved by less than 2, as the FTS5 documentation says).

Safe to run twice (a merged index has nothing to merge) and under a crash (each step is one
transaction: a crash loses at most the step in flight, and the index stays whole). The
Postgres primary keeps its postings in ordinary tables: nothing to merge there.
"""

from __future__ import annotations

from collections.abc import Callable

from memory_core.db.dialect import is_postgres
from memory_core.db.schema_state import FTS_TABLES
from memory_core.db.sqlite import Connection, atomic

MERGE_PAGES = 64  # pages written per step at most: one short write transaction
MAX_STEPS = 10_000  # a bound on one run (a store of millions of rows needs a few hundred)


def merge_step(conn: Connection, fts: str, pages: int = MERGE_PAGES) -> bool:
    """One bounded merge of ``fts`` in its own write transaction; True if it merged anything."""
    with atomic(conn):
        before = conn.total_changes
        conn.execute(f"INSERT INTO {fts} ({fts}, rank) VALUES ('merge', ?)", (-pages,))
        return conn.total_changes - before >= 2


def merge_fts(conn: Connection, *, pages: int = MERGE_PAGES, max_steps: int = MAX_STEPS,
              step: Callable[[Connection, str, int], bool] = merge_step) -> dict[str, int]:
    """Merge each full-text index's segments, step by step; returns the steps that merged
    something, per index (0: it was merged already). ``step``: tests time it."""
    if is_postgres(conn):
        return {}
    done = {}
    for fts in FTS_TABLES:
        steps = 0
        while steps < max_steps and step(conn, fts, pages):
            steps += 1
        done[fts] = steps
    return done
