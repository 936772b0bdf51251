"""The change log of the rows recall holds in a process (``recall.resident``).

Every insert, text rewrite and delete of an episode or belief (the FTS triggers, ``db.fts``)
and every vector written or deleted for one (``vectors.VectorIndex``) appends
``(seq, tbl, tenant, row_id)`` to ``recall_changes`` in the writer's transaction. A process
holding a tenant's postings and vectors reads the tenant's entries past the seq it holds
(one indexed statement: other tenants' writes cost it nothing) and re-reads those rows.
``macro_sleep`` keeps the newest entries (``prune``); a process whose seq is older than what
was pruned rebuilds the tenant (``PRUNED_KEY``). SQLite only: the Postgres primary keeps no
log, and recall there reads the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memory_core.db.meta import get_meta, set_meta

TABLE = "recall_changes"
LOGGED: tuple[str, ...] = ("episodes", "beliefs")
DDL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "tbl TEXT NOT NULL, tenant TEXT NOT NULL, row_id INTEGER NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_tenant_seq ON {TABLE} (tenant, seq)",
)
PRUNED_KEY = f"{TABLE}_pruned_to"  # meta: the highest seq ``prune`` removed


def log_rows(conn: Any, base: str, rows: Iterable[tuple[int, str]]) -> None:
    """Append ``(row id, tenant)`` of ``base`` to the log (inside the caller's transaction;
    SQLite only)."""
    conn.executemany(f"INSERT INTO {TABLE} (tbl, tenant, row_id) VALUES (?, ?, ?)",
                     [(base, tenant, int(row_id)) for row_id, tenant in rows])


def prune(conn: Any, keep: int) -> int:
    """Delete all but the newest ``keep`` entries (inside the caller's transaction); record
    the highest seq removed, so a process holding rows older than that rebuilds them instead
    of missing a change. Returns the entries removed."""
    top = conn.execute(f"SELECT max(seq) FROM {TABLE}").fetchone()[0]
    if top is None or top <= keep:
        return 0
    cut = int(top) - keep
    removed = int(conn.execute(f"DELETE FROM {TABLE} WHERE seq <= ?", (cut,)).rowcount or 0)
    if removed:
        pruned = int(get_meta(conn, PRUNED_KEY) or 0)
        set_meta(conn, PRUNED_KEY, str(max(pruned, cut)))
    return removed
