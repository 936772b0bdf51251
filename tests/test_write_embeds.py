"""What the post-turn write path embeds: each stored text once, nothing it does not store,
and never while it holds the write transaction (the model's time would hold every writer)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_core.embedders.base import Embedder, WrappingEmbedder
from memory_core.write.pipeline import (
    anchor_turn,
    extract_and_apply,
    micro_consolidate,
    record_turn_and_episode,
)
from tests.helpers.memory import day, make_store

TURNS = [
    "My sister Maya lives in Denver.",
    "Maya works at Acme Robotics now.",
    "I live in Boston and I work at Globex.",
    "My friend Tomas moved to Lisbon last year.",
    "Tomas works at Initech.",
    "Priya lives in Austin.",
    "Maya works at Acme Robotics now.",  # the same statement again, in another turn
]


class Recording(WrappingEmbedder):
    def __init__(self, inner: Embedder, conn: Any) -> None:
        super().__init__(inner)
        self.conn = conn
        self.texts: list[str] = []
        self.in_transaction = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        self.in_transaction += bool(texts) and self.conn.in_transaction
        return self.inner.embed(texts)


def test_each_stored_text_is_embedded_once_and_outside_the_transaction(tmp_path: Path) -> None:
    store = make_store(tmp_path / "data")
    rec = Recording(store.index.embedder, store.conn)
    store.index.embedder = rec
    for i, text in enumerate(TURNS):
        uid = f"u{i}"
        record_turn_and_episode(store.db, store.index, {
            "tenant": "t1", "session_id": "s1", "turn_uid": uid, "index": i,
            "speaker": "user", "text": text, "occurred_at": day(i).isoformat()})
        extract_and_apply(store.db, store.index, "t1", uid)
        anchor_turn(store.db, store.index, "t1", uid)
        micro_consolidate(store.db, store.index, "t1", "s1", turn_uid=uid)
    conn = store.conn
    anchors = conn.execute("SELECT count(*) FROM beliefs WHERE source = 'system_tool'")
    # Priya reaches the hub through an anchor; Maya through "user has_sibling Maya" (a
    # name, no longer taken for a date: hygiene)
    assert anchors.fetchone()[0] >= 1
    assert conn.execute("SELECT count(*) FROM beliefs WHERE subject_id = 'user' AND "
                        "predicate = 'has_sibling' AND object_entity_id IS NOT NULL"
                        ).fetchone()[0] == 1
    stored = [r[0] for r in conn.execute(
        "SELECT text FROM episodes UNION ALL SELECT text FROM beliefs")]
    vectors = sum(conn.execute(f"SELECT count(*) FROM {t}_vec_g1").fetchone()[0]
                  for t in ("episodes", "beliefs"))
    assert vectors == len(stored)
    assert rec.in_transaction == 0
    assert sorted(rec.texts) == sorted(stored)  # each once: none twice, none unstored
    store.db.close()
