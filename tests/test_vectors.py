"""The embedder mismatch guard and reindexing, on real database files."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from memory_core.db import open_state
from memory_core.db.stores import Database
from memory_core.embedders import FastEmbedEmbedder, HashEmbedder
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex, vec_table
from scripts.cli import main
from tests.conftest import REPO, shared_model_path

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


def test_first_write_records_the_embedder_and_dense_search_works(state_db: Database) -> None:
    index = VectorIndex(HashEmbedder())
    st = index.ensure(state_db.conn)
    assert st.recorded_identity == "hash:v1:dim=384" and st.dense_enabled
    seed(state_db.conn, "t1", 20, 5, index)
    seed(state_db.conn, "t2", 20, 5, index)
    query = index.embedder.embed(["t1 episode about hiking trip number 3"])[0]
    hits = index.search(state_db.conn, "episodes", "t1", query, 5)
    assert len(hits) == 5
    tenants = {state_db.conn.execute("SELECT tenant FROM episodes WHERE id = ?", (i,)).fetchone()[0]
               for i, _ in hits}
    assert tenants == {"t1"}  # the partition key keeps tenants apart
    assert index.counts(state_db.conn) == {"episodes": 40, "beliefs": 10}


def test_switching_embedder_turns_dense_off_until_reindex(state_db: Database) -> None:
    old = VectorIndex(HashEmbedder(dim=384))
    old.ensure(state_db.conn)
    seed(state_db.conn, "t1", 30, 10, old)
    new = VectorIndex(HashEmbedder(dim=128))
    st = new.state(state_db.conn)
    assert not st.match and not st.dense_enabled
    query = new.embedder.embed(["hiking"])[0]
    assert new.search(state_db.conn, "episodes", "t1", query, 5) == []  # never mixed
    assert new.upsert(state_db.conn, "episodes", [(1, "t1", query)]) == 0
    report = new.reindex(state_db.conn, batch_size=7)
    assert not report.already_current and report.embedded == {"episodes": 30, "beliefs": 10}
    st = new.state(state_db.conn)
    assert st.match and st.dense_enabled and st.generation == 2
    assert len(new.search(state_db.conn, "episodes", "t1", query, 5)) == 5
    for base in ("episodes", "beliefs"):
        assert vector_rowids(state_db.conn, base, 2) == base_ids(state_db.conn, base)
    # the old generation is gone, and the old embedder now sees a mismatch
    assert not state_db.conn.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'episodes_vec_g1'").fetchone()
    assert not old.dense_enabled(state_db.conn)
    again = new.reindex(state_db.conn)
    assert again.already_current and again.generation == 2


def test_a_killed_reindex_resumes_and_every_vector_is_present_once(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path)
    db = open_state(settings)
    old = VectorIndex(HashEmbedder(dim=384))
    old.ensure(db.conn)
    seed(db.conn, "t1", 120, 40, old)
    db.close()
    killed = subprocess.run(
        [sys.executable, "-m", "tests.helpers.reindex_killer", str(tmp_path), "64", "5"],
        cwd=REPO, capture_output=True, timeout=60)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    db = open_state(settings)
    new = VectorIndex(HashEmbedder(dim=64))
    st = new.state(db.conn)
    assert st.reindex_target is not None and not st.match  # killed midway
    partial = len(vector_rowids(db.conn, "episodes", st.reindex_target["generation"]))
    assert 0 < partial < 120
    seed(db.conn, "t1", 5, 0, new)  # rows written while the reindex was interrupted
    report = new.reindex(db.conn, batch_size=10)
    assert report.generation == st.reindex_target["generation"]  # same target, resumed
    for base in ("episodes", "beliefs"):
        ids = vector_rowids(db.conn, base, report.generation)
        assert ids == base_ids(db.conn, base)  # every row, exactly once
        assert len(ids) == len(set(ids))
    assert new.state(db.conn).dense_enabled
    db.close()


def test_delete_removes_vectors_from_every_generation(state_db: Database) -> None:
    index = VectorIndex(HashEmbedder())
    index.ensure(state_db.conn)
    seed(state_db.conn, "t1", 3, 0, index)
    ids = base_ids(state_db.conn, "episodes")
    assert index.delete(state_db.conn, "episodes", ids[:2]) == 0
    assert vector_rowids(state_db.conn, "episodes", 1) == ids[2:]


def _status(env: dict) -> dict:
    result = CliRunner().invoke(main, ["memory", "status", "--json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cli_status_and_reindex_across_an_embedder_switch(tmp_path: Path) -> None:
    model = shared_model_path()
    hash_env = {"MNEMO_DATA_DIR": str(tmp_path)}
    fast_env = {**hash_env, "MNEMO_EMBEDDER": "fastembed",
                "MNEMO_EMBED_MODEL": "sentence-transformers/all-MiniLM-L6-v2",
                "MNEMO_EMBED_MODEL_PATH": str(model)}
    db = open_state(Settings.from_env({}, data_dir=tmp_path))
    index = VectorIndex(HashEmbedder())
    index.ensure(db.conn)
    seed(db.conn, "t1", 12, 4, index)
    db.close()

    before = _status(hash_env)
    assert before["embedder"]["match"] is True and before["dense_search"] == "on"
    assert before["tables"]["episodes"] == {"rows": 12, "vectors": 12}

    switched = _status(fast_env)
    assert switched["embedder"]["match"] is False
    assert switched["embedder"]["recorded"] == "hash:v1:dim=384"
    assert switched["embedder"]["active"].startswith("fastembed:")
    assert "mismatch" in switched["dense_search"]
    human = CliRunner().invoke(main, ["memory", "status"], env=fast_env)
    assert "match             NO" in human.output and "mnemo memory reindex" in human.output

    run = CliRunner().invoke(main, ["memory", "reindex", "--json"], env=fast_env)
    assert run.exit_code == 0, run.output
    after = _status(fast_env)
    assert after["embedder"]["match"] is True and after["dense_search"] == "on"
    assert after["tables"]["episodes"] == {"rows": 12, "vectors": 12}
    assert after["tables"]["beliefs"] == {"rows": 4, "vectors": 4}

    db = open_state(Settings.from_env({}, data_dir=tmp_path))
    fast = VectorIndex(FastEmbedEmbedder(model_name="sentence-transformers/all-MiniLM-L6-v2",
                                         model_path=str(model)))
    query = fast.embedder.embed(["a hiking trip"])[0]
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-3)
    assert len(fast.search(db.conn, "episodes", "t1", query, 3)) == 3
    db.close()
