"""FastEmbedEmbedder: semantic vectors from an ONNX sentence-embedding model via fastembed.

This module shares its name with the third-party ``fastembed`` package, so the package is
imported by absolute name, lazily, inside the class: importing ``memory_core`` never loads
fastembed or onnxruntime (both heavy, and not needed by the hash embedder).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import structlog

from memory_core.embedders.base import Embedder, check_texts, normalise_rows
from memory_core.embedders.quantize import INT8, QUANTIZATIONS, file_sha256, int8_model_dir
from memory_core.errors import ConfigurationError, EmbedderError

log = structlog.get_logger(__name__)

DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"
# Measured with bench/embedders.py on 2 cores (all-MiniLM-L6-v2, ~11-word texts): 800-900
# texts/s at batch sizes 16 to 128 (differences within run-to-run noise), 10-15% less at 256,
# fastembed's default (padding to the longest text). 64 also bounds memory and latency.
DEFAULT_BATCH_SIZE = 64
_PROBE_TEXT = "mnemo embedder probe"
_DOCS_HINT = "see docs/configuration.md"


class FastEmbedEmbedder(Embedder):
    """Semantic embedder wrapping ``fastembed.TextEmbedding`` (ONNX, CPU by default).

    It never downloads unless ``allow_download`` is True. With ``model_path`` the model is
    loaded from that folder (``specific_model_path``) and the network is never used; without
    it and without ``allow_download``, only fastembed's local cache is consulted
    (``local_files_only``), so a missing model fails at once instead of trying the network.
    There is never a silent fallback to another embedder.

    ``model_name`` must be a name fastembed knows, and with ``model_path`` it must be the
    model the folder was exported from: fastembed picks pooling and normalisation by name
    (pairing an all-MiniLM-L6-v2 export with ``BAAI/bge-small-en-v1.5`` would apply CLS
    pooling to mean-pooling weights and give poor vectors without any error).

    Loading is lazy (first ``embed``, ``dim``, ``identity`` or an explicit ``load()``) and
    happens once; ``model_path`` is checked eagerly so misconfiguration fails at open.
    ``batch_size`` defaults to 64: on 2 cores all-MiniLM-L6-v2 embeds ~11-word texts at
    800-900 texts/s with any batch size from 16 to 128 and 10-15% slower at 256, fastembed's
    own default, because of padding (measured with ``bench/embedders.py``). Calls are
    serialised per instance, since onnxruntime already spreads each batch over ``threads``
    cores (default: all).

    ``quantize="int8"`` embeds with an int8 copy of the model file in ``model_path``, made
    on first load into ``cache_dir`` (``memory_core.embedders.quantize``): cheaper per text,
    different vectors, so a different ``identity``.

    Raises:
        EmbedderError: ``model_path`` does not exist or holds no ONNX file; ``model_name`` is
            empty (at construction); the model cannot be loaded or run (later).
        ConfigurationError: ``batch_size`` or ``threads`` is not a positive integer;
            ``quantize`` is unknown, or ``int8`` without ``model_path`` and ``cache_dir``.
    """

    kind: ClassVar[str] = "fastembed"
    semantic: ClassVar[bool] = True

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        model_path: str | None = None,
        allow_download: bool = False,
        cache_dir: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int | None = None,
        quantize: str = "none",
    ) -> None:
        if not isinstance(model_name, str) or not model_name.strip():
            raise EmbedderError(
                "fastembed model name is empty: set MNEMO_EMBED_MODEL to a fastembed model "
                f"name such as {DEFAULT_MODEL} ({_DOCS_HINT})"
            )
        _check_positive("batch_size", batch_size)
        if threads is not None:
            _check_positive("threads", threads)
        if quantize not in QUANTIZATIONS:
            raise ConfigurationError(f"fastembed quantization {quantize!r} is unknown: use "
                                     f"one of {', '.join(QUANTIZATIONS)} (MNEMO_EMBED_QUANTIZE)")
        if quantize == INT8 and (model_path is None or cache_dir is None):
            raise ConfigurationError(
                "MNEMO_EMBED_QUANTIZE=int8 quantizes a local model file: set "
                "MNEMO_EMBED_MODEL_PATH to the folder of the fp32 ONNX export (and "
                "MNEMO_EMBED_CACHE_DIR, or a data dir, for the int8 copy)")
        self.quantize = quantize
        self.model_name = model_name.strip()
        self.allow_download = allow_download
        self.cache_dir = cache_dir
        self.batch_size = batch_size
        self.threads = threads
        self.model_path = _checked_model_path(model_path, self.model_name) if model_path else None
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._model: Any = None
        self._dim = 0
        self._identity = ""

    @property
    def identity(self) -> str:
        """``fastembed:<model>:dim=<dim>``, plus ``:path-sha256=<16 hex>`` of the model file
        when loaded from ``model_path`` (so a different export changes it), plus
        ``:int8=<16 hex>`` of the quantized file with ``quantize="int8"`` (so the vectors of
        the two never mix, nor those of two quantizer versions). Loads the model."""
        self.load()
        return self._identity

    @property
    def dim(self) -> int:
        """Vector length read from the model's output on a probe text. Loads the model."""
        self.load()
        return self._dim

    def load(self) -> None:
        """Load the model and probe its dimension. Idempotent and thread-safe.

        Raises:
            EmbedderError: fastembed is missing, the model is unknown to fastembed, absent
                from ``model_path`` or the local cache, or fails on the probe text.
        """
        if self._model is not None:
            return
        with self._load_lock:
            if self._model is not None:
                return
            started = time.monotonic()
            model, dim, identity = self._load()
            self._dim, self._identity = dim, identity
            self._model = model  # set last: it is the "loaded" flag read without the lock
            log.info(
                "embedder_loaded",
                embedder=self.kind,
                identity=identity,
                source="path" if self.model_path else "cache_or_download",
                duration_ms=round((time.monotonic() - started) * 1000, 1),
            )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; see :meth:`Embedder.embed`. Loads the model on first use.

        Texts longer than the model's window (256 tokens for all-MiniLM-L6-v2) are truncated.
        """
        items = check_texts(texts)
        self.load()
        if not items:
            return np.zeros((0, self._dim), dtype=np.float32)
        try:
            with self._run_lock:
                rows = list(self._model.embed(items, batch_size=self.batch_size))
        except Exception as e:  # onnxruntime / tokenizers errors, wrapped at the boundary
            raise EmbedderError(
                f"fastembed model {self.model_name} failed while embedding {len(items)} texts "
                f"({type(e).__name__}): check the model files and free memory, or lower "
                "MNEMO_EMBED_BATCH_SIZE"
            ) from e
        return normalise_rows(np.vstack(rows))

    def _load(self) -> tuple[Any, int, str]:
        module = _import_fastembed()
        description = self._description(module)
        canonical = str(description["model"])
        model_file = str(description.get("model_file") or "model.onnx")
        kwargs: dict[str, Any] = {
            "model_name": canonical,
            "cache_dir": self.cache_dir,
            "threads": self.threads,
            # fastembed's own switch: no network; set per call rather than via HF_HUB_OFFLINE.
            "local_files_only": self.model_path is not None or not self.allow_download,
        }
        if self.model_path is not None:
            if not (self.model_path / model_file).is_file():
                raise EmbedderError(
                    f"fastembed model path {self.model_path} holds no {model_file}, the file "
                    f"fastembed loads for {canonical}: point MNEMO_EMBED_MODEL_PATH at an ONNX "
                    f"export of {canonical}, or set MNEMO_EMBED_MODEL to the model the folder "
                    f"was exported from ({_DOCS_HINT})"
                )
            kwargs["specific_model_path"] = str(self.model_path)
            if self.quantize == INT8:
                assert self.cache_dir is not None  # checked at construction
                folder = int8_model_dir(self.model_path, model_file, Path(self.cache_dir))
                kwargs["specific_model_path"] = str(folder)
        try:
            model = module.TextEmbedding(**kwargs)
            probe = np.asarray(next(iter(model.embed([_PROBE_TEXT], batch_size=1))))
        except Exception as e:  # fastembed raises ValueError/OSError/onnxruntime errors
            raise EmbedderError(self._load_failure(canonical, e)) from e
        dim = int(probe.shape[-1])
        expected = int(description.get("dim") or dim)
        if dim != expected:
            raise EmbedderError(
                f"fastembed model {canonical} from {self.model_path} gives {dim}-dimensional "
                f"vectors, not {expected}: set MNEMO_EMBED_MODEL to the model the folder was "
                "exported from"
            )
        identity = f"fastembed:{canonical}:dim={dim}"
        if self.model_path is not None:
            identity += f":path-sha256={_sha256_prefix(self.model_path / model_file)}"
            if self.quantize == INT8:
                used = Path(kwargs["specific_model_path"]) / model_file
                identity += f":{INT8}={_sha256_prefix(used)}"
        return model, dim, identity

    def _description(self, module: Any) -> dict[str, Any]:
        """fastembed's description of ``model_name`` (case-insensitive, like fastembed)."""
        wanted = self.model_name.lower()
        for description in module.TextEmbedding.list_supported_models():
            if str(description.get("model", "")).lower() == wanted:
                return dict(description)
        raise EmbedderError(
            f"fastembed does not know model {self.model_name}: set MNEMO_EMBED_MODEL to a name "
            "from fastembed.TextEmbedding.list_supported_models() (e.g. "
            f"{DEFAULT_MODEL} or sentence-transformers/all-MiniLM-L6-v2) ({_DOCS_HINT})"
        )

    def _load_failure(self, canonical: str, error: Exception) -> str:
        reason = f"{type(error).__name__}: {error}"
        if self.model_path is not None:
            return (
                f"fastembed could not load {canonical} from {self.model_path} ({reason}): "
                "check that the folder is a complete ONNX export of that model "
                f"(model, tokenizer.json, config.json) ({_DOCS_HINT})"
            )
        if not self.allow_download:
            return (
                f"fastembed model {canonical} is not in the local cache and downloads are off "
                f"({reason}): set MNEMO_EMBED_MODEL_PATH to a folder with an ONNX export "
                f"({_DOCS_HINT}), or set MNEMO_EMBED_ALLOW_DOWNLOAD=true to let fastembed "
                f"download {canonical}"
            )
        return (
            f"fastembed could not download or load {canonical} ({reason}): check network "
            "access to huggingface.co (or HF_ENDPOINT), or set MNEMO_EMBED_MODEL_PATH to a "
            f"folder with an ONNX export ({_DOCS_HINT})"
        )


def _import_fastembed() -> Any:
    try:
        return importlib.import_module("fastembed")
    except ImportError as e:
        raise EmbedderError(
            "the fastembed package is not installed: `pip install fastembed`, or set "
            "MNEMO_EMBEDDER=hash for keyword-grade recall without a model"
        ) from e


def _checked_model_path(model_path: str, model_name: str) -> Path:
    """Resolve ``model_path`` and check that it is a folder holding an ONNX file."""
    path = Path(model_path).expanduser().resolve()
    has_onnx = path.is_dir() and (any(path.glob("*.onnx")) or any(path.glob("onnx/*.onnx")))
    if not has_onnx:
        raise EmbedderError(
            f"fastembed model path {path} does not exist or holds no model.onnx: set "
            f"MNEMO_EMBED_MODEL_PATH to a folder with an ONNX export ({_DOCS_HINT}), or unset "
            f"it and set MNEMO_EMBED_ALLOW_DOWNLOAD=true to let fastembed download {model_name}"
        )
    return path


def _sha256_prefix(path: Path) -> str:
    """First 16 hex digits of the file's sha256: identifies the export, not where it lives."""
    return file_sha256(path)[:16]


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"fastembed embedder {name} {value!r} is invalid: use a positive integer"
        )
