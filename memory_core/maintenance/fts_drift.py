"""The FTS drift check: each full-text index holds one document per row of its base table,
and ``fts_stats`` the rows of each tenant.

The FTS5 tables are contentless indexes kept in step by triggers (``db.fts``), so they can
only drift through damage or a write that bypassed the triggers. The check compares, in one
snapshot, the row count of ``<fts>_docsize`` (one row per indexed document) with the base
table's, and each tenant's rows in ``fts_stats`` with its rows in the base table; on a
mismatch, or when the index was made by another version of the tokenizer
(``fts.TOKENS_VERSION``), it indexes the base rows again. The rebuild holds the write lock
for as long as it takes (seconds per million rows): a repair, not a habit.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from memory_core.db import fts as fts_index
from memory_core.db import pg_fts
from memory_core.db.dialect import is_postgres
from memory_core.db.schema_state import FTS_TABLES
from memory_core.db.sqlite import Connection, atomic

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class FtsCheck:
    table: str
    indexed: int  # rows of <fts>_docsize before any rebuild
    rows: int  # rows of the base table
    rebuilt: bool
    stats_off: int = 0  # tenants whose fts_stats rows disagreed with the base table


def _counts(conn: Connection, fts: str, base: str) -> tuple[int, int, int]:
    # The Postgres primary's index is its postings and row lengths (db.pg_fts).
    lengths = f"{base}_fts_len" if is_postgres(conn) else f"{fts}_docsize"
    indexed = conn.execute(f"SELECT count(*) FROM {lengths}").fetchone()[0]
    rows = conn.execute(f"SELECT count(*) FROM {base}").fetchone()[0]
    stats_off = conn.execute(
        f"SELECT count(*) FROM (SELECT tenant, count(*) AS n FROM {base} GROUP BY tenant) b "
        "FULL JOIN (SELECT tenant, rows FROM fts_stats WHERE tbl = ? AND rows != 0) s "
        "ON s.tenant = b.tenant WHERE s.rows IS NOT b.n", (base,)).fetchone()[0]
    return int(indexed), int(rows), int(stats_off)


def check_fts_drift(conn: Connection) -> list[FtsCheck]:
    """Check every FTS table (``schema_state.FTS_TABLES``); rebuild the ones that drifted."""
    out = []
    stale = fts_index.recorded_version(conn) != fts_index.TOKENS_VERSION
    for fts, base in FTS_TABLES.items():
        with atomic(conn, immediate=False):  # one snapshot for every count
            indexed, rows, stats_off = _counts(conn, fts, base)
        rebuilt = False
        if stale or indexed != rows or stats_off:
            with atomic(conn):
                indexed, rows, stats_off = _counts(conn, fts, base)  # still so, under the lock?
                if stale or indexed != rows or stats_off:
                    if is_postgres(conn):
                        pg_fts.rebuild(conn, base)
                    else:
                        fts_index.fill(conn, fts, base)
                    rebuilt = True
            if rebuilt:
                log.warning("fts_drift_repaired", table=fts, indexed=indexed, rows=rows,
                            stats_off=stats_off, tokenizer_changed=stale)
        out.append(FtsCheck(fts, indexed, rows, rebuilt, stats_off))
    if stale:
        with atomic(conn):
            fts_index.record_version(conn)
    return out
