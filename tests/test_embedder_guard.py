"""The data's embedder rules the worker: a worker of another embedder refuses to start, and
rows without a vector are counted by `mnemo memory status` and filled by `reindex`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_core.db import open_state
from memory_core.db.sqlite import atomic
from memory_core.embedders import FastEmbedEmbedder, HashEmbedder
from memory_core.embedders.identity import mismatch_message
from memory_core.errors import EmbedderMismatchError
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex, vec_table
from scripts.cli import main
from tests.conftest import REPO, shared_model_path
from tests.helpers.vector_seed import base_ids, seed, vector_rowids
from workers.context import claim_embedder
from workers.pool import WorkerPool

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def fast_env(model: Path) -> dict[str, str]:
    return {"MNEMO_EMBEDDER": "fastembed", "MNEMO_EMBED_MODEL": MODEL,
            "MNEMO_EMBED_MODEL_PATH": str(model)}


def seeded(data_dir: Path, index: VectorIndex, episodes: int = 6, beliefs: int = 3) -> None:
    db = open_state(Settings.from_env({}, data_dir=data_dir))
    try:
        index.ensure(db.conn)
        seed(db.conn, "t1", episodes, beliefs, index)
    finally:
        db.close()


def snapshot(data_dir: Path) -> dict[str, Any]:
    """What a refused worker must not change: the embedder record, rows and vectors."""
    db = open_state(Settings.from_env({}, data_dir=data_dir))
    try:
        conn = db.conn
        gen = int(conn.execute("SELECT value FROM meta WHERE key = 'vector_generation'"
                               ).fetchone()[0])
        return {
            "meta": sorted(conn.execute("SELECT key, value FROM meta "
                                        "WHERE key LIKE 'embedder%' OR key LIKE 'vector%' "
                                        "OR key LIKE 'reindex%'").fetchall()),
            "rows": {b: base_ids(conn, b) for b in ("episodes", "beliefs")},
            "tenants": [r[0] for r in conn.execute("SELECT tenant FROM tenants ORDER BY 1")],
            "vectors": {b: conn.execute(f"SELECT rowid, embedding FROM {vec_table(b, gen)} "
                                        "ORDER BY rowid").fetchall()
                        for b in ("episodes", "beliefs")},
        }
    finally:
        db.close()


def run(args: list[str], data_dir: Path, extra_env: dict[str, str],
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a fresh process group with only the given MNEMO_* settings; a
    process that does not exit in time is killed with its children, and the test fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update({"MNEMO_DATA_DIR": str(data_dir), **extra_env})
    proc = subprocess.Popen([sys.executable, *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{args[-4:]} still running after {timeout} s: it did not refuse to start")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def run_mnemo(args: list[str], data_dir: Path,
              extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run(["-c", "from scripts.cli import main; main()", *args], data_dir, extra_env)


def one_line(text: str) -> str:
    return " ".join(text.split())  # click wraps nothing, but the log may: compare flat


def test_a_hash_worker_refuses_data_recorded_for_fastembed(tmp_path: Path) -> None:
    model = shared_model_path()
    fast = VectorIndex(FastEmbedEmbedder(model_name=MODEL, model_path=str(model)))
    seeded(tmp_path, fast)
    before = snapshot(tmp_path)

    done = run_mnemo(["worker", "--processes", "1", "--threads", "1"], tmp_path, {})

    assert done.returncode == 1, done.stderr[-2000:]
    error = one_line(done.stderr)
    assert "Error: the data in" in error and "refuses to start" in error
    assert f"vectors made by fastembed (model {MODEL}, 384 dims)" in error
    assert "this worker's embedder is hash (384 dims)" in error
    assert f"MNEMO_EMBEDDER=fastembed, MNEMO_EMBED_MODEL={MODEL}" in error
    assert "MNEMO_EMBED_MODEL_PATH" in error and "`mnemo memory reindex`" in error
    assert str(model) not in error  # the recorded identity names no local path
    assert "worker_process_started" not in done.stderr  # no process was ever started
    assert snapshot(tmp_path) == before


def test_a_worker_process_itself_refuses_before_taking_a_message(tmp_path: Path) -> None:
    """Without the pool's check (a process started on its own), the process exits 1."""
    seeded(tmp_path, VectorIndex(HashEmbedder(dim=64)))
    before = snapshot(tmp_path)
    code = ("from memory_core.settings import Settings\n"
            "from workers.entry import run_worker_process\n"
            "run_worker_process(Settings.from_env(), 1)\n")
    done = run(["-c", code], tmp_path, {"MNEMO_LOG_FORMAT": "json"})
    assert done.returncode == 1, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "worker_refused" in output and "EmbedderMismatchError" in output
    assert "hash (64 dims)" in output and "hash (384 dims)" in output
    assert "worker_started" not in output
    assert snapshot(tmp_path) == before


