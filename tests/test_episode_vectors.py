"""What an episode's vector embeds: its text without the day label, on every path that embeds
it (the write path, ``reindex``, filling a missing vector), once per turn."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from memory_core.embedders import HashEmbedder
from memory_core.model.turns import TurnInput
from memory_core.vectors import (
    VECTOR_TEXT,
    VECTOR_TEXT_KEY,
    VectorIndex,
    embedded_text,
    stored_vector,
    vec_table,
)
from memory_core.write.pipeline import record_turn_and_episode
from scripts.cli import main
from tests.helpers.memory import day, make_store

TEXT = "We moved to Denver in March, the kids love the snow."


class CountingEmbedder(HashEmbedder):
    """The hash embedder, remembering every list of texts it was asked to embed."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim=dim)
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed(texts)


def _vector(conn, generation: int, rowid: int) -> np.ndarray:
    row = conn.execute(f"SELECT embedding FROM {vec_table('episodes', generation)} "
                       "WHERE rowid = ?", (rowid,)).fetchone()
    assert row is not None, f"episode {rowid} has no vector in generation {generation}"
    return stored_vector(row[0])


@pytest.mark.parametrize(("base", "text", "expected"), [
    ("episodes", "[8 May 2023] Ana: hi", "Ana: hi"),
    ("episodes", "[31 December 1999] user: [1 May 2023] is a date", "user: [1 May 2023] is a date"),
    ("episodes", "Ana: see [8 May 2023] there", "Ana: see [8 May 2023] there"),  # not a prefix
    ("episodes", "[8 Mai 2023] Ana: hi", "[8 Mai 2023] Ana: hi"),  # not a label mnemo writes
    ("episodes", "Ana: hi", "Ana: hi"),  # a turn without a readable time has no label
    ("beliefs", "[8 May 2023] Ana: hi", "[8 May 2023] Ana: hi"),  # only episodes carry one
])
def test_embedded_text_drops_only_an_episodes_leading_day_label(base, text, expected) -> None:
    assert embedded_text(base, text) == expected


def test_every_path_embeds_the_episode_without_its_day(tmp_path: Path) -> None:
    store = make_store(tmp_path / "data", dim=32)
    counting = CountingEmbedder(dim=32)
    store.index = VectorIndex(counting)
    rec = record_turn_and_episode(store.db, store.index,
                                  TurnInput("t1", "s1", "u1", "user", TEXT, day(0), 0))
    stored = store.conn.execute("SELECT text FROM episodes WHERE id = ?",
                                (rec.episode_id,)).fetchone()[0]
    assert stored == f"[1 January 2024] user: {TEXT}"  # the stored text keeps the day
    # Embedded once, before the transaction, as the vector's text (no second call inside).
    assert counting.calls == [[f"user: {TEXT}"]]
    written = _vector(store.conn, 1, rec.episode_id)
    assert np.array_equal(written, counting.embed([f"user: {TEXT}"])[0])
    assert not np.array_equal(written, counting.embed([stored])[0])

    # A missing vector filled by reindex on a current index: the same vector.
    store.conn.execute(f"DELETE FROM {vec_table('episodes', 1)} WHERE rowid = ?",
                       (rec.episode_id,))
    report = store.index.reindex(store.conn)
    assert report.already_current and report.filled["episodes"] == 1
    assert np.array_equal(_vector(store.conn, 1, rec.episode_id), written)

    # A reindex for another embedder: the new generation embeds the same text.
    other = VectorIndex(HashEmbedder(dim=16))
    report = other.reindex(store.conn)
    assert report.generation == 2
    assert np.array_equal(_vector(store.conn, 2, rec.episode_id),
                          HashEmbedder(dim=16).embed([f"user: {TEXT}"])[0])
    store.db.close()


def test_an_index_of_dated_vectors_is_rebuilt_by_reindex_with_dense_search_on(
        tmp_path: Path) -> None:
    """A store whose vectors an older mnemo built (episodes embedded with their day; no
    ``vector_text`` in meta): dense search works, status and health say so, and reindex
    rebuilds every vector into a new generation, then fills only what is missing."""
    data = tmp_path / "data"
    store = make_store(data, dim=384)
    rec = record_turn_and_episode(store.db, store.index,
                                  TurnInput("t1", "s1", "u1", "user", TEXT, day(0), 0))
    assert store.index.state(store.conn).text_current
    dated = store.conn.execute("SELECT text FROM episodes").fetchone()[0]
    # As an older version left it: the day embedded, no record of the vector text.
    store.conn.execute(f"UPDATE {vec_table('episodes', 1)} SET embedding = ? WHERE rowid = ?",
                       (store.index.embedder.embed([dated])[0].tobytes(), rec.episode_id))
    store.conn.execute("DELETE FROM meta WHERE key = ?", (VECTOR_TEXT_KEY,))
    st = store.index.state(store.conn)
    assert st.match and st.dense_enabled and not st.text_current and st.recorded_text == "1"

    env = {"MNEMO_DATA_DIR": str(data)}
    status = CliRunner().invoke(main, ["memory", "status", "--json"], env=env)
    assert json.loads(status.stdout)["vector_text"] == {
        "recorded": "1", "current": VECTOR_TEXT, "rebuild": "run `mnemo memory reindex`"}
    human = CliRunner().invoke(main, ["memory", "status"], env=env)
    assert "vector text       1, older than 2" in human.output

    report = store.index.reindex(store.conn)
    assert not report.already_current and report.generation == 2
    assert report.embedded["episodes"] == 1
    st = store.index.state(store.conn)
    assert st.text_current and st.dense_enabled and st.generation == 2
    assert np.array_equal(_vector(store.conn, 2, rec.episode_id),
                          store.index.embedder.embed([f"user: {TEXT}"])[0])
    assert store.index.reindex(store.conn).nothing_to_do
    status = CliRunner().invoke(main, ["memory", "status", "--json"], env=env)
    assert json.loads(status.stdout)["vector_text"]["rebuild"] is None
    store.db.close()
