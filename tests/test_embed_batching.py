"""The batching front a worker's threads share (memory_core/embedders/batching.py).

Real embedders (hash; fastembed from ../shared/models), real threads, real SQLite files.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import numpy as np
import pytest

from memory_core.db.stores import Database
from memory_core.embedders import FastEmbedEmbedder, HashEmbedder
from memory_core.embedders.base import Embedder
from memory_core.embedders.batching import BatchingEmbedder, batching_front
from memory_core.errors import ConfigurationError, EmbedderError
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write import pipeline
from tests.conftest import shared_model_path
from workers.context import WorkerContext


class Recording(Embedder):
    """The hash embedder, recording each call's texts; fails on texts containing ``fail_on``
    (EmbedderError) or ``exit_on`` (SystemExit, as a process-level exception would)."""

    kind: ClassVar[str] = "hash"
    semantic: ClassVar[bool] = False

    def __init__(self, fail_on: str = "\0never", exit_on: str = "\0never") -> None:
        self.real = HashEmbedder(dim=64)
        self.batch_size = self.real.batch_size
        self.calls: list[list[str]] = []
        self.fail_on, self.exit_on = fail_on, exit_on

    @property
    def identity(self) -> str:
        return self.real.identity

    @property
    def dim(self) -> int:
        return self.real.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if any(self.exit_on in t for t in texts):
            raise SystemExit(3)
        if any(self.fail_on in t for t in texts):
            raise EmbedderError("the model failed on this batch")
        return self.real.embed(texts)


def _texts(i: int) -> list[str]:
    return [f"turn {i} of the chat", f"belief {i % 3} lives in Lisbon", "shared text"]


def test_many_threads_get_their_own_rows_in_fewer_batches() -> None:
    inner = Recording()
    front = BatchingEmbedder(inner, window_ms=50, max_texts=32)
    barrier = threading.Barrier(8)

    def call(i: int) -> np.ndarray:
        barrier.wait()
        return front.embed(_texts(i))

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(8)))
    for i, rows in enumerate(results):
        np.testing.assert_array_equal(rows, inner.real.embed(_texts(i)))
    assert len(inner.calls) < 8  # batched across threads
    embedded = [t for call in inner.calls for t in call]
    assert embedded.count("shared text") == len(inner.calls)  # once per batch, not per caller
    assert max(len(c) for c in inner.calls) <= 32
    front.close()


def test_an_error_goes_to_the_caller_whose_texts_caused_it() -> None:
    inner = Recording(fail_on="poison")
    front = BatchingEmbedder(inner, window_ms=100, callers=4)
    barrier = threading.Barrier(4)

    def call(i: int) -> np.ndarray | BaseException:
        barrier.wait()
        try:
            return front.embed(["poison pill"] if i == 2 else _texts(i))
        except EmbedderError as e:
            return e

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(call, range(4)))
    assert isinstance(results[2], EmbedderError)
    for i in (0, 1, 3):
        np.testing.assert_array_equal(results[i], inner.real.embed(_texts(i)))
    front.close()


def test_bad_arguments_fail_in_the_callers_thread_before_queueing() -> None:
    inner = Recording()
    front = BatchingEmbedder(inner)
    with pytest.raises(TypeError, match="not a single string"):
        front.embed("one text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="position 1"):
        front.embed(["ok", 3])  # type: ignore[list-item]
    assert inner.calls == []
    assert front.embed([]).shape == (0, 64)


def test_a_full_house_of_callers_does_not_wait_for_the_window() -> None:
    front = BatchingEmbedder(Recording(), window_ms=1000, callers=2)
    barrier = threading.Barrier(2)

    def call(i: int) -> float:
        barrier.wait()
        started = time.monotonic()
        front.embed(_texts(i))
        return time.monotonic() - started

    with ThreadPoolExecutor(2) as pool:
        waits = list(pool.map(call, range(2)))
    assert max(waits) < 0.9  # both were in: the batch ran before the 1 s window closed
    front.close()


def test_a_process_level_exception_fails_its_batch_and_the_front_keeps_serving() -> None:
    inner = Recording(exit_on="fatal")
    front = BatchingEmbedder(inner, window_ms=1)
    with pytest.raises(EmbedderError, match="raised SystemExit in the batch thread"):
        front.embed(["fatal text"])
    dispatcher = front._dispatcher
    np.testing.assert_array_equal(front.embed(["after"]), inner.real.embed(["after"]))
    assert front._dispatcher is dispatcher and dispatcher is not None and dispatcher.is_alive()
    front.close()
    assert not dispatcher.is_alive()


def test_after_close_calls_embed_directly() -> None:
    inner = Recording()
    front = BatchingEmbedder(inner, window_ms=5)
    front.embed(["before"])
    front.close()
    assert front.embed(["after"]).shape == (1, 64)
    assert front.batches == 1  # the second call did not go through the dispatcher


def test_settings_configure_the_front_and_zero_turns_it_off() -> None:
    inner = HashEmbedder()
    on = batching_front(inner, Settings.from_env({"MNEMO_EMBED_BATCH_WINDOW_MS": "3",
                                                  "MNEMO_EMBED_BATCH_MAX_TEXTS": "16"}),
                        callers=4)
    assert isinstance(on, BatchingEmbedder)
    assert (on.window_s, on.max_texts, on.callers) == (0.003, 16, 4)
    assert (on.identity, on.dim, on.kind, on.semantic) == (inner.identity, 384, "hash", False)
    assert batching_front(inner, Settings.from_env({"MNEMO_EMBED_BATCH_WINDOW_MS": "0"})) \
        is inner
    with pytest.raises(ConfigurationError, match="MNEMO_EMBED_BATCH_MAX_TEXTS"):
        BatchingEmbedder(inner, max_texts=0)


def test_a_failed_embedding_leaves_nothing_written(state_db: Database) -> None:
    """The write path embeds before its transaction: an error there writes no row."""
    create_tenant(state_db.conn, "acme")  # writes the tenant's hub (and its outbox row)
    tables = ("turns", "episodes", "applied_jobs", "outbox")
    before = {t: state_db.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in tables}
    front = BatchingEmbedder(Recording(fail_on="Lisbon"), window_ms=1)
    index = VectorIndex(front)
    turn = {"tenant": "acme", "session_id": "s1", "turn_uid": "s1:1", "index": 1,
            "speaker": "user", "text": "I moved to Lisbon.", "occurred_at": "2026-01-01T10:00:00Z"}
    with pytest.raises(EmbedderError):
        pipeline.record_turn_and_episode(state_db, index, turn)
    conn = state_db.conn
    for table in tables:
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == before[table], table
    front.close()


def test_the_worker_context_shares_one_front_between_its_threads(settings: Settings) -> None:
    ctx = WorkerContext.open(settings, threads=3)
    try:
        assert isinstance(ctx.index.embedder, BatchingEmbedder)
        assert ctx.index.embedder.callers == 3
    finally:
        ctx.close()


def test_fastembed_rows_are_the_same_batched_or_alone() -> None:
    model = FastEmbedEmbedder(model_name="sentence-transformers/all-MiniLM-L6-v2",
                              model_path=str(shared_model_path()))
    # The longest window: the batch runs as soon as the third caller is in (callers=3), so
    # it only has to cover the barrier's threads reaching embed() on a loaded machine.
    front = BatchingEmbedder(model, window_ms=1000, callers=3)
    texts = [["Caroline went to the support group."], ["Melanie paints sunsets", "short"],
             ["A much longer message about adoption agencies and what they asked for."]]
    barrier = threading.Barrier(3)

    def call(i: int) -> np.ndarray:
        barrier.wait()
        return front.embed(texts[i])

    with ThreadPoolExecutor(3) as pool:
        batched = list(pool.map(call, range(3)))
    assert front.batches == 1
    for group, rows in zip(texts, batched, strict=True):
        np.testing.assert_allclose(rows, model.embed(group), atol=1e-5)
    front.close()


def test_the_extract_step_embeds_only_belief_texts(state_db: Database) -> None:
    """The episode is embedded once, when the turn is recorded; extraction embeds only the
    texts of the beliefs it draws (nothing for a turn with none)."""
    create_tenant(state_db.conn, "acme")
    inner = Recording()
    index = VectorIndex(inner)
    turns = [("s1:1", "Thanks, that sounds lovely."), ("s1:2", "I live in Lisbon now.")]
    for i, (uid, text) in enumerate(turns, start=1):
        pipeline.record_turn_and_episode(state_db, index, {
            "tenant": "acme", "session_id": "s1", "turn_uid": uid, "index": i,
            "speaker": "user", "text": text, "occurred_at": "2026-01-01T10:00:00Z"})
    recorded = len(inner.calls)
    assert pipeline.extract_and_apply(state_db, index, "acme", "s1:1") == []
    assert len(inner.calls) == recorded  # no belief: no model call at all
    assert pipeline.extract_and_apply(state_db, index, "acme", "s1:2") != []
    texts = [t for call in inner.calls[recorded:] for t in call]
    assert texts and not any("Lisbon now" in t for t in texts)  # not the episode again


def test_a_batch_goes_to_the_model_in_runs_of_similar_length() -> None:
    inner = Recording()
    front = BatchingEmbedder(inner, window_ms=1000, callers=3)  # as above: runs when all 3 are in
    short, medium, long = "hi there", "x" * 60, "y" * 400
    groups = [[long, short], [medium, "a" * 10], ["z" * 390]]
    barrier = threading.Barrier(3)

    def call(i: int) -> np.ndarray:
        barrier.wait()
        return front.embed(groups[i])

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(call, range(3)))
    for group, rows in zip(groups, results, strict=True):
        np.testing.assert_array_equal(rows, inner.real.embed(group))
    assert sorted(map(sorted, inner.calls)) == [sorted([short, "a" * 10]), [medium],
                                               sorted([long, "z" * 390])]
    front.close()
