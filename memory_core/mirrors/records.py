"""Outbox changes -> ``Record``s: the current state of each changed object in the state db.

A change says only *which* object changed; its record is read when it is shipped, so the
mirror always receives the newest state (an object changed five times in one batch is
shipped once) and an object that no longer exists becomes a tombstone whatever the change
said. Reads are scoped by the change's tenant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_core import vectors
from memory_core.db.meta import get_meta
from memory_core.db.sqlite import Connection
from memory_core.mirrors.sink import FIELDS, KEY_FIELD, Record


def _columns(kind: str) -> tuple[str, ...]:
    extra = {"episode": ("turn_uids", "vector"), "entity": ("aliases",)}.get(kind, ())
    return tuple(f for f in FIELDS[kind] if f not in extra)


_TABLE = {"turn": "turns", "episode": "episodes", "entity": "entities", "belief": "beliefs"}


def _active_vector_table(conn: Connection) -> str | None:
    gen = get_meta(conn, vectors.GENERATION_KEY)
    if gen is None:
        return None
    table = vectors.vec_table("episodes", int(gen))
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    return table if exists else None


def _read(conn: Connection, tenant: str, kind: str, key: str,
          vec_table: str | None) -> dict[str, Any] | None:
    cols = _columns(kind)
    row = conn.execute(
        f"SELECT id, {', '.join(cols)} FROM {_TABLE[kind]} WHERE tenant = ? AND "
        f"{KEY_FIELD[kind]} = ?", (tenant, key)).fetchone()
    if row is None:
        return None
    rowid, values = row[0], dict(zip(cols, row[1:], strict=True))
    if kind == "episode":
        values["turn_uids"] = [r[0] for r in conn.execute(
            "SELECT t.turn_uid FROM episode_turns et JOIN turns t ON t.id = et.turn_id "
            "WHERE et.episode_id = ? ORDER BY t.idx, t.turn_uid", (rowid,))]
        blob = None
        if vec_table is not None:
            got = conn.execute(f"SELECT embedding FROM {vec_table} WHERE rowid = ?",
                               (rowid,)).fetchone()
            blob = got[0] if got else None
        values["vector"] = (np.frombuffer(blob, dtype=np.float32).tolist()
                            if blob is not None else None)
    elif kind == "entity":
        values["aliases"] = sorted(r[0] for r in conn.execute(
            "SELECT label FROM entity_aliases WHERE tenant = ? AND entity_id = ?",
            (tenant, key)))
    return values


def read_records(conn: Connection, changes: Iterable[tuple[str, str, str]],
                 kinds: frozenset[str] | None = None) -> list[Record]:
    """Records for ``(tenant, kind, object_id)`` changes (``kinds``: only those), one per
    object, in order of their last change. ``tenant`` changes become tenant clears."""
    wanted: dict[tuple[str, str, str], None] = {}
    for tenant, kind, object_id in changes:
        if kinds is not None and kind not in kinds:
            continue
        wanted.pop((tenant, kind, object_id), None)
        wanted[(tenant, kind, object_id)] = None
    vec_table = _active_vector_table(conn) if any(k == "episode" for _, k, _ in wanted) else None
    out: list[Record] = []
    for tenant, kind, key in wanted:
        if kind == "tenant":
            out.append(Record(tenant, "tenant", tenant, None))
        elif kind in _TABLE:
            out.append(Record(tenant, kind, key, _read(conn, tenant, kind, key, vec_table)))
    return out


def snapshot(conn: Connection, tenant: str, kinds: Sequence[str]) -> list[Record]:
    """Every object of ``tenant`` of ``kinds`` as records (a full re-ship, the tests)."""
    changes: list[tuple[str, str, str]] = []
    for kind in kinds:
        if kind in _TABLE:
            changes.extend((tenant, kind, r[0]) for r in conn.execute(
                f"SELECT {KEY_FIELD[kind]} FROM {_TABLE[kind]} WHERE tenant = ? ORDER BY id",
                (tenant,)))
    return read_records(conn, changes)
