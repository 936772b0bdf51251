"""Dense vectors on the Postgres state store: ``vectors.VectorIndex``'s engine hooks.

A generation's table ``<base>_vec_g<N>`` is a plain table ``(rowid bigint primary key,
tenant text, embedding)`` — the same columns the SQLite ``vec0`` tables have, so the
index's deletes and point lookups are the same statements. ``embedding`` is pgvector's
``vector(dim)`` with an HNSW index (cosine) when the database has pgvector (``meta``
``vector_type``), else ``real[]``, searched by an exact scan of the tenant's vectors.
Distances are cosine distances (1 - cosine similarity) on both, as sqlite-vec's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memory_core.db.dialect import SCHEMA


def vector_type(conn: Any) -> str:
    cached = getattr(conn, "_vector_type", None)
    if cached is None:
        row = conn.raw.execute("SELECT value FROM meta WHERE key = 'vector_type'").fetchone()
        cached = str(row[0]) if row else "real[]"
        conn._vector_type = cached
    return str(cached)


def create_table(conn: Any, table: str, dim: int) -> None:
    pgvector = vector_type(conn) == "vector"
    column = f"vector({int(dim)})" if pgvector else "real[]"
    conn.raw.execute(f"CREATE TABLE IF NOT EXISTS {table} (rowid bigint PRIMARY KEY, "
                     f"tenant text NOT NULL, embedding {column} NOT NULL)")
    conn.raw.execute(f"CREATE INDEX IF NOT EXISTS {table}_tenant ON {table} (tenant)")
    if pgvector:
        conn.raw.execute(f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} USING hnsw "
                         "(embedding vector_cosine_ops)")


def upsert_sql(table: str) -> str:
    """Write or replace a vector in one statement (vec0 has no upsert: SQLite deletes first)."""
    return (f"INSERT INTO {table} (rowid, tenant, embedding) VALUES (?, ?, ?) ON CONFLICT "
            "(rowid) DO UPDATE SET tenant = excluded.tenant, embedding = excluded.embedding")


def param(conn: Any, vector: np.ndarray) -> Any:
    """A vector as the table's column takes it."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    if vector_type(conn) == "vector":
        return "[" + ",".join(repr(float(v)) for v in values) + "]"
    return values


def search(conn: Any, table: str, tenant: str, vector: np.ndarray,
           k: int) -> list[tuple[int, float]]:
    """Nearest ``k`` rowids of ``tenant`` by cosine distance, nearest first."""
    if vector_type(conn) == "vector":
        if not getattr(conn, "_iterative_scan", False):
            # A tenant filter after an HNSW scan could otherwise return fewer than k rows.
            conn.raw.execute("SET hnsw.iterative_scan = relaxed_order")
            conn._iterative_scan = True
        rows = conn.raw.execute(
            f"SELECT rowid, d FROM (SELECT rowid, embedding <=> %s::vector AS d FROM {table} "
            "WHERE tenant = %s ORDER BY d LIMIT %s) AS n ORDER BY d, rowid",
            (param(conn, vector), tenant, int(k))).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]
    rows = conn.raw.execute(f"SELECT rowid, embedding FROM {table} WHERE tenant = %s",
                            (tenant,)).fetchall()
    if not rows:
        return []
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    mat = np.array([r[1] for r in rows], dtype=np.float32)
    q = np.asarray(vector, dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1) * (np.linalg.norm(q) or 1.0)
    dist = 1.0 - (mat @ q) / np.where(norms == 0, 1.0, norms)
    order = np.lexsort((ids, dist))[:k]
    return [(int(ids[i]), float(dist[i])) for i in order]


def table_exists(conn: Any, table: str) -> bool:
    row = conn.raw.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.{table}",)).fetchone()
    return bool(row and row[0])


def table_names(conn: Any, prefix: str) -> list[str]:
    """Tables of the state schema whose name starts with ``prefix``."""
    rows = conn.raw.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s AND "
                            "starts_with(tablename, %s)", (SCHEMA, prefix)).fetchall()
    return [str(r[0]) for r in rows]
