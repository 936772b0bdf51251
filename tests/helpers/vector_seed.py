"""Rows written the way the write path writes them (row, then its vector), and what the
vector tables hold."""

from __future__ import annotations

import uuid

from memory_core.vectors import VectorIndex, vec_table

NOW = "2024-01-01T00:00:00.000000Z"


def seed(conn, tenant: str, n_episodes: int, n_beliefs: int, index: VectorIndex) -> None:
    """Rows written the way the write path writes them: row, then its vector."""
    conn.execute("INSERT OR IGNORE INTO tenants VALUES (?, ?)", (tenant, NOW))
    texts = [f"{tenant} episode {i} about hiking trip number {i % 7}" for i in range(n_episodes)]
    vectors = index.embedder.embed(texts)
    for text, vec in zip(texts, vectors, strict=True):
        cur = conn.execute(
            "INSERT INTO episodes (tenant, episode_uid, session_id, tier, text, occurred_at, "
            "importance, created_at, updated_at) VALUES (?, ?, 's', 'recent', ?, ?, 0.5, ?, ?)",
            (tenant, f"ep-{uuid.uuid4()}", text, NOW, NOW, NOW))
        index.upsert(conn, "episodes", [(cur.lastrowid, tenant, vec)])
    for i in range(n_beliefs):
        text = f"user likes thing {i}"
        cur = conn.execute(
            "INSERT INTO beliefs (tenant, belief_uid, subject_id, predicate, object_text, text, "
            "valid_from, recorded_at, status, source, confidence) "
            "VALUES (?, ?, 'user', 'likes', ?, ?, ?, ?, 'active', 'heuristic', 0.7)",
            (tenant, f"b-{uuid.uuid4()}", f"thing {i}", text, NOW, NOW))
        index.upsert(conn, "beliefs", [(cur.lastrowid, tenant, index.embedder.embed([text])[0])])


def vector_rowids(conn, base: str, generation: int) -> list[int]:
    return sorted(r[0] for r in conn.execute(f"SELECT rowid FROM {vec_table(base, generation)}"))


def base_ids(conn, base: str) -> list[int]:
    return sorted(r[0] for r in conn.execute(f"SELECT id FROM {base}"))
