"""Write memory rows straight into a state db for recall tests (no extraction involved).

Rows follow the schema and the write path's conventions (alias keys, rendered belief text,
vectors in the active generation), so recall sees them as the workers would leave them.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_core.clock import to_db
from memory_core.db.sqlite import atomic
from memory_core.model.hygiene import normalize_label
from memory_core.model.tenants import create_tenant
from memory_core.vectors import VectorIndex

T0 = datetime(2024, 1, 1, tzinfo=UTC)
_ids = itertools.count(1)


class Seeder:
    """Inserts tenants, turns + episodes, entities and beliefs, with vectors."""

    def __init__(self, conn: Any, index: VectorIndex) -> None:
        self.conn = conn
        self.index = index
        index.ensure(conn)

    def tenant(self, tenant: str) -> None:
        create_tenant(self.conn, tenant)
        self.entity(tenant, "user", "user")

    def turn(self, tenant: str, text: str, *, session: str = "s1", at: datetime | None = None,
             speaker: str = "user", tier: str = "recent", uid: str | None = None) -> str:
        """A turn and its one-turn episode; returns the turn_uid."""
        n = next(_ids)
        uid = uid or f"t{n}"
        when = to_db(at or T0 + timedelta(minutes=n))
        vec = self.index.embedder.embed([text])[0]
        with atomic(self.conn):
            cur = self.conn.execute(
                "INSERT INTO turns (tenant, turn_uid, session_id, idx, speaker, occurred_at, "
                "text, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (tenant, uid, session, n, speaker, when, text, when))
            turn_id = cur.lastrowid
            cur = self.conn.execute(
                "INSERT INTO episodes (tenant, episode_uid, session_id, tier, text, occurred_at, "
                "importance, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 0.5, ?, ?)",
                (tenant, f"ep_{uid}", session, tier, text, when, when, when))
            episode_id = cur.lastrowid
            self.conn.execute("INSERT INTO episode_turns (episode_id, turn_id) VALUES (?, ?)",
                              (episode_id, turn_id))
            self.index.upsert(self.conn, "episodes", [(episode_id, tenant, vec)])
        return uid

    def entity(self, tenant: str, entity_id: str, name: str, *aliases: str) -> None:
        now = to_db(T0)
        with atomic(self.conn):
            self.conn.execute(
                "INSERT OR IGNORE INTO entities (tenant, entity_id, name, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?)", (tenant, entity_id, name, now, now))
            for label in (name, *aliases):
                self.conn.execute(
                    "INSERT OR IGNORE INTO entity_aliases (tenant, alias_norm, entity_id, label, "
                    "created_at) VALUES (?, ?, ?, ?, ?)",
                    (tenant, normalize_label(label), entity_id, label, now))

    def belief(self, tenant: str, subject: str, predicate: str, obj: str, *,
               object_entity: str | None = None, valid_from: datetime = T0,
               valid_to: datetime | None = None, status: str = "active",
               confidence: float = 0.9, turn_uid: str | None = None,
               subject_name: str | None = None) -> int:
        text = f"{subject_name or subject} {predicate.replace('_', ' ')} {obj}"
        vec = self.index.embedder.embed([text])[0]
        n = next(_ids)
        with atomic(self.conn):
            cur = self.conn.execute(
                "INSERT INTO beliefs (tenant, belief_uid, subject_id, predicate, object_text, "
                "object_entity_id, text, valid_from, valid_to, recorded_at, status, source, "
                "confidence, turn_uid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'heuristic', ?, ?)",
                (tenant, f"b_{n}", subject, predicate, obj, object_entity, text,
                 to_db(valid_from), to_db(valid_to) if valid_to else None, to_db(valid_from),
                 status, confidence, turn_uid))
            self.index.upsert(self.conn, "beliefs", [(cur.lastrowid, tenant, vec)])
        return int(cur.lastrowid)
