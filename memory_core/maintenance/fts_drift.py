"""The FTS drift check: each full-text index holds one document per row of its base table.

The FTS5 tables are external-content indexes kept in step by triggers, so they can only
drift through damage or a write that bypassed the triggers. The check compares the row
count of ``<fts>_docsize`` (one row per indexed document) with the base table's, both read
in one snapshot, and rebuilds the index from the base rows on a mismatch. The rebuild holds
the write lock for as long as it takes (seconds per million rows): a repair, not a habit.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from memory_core.db.schema_state import FTS_TABLES
from memory_core.db.sqlite import Connection, atomic

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class FtsCheck:
    table: str
    indexed: int  # rows of <fts>_docsize before any rebuild
    rows: int  # rows of the base table
    rebuilt: bool


def _counts(conn: Connection, fts: str, base: str) -> tuple[int, int]:
    indexed = conn.execute(f"SELECT count(*) FROM {fts}_docsize").fetchone()[0]
    rows = conn.execute(f"SELECT count(*) FROM {base}").fetchone()[0]
    return int(indexed), int(rows)


def check_fts_drift(conn: Connection) -> list[FtsCheck]:
    """Check every FTS table (``schema_state.FTS_TABLES``); rebuild the ones that drifted."""
    out = []
    for fts, base in FTS_TABLES.items():
        with atomic(conn, immediate=False):  # one snapshot for both counts
            indexed, rows = _counts(conn, fts, base)
        rebuilt = False
        if indexed != rows:
            with atomic(conn):
                indexed, rows = _counts(conn, fts, base)  # still so under the write lock?
                if indexed != rows:
                    conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")
                    rebuilt = True
            if rebuilt:
                log.warning("fts_drift_repaired", table=fts, indexed=indexed, rows=rows)
        out.append(FtsCheck(fts, indexed, rows, rebuilt))
    return out
