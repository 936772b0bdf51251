"""Helpers for the memory-model tests: a tenant-ready store, snapshots, a byte scan."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.clock import to_db
from memory_core.db import open_state
from memory_core.db.stores import Database
from memory_core.embedders import HashEmbedder
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


@dataclass
class Store:
    db: Database
    index: VectorIndex

    @property
    def conn(self) -> Any:
        return self.db.conn


def make_store(data_dir: Path, tenants: tuple[str, ...] = ("t1",), dim: int = 32) -> Store:
    db = open_state(Settings.from_env({}, data_dir=data_dir))
    for tenant in tenants:
        create_tenant(db.conn, tenant)
    index = VectorIndex(HashEmbedder(dim=dim))
    index.ensure(db.conn)
    return Store(db, index)


def insert_episodes(conn: Any, rows: list[tuple[int, str, str, str, datetime]]) -> None:
    """Bare episode rows (id, tenant, uid, text, time), for the keyword-search tests: one
    session, long-term tier, no turns or vectors; the full-text triggers index them."""
    conn.executemany(
        "INSERT INTO episodes (id, tenant, episode_uid, session_id, tier, text, occurred_at, "
        "importance, created_at, updated_at) VALUES (?, ?, ?, 's1', 'long_term', ?, ?, 0.5, "
        "?, ?)",
        [(i, tenant, uid, text, to_db(at), to_db(at), to_db(at))
         for i, tenant, uid, text, at in rows])


BELIEF_COLUMNS = ("tenant", "belief_uid", "subject_id", "predicate", "object_text",
                  "object_norm", "object_entity_id", "text", "valid_from", "valid_to",
                  "stated_valid_to", "status", "source", "confidence", "turn_uid", "negated")


def belief_table(conn: Any, tenant: str | None = None) -> list[tuple[Any, ...]]:
    """The belief rows without row ids and system time (which depend on arrival order)."""
    cols = ", ".join(BELIEF_COLUMNS)
    if tenant is None:
        rows = conn.execute(f"SELECT {cols} FROM beliefs").fetchall()
    else:
        rows = conn.execute(f"SELECT {cols} FROM beliefs WHERE tenant = ?", (tenant,)).fetchall()
    return sorted(rows, key=repr)


def row_counts(conn: Any) -> dict[str, int]:
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    out = {}
    for name in names:
        try:
            out[name] = conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
        except Exception:  # some virtual-table internals refuse a count
            continue
    return out


def scan_for(conn: Any, needle: bytes) -> list[str]:
    """Tables (and columns) of every table in sqlite_master whose raw values hold ``needle``."""
    hits = []
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        try:
            cur = conn.execute(f'SELECT * FROM "{table}"')
        except Exception:  # e.g. a virtual table that cannot be scanned
            continue
        names = [d[0] for d in cur.description]
        for row in cur:
            for name, value in zip(names, row, strict=True):
                if isinstance(value, str):
                    raw = value.encode("utf-8", "surrogatepass")
                elif isinstance(value, bytes | bytearray | memoryview):
                    raw = bytes(value)
                else:
                    continue
                if needle.lower() in raw.lower():
                    hits.append(f"{table}.{name}")
    return hits