def test_mnemo_up_with_fastembed_refuses_data_recorded_for_hash(tmp_path: Path) -> None:
    model = shared_model_path()
    seeded(tmp_path, VectorIndex(HashEmbedder()))
    before = snapshot(tmp_path)

    done = run_mnemo(["up", "--processes", "1", "--threads", "1"], tmp_path, fast_env(model))

    assert done.returncode == 1, done.stderr[-2000:]
    error = one_line(done.stderr)
    assert "vectors made by hash (384 dims)" in error
    assert f"this worker's embedder is fastembed (model {MODEL}, 384 dims)" in error
    assert "MNEMO_EMBEDDER=hash and MNEMO_HASH_DIM=384" in error
    assert "scheduler_" not in done.stderr  # the scheduler never started either
    assert snapshot(tmp_path) == before


def test_a_fresh_data_dir_records_the_workers_embedder(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path, hash_dim=48)
    pool = WorkerPool(settings, processes=0, threads=1)  # the preflight alone, no process
    pool.start()
    pool.stop()
    db = open_state(settings)
    try:
        st = VectorIndex(HashEmbedder(dim=48)).state(db.conn)
        assert st.recorded_identity == "hash:v1:dim=48" and st.dense_enabled
    finally:
        db.close()
    claim_embedder(settings)  # the same embedder again: accepted
    with pytest.raises(EmbedderMismatchError, match=r"hash \(48 dims\).*hash \(32 dims\)"):
        claim_embedder(Settings.from_env({}, data_dir=tmp_path, hash_dim=32))


def test_the_message_names_both_embedders_and_both_fixes() -> None:
    recorded = f"fastembed:{MODEL}:dim=384:path-sha256=0123456789abcdef"
    text = mismatch_message(recorded, "hash:v1:dim=384", "the data in /d/memory_state.db")
    assert text.startswith("the data in /d/memory_state.db holds vectors made by fastembed "
                           f"(model {MODEL}, 384 dims), but this worker's embedder is hash "
                           "(384 dims)")
    assert "same ONNX export (model file sha256 0123456789abcdef...)" in text
    assert text.endswith("run `mnemo memory reindex` with the worker's settings, then "
                         "start it again")
    from_cache = mismatch_message(f"fastembed:{MODEL}:dim=384", "hash:v1:dim=64", "x")
    assert "MNEMO_EMBED_MODEL_PATH unset" in from_cache and "hash (64 dims)" in from_cache


def status(data_dir: Path) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["memory", "status", "--json"],
                                env={"MNEMO_DATA_DIR": str(data_dir)})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def drop_vectors(data_dir: Path, base: str, rowids: list[int]) -> None:
    """Delete vector rows on purpose, leaving their base rows: a gap to find and fill."""
    db = open_state(Settings.from_env({}, data_dir=data_dir))
    try:
        with atomic(db.conn):
            db.conn.executemany(f"DELETE FROM {vec_table(base, 1)} WHERE rowid = ?",
                                [(i,) for i in rowids])
    finally:
        db.close()


