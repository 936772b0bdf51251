"""Embedding ahead: the batching front's ``prefetch`` (real threads, the hash embedder behind
a recorder), the worker's hook that feeds it (real messages, the real write path), and a real
worker pool on the embedded queue with the real model from ../shared/models."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from memory_core.brokers.embedded import EmbeddedBroker
from memory_core.db import open_state
from memory_core.db.stores import Database
from memory_core.embedders import FastEmbedEmbedder
from memory_core.embedders.batching import BatchingEmbedder
from memory_core.errors import EmbedderError
from memory_core.jobs import RECORD_TURN, build_message
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write import pipeline
from tests.conftest import shared_model_path
from tests.helpers.post_turn import through_a_pool, turn
from tests.test_embed_batching import Recording
from workers.lookahead import embed_ahead, episode_text_of

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _same_length(n: int) -> list[str]:
    return [f"turn {i:03d} of the chat" for i in range(n)]


def test_prefetched_texts_go_to_the_model_as_one_batch_and_to_their_callers() -> None:
    inner = Recording()
    # The batch closes when the twelfth text fills it, not on a window the prefetches must
    # all fit in (a prefetch is no caller, so callers=1 does not close it early).
    front = BatchingEmbedder(inner, window_ms=1000, max_texts=12, callers=1)
    texts = _same_length(12)
    for text in texts:  # one at a time, as a consumer hands messages out
        front.prefetch([text])
    rows = [front.embed([text]) for text in texts]
    assert inner.calls == [texts]  # one model call for all twelve, none for the embeds
    for text, row in zip(texts, rows, strict=True):
        np.testing.assert_array_equal(row, inner.real.embed([text]))
    front.embed([texts[0]])  # a row is handed out once: the next embed runs the model
    assert inner.calls[-1] == [texts[0]]
    front.close()


def test_an_embed_waits_for_its_prefetch_and_runs_only_what_was_not_prefetched() -> None:
    inner = Recording()
    front = BatchingEmbedder(inner, window_ms=300, callers=4)
    started = time.monotonic()  # before the prefetch opens the 300 ms window
    front.prefetch(["ahead one", "ahead two"])
    rows = front.embed(["ahead two", "not ahead", "ahead one"])
    assert time.monotonic() - started >= 0.2  # it waited for the prefetch's batch
    np.testing.assert_array_equal(rows, inner.real.embed(["ahead two", "not ahead", "ahead one"]))
    assert sorted(map(sorted, inner.calls)) == [["ahead one", "ahead two"], ["not ahead"]]
    front.close()


def test_a_prefetch_is_nobody_waiting_so_it_does_not_end_the_window() -> None:
    inner = Recording()
    front = BatchingEmbedder(inner, window_ms=1000, callers=1)  # the longest window
    front.prefetch(["early"])
    time.sleep(0.15)
    assert inner.calls == []  # one caller, but a prefetch is not a waiting caller
    front.embed(["caller"])  # the one caller waits: the batch runs now, with both
    assert inner.calls == [["caller", "early"]] or inner.calls == [["early", "caller"]]
    front.close()


def test_a_failed_prefetch_leaves_its_caller_to_embed_and_get_the_error() -> None:
    inner = Recording(fail_on="poison")
    front = BatchingEmbedder(inner, window_ms=50, callers=2)
    front.prefetch(["poison pill"])
    front.prefetch(["good text"])
    np.testing.assert_array_equal(front.embed(["good text"]), inner.real.embed(["good text"]))
    with pytest.raises(EmbedderError, match="failed on this batch"):
        front.embed(["poison pill"])
    front.close()


def test_prefetched_rows_are_bounded_and_the_oldest_go_first() -> None:
    inner = Recording()
    front = BatchingEmbedder(inner, window_ms=20, max_texts=2)  # keeps 4 x 2 = 8 rows
    texts = _same_length(20)
    for text in texts:
        front.prefetch([text])
    front.embed(["flush"])  # queued after every prefetch: they have all run
    calls = len(inner.calls)
    front.embed([texts[-1]])  # among the newest 8: kept
    assert len(inner.calls) == calls
    front.embed([texts[0]])  # the oldest: dropped, embedded again
    assert inner.calls[-1] == [texts[0]]
    front.close()


def test_after_close_a_prefetch_does_nothing() -> None:
    inner = Recording()
    front = BatchingEmbedder(inner, window_ms=20)
    front.close()
    front.prefetch(["late"])
    assert inner.calls == []
    np.testing.assert_array_equal(front.embed(["late"]), inner.real.embed(["late"]))


def test_the_hook_prefetches_exactly_the_text_record_turn_embeds(state_db: Database) -> None:
    create_tenant(state_db.conn, "t1")
    inner = Recording()
    index = VectorIndex(inner)
    index.claim(state_db.conn, "test")
    payload = turn(7)
    message = build_message(RECORD_TURN, tenant="t1", turn=payload)
    predicted = episode_text_of(message, 20_000)
    pipeline.record_turn_and_episode(state_db, index, payload)
    assert inner.calls == [[predicted]]
    assert predicted is not None and predicted.startswith("[")  # the day label too
    assert predicted.endswith("] user: " + payload["text"])


def test_the_hook_prefetches_nothing_for_other_jobs_or_turns_the_actor_refuses() -> None:
    other = build_message("extract_beliefs", tenant="t1", turn_uid="u1")
    assert episode_text_of(other, 20_000) is None
    bad = turn(1)
    bad["speaker"] = ""
    refused = build_message(RECORD_TURN, tenant="t1", turn=bad)
    assert episode_text_of(refused, 20_000) is None
    too_long = turn(2)
    too_long["text"] = "x" * 50
    assert episode_text_of(build_message(RECORD_TURN, tenant="t1", turn=too_long), 10) is None


def test_only_a_semantic_front_embeds_ahead_and_only_the_turns_queue_leases_more(
        tmp_path: Path) -> None:
    settings = Settings.from_env({}, embed_batch_max_texts=32)
    broker = EmbeddedBroker(tmp_path / "ops.db")
    for queue in ("turns", "maintenance"):
        broker.declare_queue(queue)
    assert not embed_ahead(broker, BatchingEmbedder(Recording()), settings)  # hash-grade
    assert "consume" not in vars(broker)  # left as it was
    model = FastEmbedEmbedder(model_name=MODEL, model_path=str(shared_model_path()))
    assert not embed_ahead(broker, model, settings)  # no batching front: nothing to feed
    front = BatchingEmbedder(model)
    assert embed_ahead(broker, front, settings)
    turns, maintenance = broker.consume("turns", 8), broker.consume("maintenance", 8)
    assert (turns.prefetch, maintenance.prefetch) == (32, 8)
    turns.close()
    maintenance.close()
    broker.close()
    front.close()


@pytest.mark.slow
def test_a_worker_pool_embeds_ahead_in_batches_larger_than_its_threads(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """One process, one thread: without embedding ahead every batch holds one text. Every
    episode's stored vector is the model's vector of its own text."""
    model_path = shared_model_path()
    settings = Settings.from_env({}, data_dir=tmp_path / "data", embedder="fastembed",
                                 embed_model=MODEL, embed_model_path=model_path,
                                 embed_threads=1, log_level="info", log_format="json")
    state = open_state(settings)
    create_tenant(state.conn, "t1")
    turns = [turn(i) for i in range(40)]
    pool, _ = through_a_pool(settings, state.conn, turns, processes=1, threads=1,
                             timeout_s=120)
    assert all(proc.exitcode == 0 for proc in pool._procs)
    lines = [json.loads(line) for line in capfd.readouterr().err.splitlines()
             if '"embedding_batches"' in line]
    assert len(lines) == 1
    sizes = {int(k): v for k, v in lines[0]["batch_sizes"].items()}
    assert max(sizes) > 1 and lines[0]["texts_per_batch"] > 1.5, sizes
    model = FastEmbedEmbedder(model_name=MODEL, model_path=str(model_path))
    index = VectorIndex(model)
    for t in turns:
        text = episode_text_of(build_message(RECORD_TURN, tenant="t1", turn=t), 20_000)
        assert text is not None and text.startswith("[")
        expected = model.embed([text])[0]
        episode = state.conn.execute(
            "SELECT e.id FROM episodes e JOIN episode_turns et ON et.episode_id = e.id "
            "JOIN turns tu ON tu.id = et.turn_id WHERE tu.turn_uid = ?",
            (t["turn_uid"],)).fetchone()[0]
        hits = index.search(state.conn, "episodes", "t1", expected, 1)
        assert hits and hits[0][0] == episode and hits[0][1] < 1e-3, t["turn_uid"]
    state.close()
