"""What ``mnemo memory status`` reports: embedder match, row, vector and missing-vector
counts."""

from __future__ import annotations

from typing import Any

from memory_core.db.stores import Database
from memory_core.vectors import VectorIndex

COUNTED_TABLES = ("tenants", "turns", "episodes", "entities", "beliefs", "tombstones")


def memory_status(state: Database, index: VectorIndex) -> dict[str, Any]:
    """A JSON-able summary of the state db and the embedder mismatch guard."""
    conn = state.conn
    st = index.state(conn)
    vectors = index.counts(conn)
    missing = index.missing(conn)
    tables = {}
    for table in COUNTED_TABLES:
        rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        # Rows with no vector in the recorded generation: `mnemo memory reindex` fills them.
        gap = None if table not in vectors else (missing or {}).get(table, rows)
        tables[table] = {"rows": rows, "vectors": vectors.get(table), "missing": gap}
    if st.dense_enabled:
        dense = "on"
    elif st.recorded_identity is None:
        dense = "off: no vector index yet (it is created on the first write)"
    else:
        dense = "off: embedder mismatch, run `mnemo memory reindex`"
    return {
        "database": str(state.path),
        "schema_version": state.version(),
        "embedder": {
            "active": st.active_identity,
            "recorded": st.recorded_identity,
            "match": st.match if st.recorded_identity is not None else None,
            "semantic": index.embedder.semantic,
        },
        "dense_search": dense,
        "vector_generation": st.generation,
        "reindex_in_progress": st.reindex_target is not None,
        "missing_vectors": sum(t["missing"] or 0 for t in tables.values()),
        "tables": tables,
    }
