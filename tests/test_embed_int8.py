"""MNEMO_EMBED_QUANTIZE=int8: an int8 copy of the real local model, made once, close to the
fp32 vectors, and a separate embedder identity whose data an fp32 worker refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memory_core.db import open_state
from memory_core.embedders import FastEmbedEmbedder
from memory_core.embedders.factory import make_embedder
from memory_core.embedders.identity import describe_identity, mismatch_message
from memory_core.errors import ConfigurationError, EmbedderMismatchError
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from tests.conftest import shared_model_path

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
TEXTS = ["[8 May 2023] Caroline: I went to a LGBTQ support group yesterday and it was "
         "so powerful.", "Maya lives in Denver", "user related to Tomas",
         "[20 Jan 2023] Melanie: We took the kids camping at the lake last weekend!"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[FastEmbedEmbedder, ...]:
    model = str(shared_model_path())
    cache = tmp_path_factory.mktemp("cache")
    fp32 = FastEmbedEmbedder(MODEL, model_path=model, threads=1)
    int8 = FastEmbedEmbedder(MODEL, model_path=model, threads=1, quantize="int8",
                             cache_dir=str(cache))
    return fp32, int8


def test_int8_vectors_are_close_to_fp32_under_another_identity(pair) -> None:
    fp32, int8 = pair
    a, b = fp32.embed(TEXTS), int8.embed(TEXTS)
    cosines = np.einsum("ij,ij->i", a, b)
    assert cosines.min() > 0.97, cosines  # per-channel int8 (per tensor: ~0.95)
    assert not np.allclose(a, b)  # really another model
    assert fp32.identity.startswith(int8.identity.rsplit(":int8=", 1)[0])
    assert ":int8=" in int8.identity and ":int8=" not in fp32.identity
    assert describe_identity(int8.identity) == f"fastembed (model {MODEL}, 384 dims, int8)"
    assert str(shared_model_path()) not in int8.identity


def test_the_int8_copy_is_made_once_and_reused(pair, tmp_path: Path) -> None:
    _, int8 = pair
    int8.load()
    cache = Path(int8.cache_dir or "")
    [folder] = [p for p in cache.iterdir()]  # one complete folder, no temporary left over
    assert folder.name.startswith("int8pc-") and (folder / "tokenizer.json").is_file()
    made = (folder / "model.onnx").stat().st_mtime_ns
    again = FastEmbedEmbedder(MODEL, model_path=str(shared_model_path()), threads=1,
                              quantize="int8", cache_dir=str(cache))
    assert again.identity == int8.identity
    assert (folder / "model.onnx").stat().st_mtime_ns == made
    assert np.allclose(again.embed(TEXTS[:1]), int8.embed(TEXTS[:1]))


def test_an_fp32_worker_refuses_data_written_with_int8(pair, tmp_path: Path) -> None:
    fp32, int8 = pair
    db = open_state(Settings.from_env({}, data_dir=tmp_path))
    try:
        VectorIndex(int8).claim(db.conn, "the data")
        with pytest.raises(EmbedderMismatchError) as refused:
            VectorIndex(fp32).claim(db.conn, "the data")
    finally:
        db.close()
    message = str(refused.value)
    assert message == mismatch_message(int8.identity, fp32.identity, "the data")
    assert "MNEMO_EMBED_QUANTIZE=int8" in message and ", int8)" in message


def test_int8_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="MNEMO_EMBED_QUANTIZE must be one of"):
        Settings.from_env({"MNEMO_EMBED_QUANTIZE": "int4"})
    with pytest.raises(ConfigurationError, match="set MNEMO_EMBEDDER=fastembed and "
                                                 "MNEMO_EMBED_MODEL_PATH"):
        Settings.from_env({"MNEMO_EMBED_QUANTIZE": "int8"})
    settings = Settings.from_env({
        "MNEMO_EMBEDDER": "fastembed", "MNEMO_EMBED_MODEL": MODEL, "MNEMO_EMBED_QUANTIZE":
        "int8", "MNEMO_EMBED_MODEL_PATH": str(shared_model_path()),
        "MNEMO_DATA_DIR": str(tmp_path)})
    embedder = make_embedder(settings)
    assert isinstance(embedder, FastEmbedEmbedder)
    assert embedder.quantize == "int8" and embedder.cache_dir == str(tmp_path / "models")