def test_status_counts_missing_vectors_and_reindex_fills_them(tmp_path: Path) -> None:
    index = VectorIndex(HashEmbedder())
    seeded(tmp_path, index, episodes=30, beliefs=10)
    complete = status(tmp_path)
    assert complete["missing_vectors"] == 0
    assert complete["tables"]["episodes"] == {"rows": 30, "vectors": 30, "missing": 0}
    assert complete["tables"]["turns"]["missing"] is None  # no vectors for turns at all

    db = open_state(Settings.from_env({}, data_dir=tmp_path))
    episodes, beliefs = base_ids(db.conn, "episodes"), base_ids(db.conn, "beliefs")
    db.close()
    drop_vectors(tmp_path, "episodes", episodes[3:10])
    drop_vectors(tmp_path, "beliefs", beliefs[:2])
    gap = status(tmp_path)
    assert gap["tables"]["episodes"] == {"rows": 30, "vectors": 23, "missing": 7}
    assert gap["tables"]["beliefs"] == {"rows": 10, "vectors": 8, "missing": 2}
    assert gap["missing_vectors"] == 9
    human = CliRunner().invoke(main, ["memory", "status"], env={"MNEMO_DATA_DIR": str(tmp_path)})
    assert "missing vectors   9 (run `mnemo memory reindex` to fill them)" in human.output

    run = CliRunner().invoke(main, ["memory", "reindex", "--json", "--batch-size", "3"],
                             env={"MNEMO_DATA_DIR": str(tmp_path)})
    assert run.exit_code == 0, run.output
    report = json.loads(run.stdout)
    assert report["filled"] == {"episodes": 7, "beliefs": 2} and report["generation"] == 1
    assert report["already_current"] and not report["nothing_to_do"]
    filled = status(tmp_path)
    assert filled["missing_vectors"] == 0
    assert filled["tables"]["episodes"] == {"rows": 30, "vectors": 30, "missing": 0}
    assert filled["tables"]["beliefs"] == {"rows": 10, "vectors": 10, "missing": 0}

    db = open_state(Settings.from_env({}, data_dir=tmp_path))
    try:  # the filled vectors are the row's own: dense search finds each row first
        for rowid in episodes[3:10]:
            text = db.conn.execute("SELECT text FROM episodes WHERE id = ?",
                                   (rowid,)).fetchone()[0]
            hits = index.search(db.conn, "episodes", "t1", index.embedder.embed([text])[0], 1)
            assert hits[0][0] == rowid and hits[0][1] < 1e-5
    finally:
        db.close()

    again = CliRunner().invoke(main, ["memory", "reindex"], env={"MNEMO_DATA_DIR": str(tmp_path)})
    assert again.exit_code == 0, again.output
    assert "no vector is missing; nothing to do" in again.output


def test_a_killed_fill_resumes_and_fills_every_row_once(tmp_path: Path) -> None:
    seeded(tmp_path, VectorIndex(HashEmbedder()), episodes=60, beliefs=0)
    db = open_state(Settings.from_env({}, data_dir=tmp_path))
    episodes = base_ids(db.conn, "episodes")
    db.close()
    drop_vectors(tmp_path, "episodes", episodes[::2])  # 30 missing, batches of 10
    killed = subprocess.run(
        [sys.executable, "-m", "tests.helpers.reindex_killer", str(tmp_path), "384", "2"],
        cwd=REPO, capture_output=True, timeout=60)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    assert status(tmp_path)["tables"]["episodes"]["missing"] == 10  # two batches stayed
    db = open_state(Settings.from_env({}, data_dir=tmp_path))
    try:
        report = VectorIndex(HashEmbedder()).reindex(db.conn, batch_size=10)
        assert report.filled == {"episodes": 10, "beliefs": 0}
        assert vector_rowids(db.conn, "episodes", 1) == episodes
    finally:
        db.close()


class RewritingEmbedder(HashEmbedder):
    """Changes one row's text (and vector, as a writer would) while reindex embeds."""

    def __init__(self, conn: Any, rowid: int) -> None:
        super().__init__()
        self.conn, self.rowid, self.armed = conn, rowid, True

    def embed(self, texts: Any) -> Any:
        out = super().embed(texts)
        if self.armed:
            self.armed = False
            index = VectorIndex(HashEmbedder())
            with atomic(self.conn):
                self.conn.execute("UPDATE episodes SET text = 'rewritten' WHERE id = ?",
                                  (self.rowid,))
                index.upsert(self.conn, "episodes",
                             [(self.rowid, "t1", index.embedder.embed(["rewritten"])[0])])
        return out


def test_a_fill_never_overwrites_a_vector_a_writer_stored_meanwhile(tmp_path: Path) -> None:
    seeded(tmp_path, VectorIndex(HashEmbedder()), episodes=5, beliefs=0)
    db = open_state(Settings.from_env({}, data_dir=tmp_path))
    try:
        episodes = base_ids(db.conn, "episodes")
        drop_vectors(tmp_path, "episodes", episodes[:2])
        index = VectorIndex(RewritingEmbedder(db.conn, episodes[0]))
        assert index.reindex(db.conn).filled["episodes"] == 2
        assert index.missing(db.conn) == {"episodes": 0, "beliefs": 0}
        hash_index = VectorIndex(HashEmbedder())
        hits = hash_index.search(db.conn, "episodes", "t1",
                                 hash_index.embedder.embed(["rewritten"])[0], 1)
        assert hits[0][0] == episodes[0] and hits[0][1] < 1e-5  # the writer's vector stayed
    finally:
        db.close()
