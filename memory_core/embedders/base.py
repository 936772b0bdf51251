"""The embedder plug point: one small interface, two implementations (hash, fastembed).

An embedder turns texts into unit-length float32 vectors. Its ``identity`` is recorded in the
state database so that a store written with one model is never searched with another (the
embedder mismatch guard degrades recall to keyword-only instead of returning nonsense).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import structlog

log = structlog.get_logger(__name__)

KEYWORD_GRADE_FIX = (
    "recall is keyword-grade with the hash embedder; set MNEMO_EMBEDDER=fastembed "
    "(and MNEMO_EMBED_MODEL_PATH for an offline model) then run `mnemo memory reindex`"
)


class Embedder(abc.ABC):
    """One plug point: turns texts into unit-length float32 vectors.

    Capabilities are class attributes: ``kind`` names the implementation ("hash" or
    "fastembed") and ``semantic`` says whether similar meanings land near each other (True)
    or only shared words do (False, keyword-grade).

    Implementations are safe to share between threads once loaded. ``embed`` is a pure
    function of the texts for a given ``identity``: the same texts give the same vectors.
    """

    kind: ClassVar[str]
    semantic: ClassVar[bool]
    batch_size: int

    @property
    @abc.abstractmethod
    def identity(self) -> str:
        """Stable string recorded in the database; changes whenever the vectors would change.

        Never contains an absolute local path or a secret. May load the model.

        Raises:
            EmbedderError: the model cannot be loaded.
        """

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """Length of every vector. May load the model.

        Raises:
            EmbedderError: the model cannot be loaded.
        """

    @abc.abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of ``batch_size``.

        Returns:
            A float32 array of shape ``(len(texts), dim)``, each row L2-normalised (the hash
            embedder returns a zero row for a text with no non-space character).

        Raises:
            TypeError: ``texts`` is a single ``str`` or holds a non-``str`` item.
            EmbedderError: the model cannot be loaded or fails while running.
        """

    def load(self) -> None:  # noqa: B027 - optional hook, a no-op for embedders with no model
        """Load whatever the embedder needs now, so misconfiguration fails at open.

        Idempotent: later calls do nothing.

        Raises:
            EmbedderError: the model cannot be loaded.
        """

    def __repr__(self) -> str:
        return f"<{type(self).__name__} kind={self.kind!r} batch_size={self.batch_size}>"


class WrappingEmbedder(Embedder):
    """An embedder in front of another (``inner``): its ``identity``, ``dim``, ``kind``,
    ``semantic``, ``batch_size`` and ``load`` are the inner one's, so the vectors and the
    recorded identity are exactly those of ``inner``. Subclasses implement ``embed``."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.batch_size = inner.batch_size

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.inner.kind

    @property
    def semantic(self) -> bool:  # type: ignore[override]
        return self.inner.semantic

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dim(self) -> int:
        return self.inner.dim

    def load(self) -> None:
        self.inner.load()


def check_texts(texts: Sequence[str]) -> list[str]:
    """Return ``texts`` as a list after checking it is a sequence of ``str``.

    Raises:
        TypeError: ``texts`` is a single ``str`` (which would embed one vector per character)
            or holds an item that is not a ``str``.
    """
    if isinstance(texts, str | bytes):
        raise TypeError("embed() takes a sequence of texts, not a single string: wrap it as [text]")
    items = list(texts)
    for position, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(
                f"embed() got a {type(item).__name__} at position {position}: pass only str items"
            )
    return items


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """L2-normalise each row (computed in float64) and return float32; zero rows stay zero."""
    wide = np.asarray(matrix, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", wide, wide))
    safe = np.where(norms > 0.0, norms, 1.0)
    return (wide / safe[:, None]).astype(np.float32)


_warn_lock = threading.Lock()
_warned = False


def warn_keyword_grade_once(embedder: Embedder) -> bool:
    """Log ``embedder_keyword_grade`` (warning) the first time a non-semantic embedder is used.

    Once per process and thread-safe; semantic embedders never warn.

    Returns:
        True if this call logged the warning.
    """
    global _warned
    if embedder.semantic:
        return False
    with _warn_lock:
        if _warned:
            return False
        _warned = True
    log.warning("embedder_keyword_grade", embedder=embedder.kind, fix=KEYWORD_GRADE_FIX)
    return True


def _reset_warning_for_tests() -> None:
    """Forget that the keyword-grade warning was logged (tests only)."""
    global _warned
    with _warn_lock:
        _warned = False
