"""Embedders: the hash embedder's determinism and shape, the fastembed embedder with a real
local model and no network, configuration errors, and the keyword-grade warning."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from memory_core.embedders import Embedder, FastEmbedEmbedder, HashEmbedder
from memory_core.embedders.base import _reset_warning_for_tests, warn_keyword_grade_once
from memory_core.errors import ConfigurationError, EmbedderError

REPO_ROOT = Path(__file__).resolve().parent.parent
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
GOLDEN_TEXTS = ["The cat sat on the mat.", "Ünïcödé wörds, CamelCase and snake_case_42!", "🎉"]
# sha256 of HashEmbedder().embed(GOLDEN_TEXTS) as little-endian float32. If this changes, the
# hash scheme changed: bump HASH_SCHEME_VERSION so stored vectors get re-embedded.
GOLDEN_DIGEST = "e8ff713b13652d1cb8074cf3aa9f30a11f0017522119e64cabb74b81e4cc39bd"


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def model_folder() -> Path:
    """The shared ONNX export: MNEMO_TEST_MODEL_PATH, else ../shared/models beside the repo."""
    configured = os.environ.get("MNEMO_TEST_MODEL_PATH")
    if configured:
        return Path(configured)
    return REPO_ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Refuse and record every name lookup and outgoing connection made during the test."""
    attempts: list[object] = []

    def refuse_connect(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(f"test forbids network access (tried {address!r})")

    def refuse_lookup(host: object, *args: object, **kwargs: object) -> None:
        attempts.append(host)
        raise socket.gaierror(f"test forbids network access (looked up {host!r})")

    monkeypatch.setattr(socket.socket, "connect", refuse_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse_connect)
    monkeypatch.setattr(socket, "getaddrinfo", refuse_lookup)
    return attempts


@pytest.fixture(scope="module")
def model_path() -> Path:
    path = model_folder()
    if not (path / "model.onnx").is_file():
        message = (
            f"shared embedding model not found at {path}: set MNEMO_TEST_MODEL_PATH or put "
            "shared/models/all-MiniLM-L6-v2-onnx beside the repository"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def minilm(model_path: Path) -> Iterator[FastEmbedEmbedder]:
    """The real model, loaded once per module with the hub forced offline."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        embedder = FastEmbedEmbedder(model_name=MODEL_NAME, model_path=str(model_path))
        embedder.load()
        yield embedder


# --- hash embedder -------------------------------------------------------------------------


def _hash_bytes_in_subprocess(seed: str) -> bytes:
    code = (
        "import sys\n"
        "from memory_core.embedders import HashEmbedder\n"
        f"texts = {GOLDEN_TEXTS!r}\n"
        "sys.stdout.write(HashEmbedder().embed(texts).astype('<f4').tobytes().hex())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return bytes.fromhex(done.stdout)


def test_hash_vectors_identical_across_processes_and_hash_seeds() -> None:
    here = HashEmbedder().embed(GOLDEN_TEXTS).astype("<f4").tobytes()
    for seed in ("1", "987654"):
        assert _hash_bytes_in_subprocess(seed) == here


def test_hash_vectors_match_the_pinned_v1_scheme() -> None:
    vectors = HashEmbedder().embed(GOLDEN_TEXTS)
    assert hashlib.sha256(vectors.astype("<f4").tobytes()).hexdigest() == GOLDEN_DIGEST
    assert HashEmbedder().identity == "hash:v1:dim=384"


@pytest.mark.parametrize("dim", [8, 64, 384, 1024])
def test_hash_vectors_are_unit_length_float32_of_dim(dim: int) -> None:
    texts = ["hello world", "a much longer sentence about the garden project in Lisbon", "?!", "x"]
    vectors = HashEmbedder(dim=dim).embed(texts)
    assert vectors.shape == (len(texts), dim)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert HashEmbedder(dim=dim).dim == dim
    assert HashEmbedder(dim=dim).identity == f"hash:v1:dim={dim}"


def test_hash_zero_vector_only_for_blank_text() -> None:
    vectors = HashEmbedder().embed(["", "   \n\t", "🎉", "..."])
    assert not vectors[0].any()
    assert not vectors[1].any()
    np.testing.assert_allclose(np.linalg.norm(vectors[2:], axis=1), 1.0, atol=1e-6)


def test_hash_empty_input_gives_empty_matrix() -> None:
    assert HashEmbedder(dim=32).embed([]).shape == (0, 32)


def test_hash_texts_sharing_words_score_higher_than_disjoint_ones() -> None:
    query, near, far = HashEmbedder().embed(
        ["my sister lives in Lisbon", "Does my sister still live in LISBON?", "quarterly revenue"]
    )
    assert cosine(query, near) > 0.3
    assert cosine(query, near) > cosine(query, far) + 0.3


def test_hash_result_does_not_depend_on_batch_size() -> None:
    texts = [f"note {i} about the garden and item {i % 7}" for i in range(50)]
    whole = HashEmbedder(batch_size=4096).embed(texts)
    batched = HashEmbedder(batch_size=3).embed(texts)
    assert whole.tobytes() == batched.tobytes()


def test_hash_handles_hostile_text() -> None:
    texts = ["\x00", "\ud800 lone surrogate", '" OR 1=1 -- NEAR(*)', "a" * 100_000]
    vectors = HashEmbedder().embed(texts)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("bad", ["a single string", [b"bytes"], ["ok", None]])
def test_embed_rejects_non_sequences_of_str(bad: object) -> None:
    with pytest.raises(TypeError, match="embed"):
        HashEmbedder().embed(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("dim", [0, 7, -1, True, 3.5, 100_000])
def test_hash_rejects_bad_dim(dim: object) -> None:
    with pytest.raises(ConfigurationError, match="dim"):
        HashEmbedder(dim=dim)  # type: ignore[arg-type]


def test_capabilities_are_class_attributes() -> None:
    assert (HashEmbedder.kind, HashEmbedder.semantic) == ("hash", False)
    assert (FastEmbedEmbedder.kind, FastEmbedEmbedder.semantic) == ("fastembed", True)
    assert issubclass(HashEmbedder, Embedder)
    assert issubclass(FastEmbedEmbedder, Embedder)


def test_importing_memory_core_does_not_load_fastembed_or_onnxruntime() -> None:
    code = (
        "import sys, memory_core.embedders\n"
        "memory_core.embedders.FastEmbedEmbedder\n"
        "loaded = [m for m in ('fastembed', 'onnxruntime') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, timeout=60, check=True)


# --- fastembed embedder, real model ----------------------------------------------------------


def test_fastembed_from_path_is_semantic_and_offline(
    minilm: FastEmbedEmbedder, no_network: list[object]
) -> None:
    cat, rug, other = minilm.embed(
        ["The cat sat on the mat.", "A cat was sitting on the rug.", "Interest rates rose again."]
    )
    assert cosine(cat, rug) > 0.6
    assert cosine(cat, rug) > cosine(cat, other) + 0.4
    assert minilm.dim == 384
    assert no_network == []


def test_fastembed_rows_are_unit_float32_and_batched(minilm: FastEmbedEmbedder) -> None:
    texts = [f"Reminder number {i}: water the tomatoes." for i in range(minilm.batch_size + 5)]
    vectors = minilm.embed(texts)
    assert vectors.shape == (len(texts), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_fastembed_identity_names_model_and_export_not_path(
    minilm: FastEmbedEmbedder, model_path: Path
) -> None:
    identity = minilm.identity
    assert re.fullmatch(
        r"fastembed:sentence-transformers/all-MiniLM-L6-v2:dim=384:path-sha256=[0-9a-f]{16}",
        identity,
    )
    assert str(model_path) not in identity
    assert str(model_path.resolve()) not in identity
    assert model_path.name not in identity
    sums = model_path / "SHA256SUMS"
    if sums.is_file():
        listed = dict(line.split()[::-1] for line in sums.read_text().splitlines() if line)
        assert identity.endswith(listed["model.onnx"][:16])


def test_missing_model_path_names_path_and_fix(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(EmbedderError) as caught:
        FastEmbedEmbedder(model_path=str(missing))
    message = str(caught.value)
    assert str(missing) in message
    assert "MNEMO_EMBED_MODEL_PATH" in message
    assert "MNEMO_EMBED_ALLOW_DOWNLOAD=true" in message


def test_model_path_without_onnx_file_is_refused_at_open(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EmbedderError, match=re.escape(str(tmp_path))):
        FastEmbedEmbedder(model_name=MODEL_NAME, model_path=str(tmp_path))


def test_empty_model_name_is_refused() -> None:
    with pytest.raises(EmbedderError, match="MNEMO_EMBED_MODEL"):
        FastEmbedEmbedder(model_name="  ")


@pytest.mark.timeout(30)
def test_no_path_and_no_download_fails_fast_without_network(
    tmp_path: Path, no_network: list[object]
) -> None:
    embedder = FastEmbedEmbedder(cache_dir=str(tmp_path / "empty-cache"))
    started = time.monotonic()
    with pytest.raises(EmbedderError) as caught:
        embedder.load()
    assert time.monotonic() - started < 10, "a download was attempted (fastembed retries)"
    message = str(caught.value)
    assert "BAAI/bge-small-en-v1.5" in message
    assert "MNEMO_EMBED_MODEL_PATH" in message
    assert "MNEMO_EMBED_ALLOW_DOWNLOAD=true" in message
    assert no_network == []
    with pytest.raises(EmbedderError):  # still failing, never a fallback
        embedder.embed(["hello"])


def test_unknown_model_name_is_an_embedder_error(model_path: Path) -> None:
    embedder = FastEmbedEmbedder(model_name="nobody/no-such-model", model_path=str(model_path))
    with pytest.raises(EmbedderError, match="nobody/no-such-model"):
        embedder.load()


@pytest.mark.parametrize("field", ["batch_size", "threads"])
def test_fastembed_rejects_bad_numbers(field: str, model_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=field):
        FastEmbedEmbedder(model_name=MODEL_NAME, model_path=str(model_path), **{field: 0})


# --- keyword-grade warning -----------------------------------------------------------------


@pytest.fixture
def fresh_warning() -> Iterator[None]:
    _reset_warning_for_tests()
    yield
    _reset_warning_for_tests()


def test_keyword_grade_warning_is_logged_once(fresh_warning: None) -> None:
    embedder = HashEmbedder()
    with capture_logs() as logs:
        assert warn_keyword_grade_once(embedder) is True
        assert warn_keyword_grade_once(embedder) is False
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert len(warnings) == 1
    assert warnings[0]["event"] == "embedder_keyword_grade"
    assert "MNEMO_EMBEDDER=fastembed" in warnings[0]["fix"]
    assert "mnemo memory reindex" in warnings[0]["fix"]


def test_keyword_grade_warning_once_across_threads(fresh_warning: None) -> None:
    embedder = HashEmbedder()
    start = threading.Barrier(8)

    def call() -> None:
        start.wait()
        warn_keyword_grade_once(embedder)

    with capture_logs() as logs:
        threads = [threading.Thread(target=call) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [entry["event"] for entry in logs] == ["embedder_keyword_grade"]


def test_semantic_embedder_never_warns(fresh_warning: None, model_path: Path) -> None:
    semantic = FastEmbedEmbedder(model_name=MODEL_NAME, model_path=str(model_path))
    with capture_logs() as logs:
        assert warn_keyword_grade_once(semantic) is False
    assert logs == []
