"""Reconsolidation partitions: the stable hash that assigns rows, and per-partition progress.

A row belongs to partition ``bucket(kind, tenant, key) % P``: the first 8 bytes of a sha256,
the same on every process, machine and Python version (``hash()`` is salted per process, so
it is never used). Beliefs and entities hash by ``("subject", tenant, entity id)``, so a
subject's beliefs, its entity row and its counts are in one partition; episodes hash by
``("episode-day", tenant, UTC day)``: duplicates are said on the same day, so they always
meet in one partition.

Progress of ``(run_id, partition)`` is a JSON row in the state db's ``meta`` table (phase,
cursor, counts so far), written by ``save_progress`` inside the transaction whose effect it
records, so a kill loses at most the uncommitted page and a rerun continues after the last
committed one. A finished partition leaves an ``applied_jobs`` key; the progress rows of a
run are dropped when its last partition finishes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from memory_core.db.meta import get_meta, set_meta

_PREFIX = "recon:"


def digest(kind: str, tenant: str, key: str) -> str:
    """The stable sha256 (hex) of one (kind, tenant, key)."""
    return hashlib.sha256(f"{kind}\x1f{tenant}\x1f{key}".encode()).hexdigest()


def bucket_of(hex_digest: str, partitions: int) -> int:
    """The partition of a ``digest``: its first 8 bytes modulo ``partitions``."""
    return int(hex_digest[:16], 16) % partitions


def bucket(kind: str, tenant: str, key: str, partitions: int) -> int:
    """The partition of one (kind, tenant, key) among ``partitions``."""
    return bucket_of(digest(kind, tenant, key), partitions)


@dataclass
class Progress:
    """Where a partition run is: the phase, the cursor inside it, what it did so far."""

    phase: str
    cursor: Any
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, n: int = 1) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + n


def progress_key(run_id: str, partition: int) -> str:
    return f"{_PREFIX}{run_id}:{partition}"


def done_key(run_id: str, partition: int) -> str:
    return f"global_reconsolidation:{run_id}:{partition}"


def load_progress(conn: Any, run_id: str, partition: int, first_phase: str) -> Progress:
    value = get_meta(conn, progress_key(run_id, partition))
    if value is None:
        return Progress(first_phase, None)
    data = json.loads(value)
    return Progress(data["phase"], data["cursor"], dict(data["counts"]))


def save_progress(conn: Any, run_id: str, partition: int, progress: Progress) -> None:
    """Record ``progress``; call inside the transaction of the effect it records."""
    value = json.dumps({"phase": progress.phase, "cursor": progress.cursor,
                        "counts": progress.counts}, sort_keys=True)
    set_meta(conn, progress_key(run_id, partition), value)


def is_done(conn: Any, run_id: str, partition: int) -> bool:
    return conn.execute("SELECT 1 FROM applied_jobs WHERE key = ?",
                        (done_key(run_id, partition),)).fetchone() is not None


def mark_done(conn: Any, run_id: str, partition: int, now: str, last: bool) -> None:
    """Record the partition as finished (in the transaction of its last effect); the last
    partition drops the run's progress rows."""
    conn.execute("INSERT OR IGNORE INTO applied_jobs (key, applied_at) VALUES (?, ?)",
                 (done_key(run_id, partition), now))
    if last:
        prefix = f"{_PREFIX}{run_id}:"
        conn.execute("DELETE FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
