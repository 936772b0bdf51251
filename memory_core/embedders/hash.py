"""HashEmbedder: keyword-grade vectors from hashed words and word pairs, no model needed.

It is the default that works everywhere (no download, no native runtime) and the floor that
recall degrades to. It is not semantic: "car" and "automobile" share nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise
from typing import ClassVar

import numpy as np

from memory_core.embedders.base import Embedder, check_texts, normalise_rows
from memory_core.errors import ConfigurationError

# Bump when anything below changes the vectors (tokens, keys, hash, weights): the identity
# then changes and stored vectors are re-embedded instead of silently mixed.
HASH_SCHEME_VERSION = "v1"

_TOKEN_RE = re.compile(r"\w+")
# blake2b's personalisation separates these hashes from any other use of blake2b.
_PERSON = b"mnemo-hash-v1"
_BIGRAM_WEIGHT = 0.5
_MAX_DIM = 65_536


_CACHED_KEY_CHARS = 64


def _blake2b_64(key: str) -> int:
    """Unsigned 64-bit blake2b of ``key``; the same on every process and machine.

    Python's ``hash()`` is salted per process (PYTHONHASHSEED), so it is never used here.
    """
    data = key.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=_PERSON).digest(), "little")


_cached_blake2b_64 = lru_cache(maxsize=1 << 17)(_blake2b_64)


def _feature_hash(key: str) -> int:
    """Hash of one token or token pair; short keys (nearly all) are memoised."""
    # Long keys bypass the cache so it never pins huge strings in memory.
    if len(key) <= _CACHED_KEY_CHARS:
        return _cached_blake2b_64(key)
    return _blake2b_64(key)


def _tokens(text: str) -> list[str]:
    """Case-folded unicode word tokens; for a text with none, its non-space characters."""
    folded = text.casefold()
    words = _TOKEN_RE.findall(folded)
    if words:
        return words
    # Emoji or punctuation-only text still deserves a non-zero vector.
    return [char for char in folded if not char.isspace()]


class HashEmbedder(Embedder):
    """Deterministic feature hashing of word unigrams (weight 1) and bigrams (weight 0.5).

    Each key is hashed with blake2b into a bucket ``h % dim`` with sign ``±1`` from the top
    bit; the counts are L2-normalised. Vectors are bit-identical across processes, machines
    and ``PYTHONHASHSEED`` values. A text with no non-space character gives a zero vector.
    Thread-safe; nothing to load.

    Raises:
        ConfigurationError: ``dim`` or ``batch_size`` is not a positive integer in range.
    """

    kind: ClassVar[str] = "hash"
    semantic: ClassVar[bool] = False

    def __init__(self, dim: int = 384, batch_size: int = 2048) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 8 <= dim <= _MAX_DIM:
            raise ConfigurationError(
                f"hash embedder dim {dim!r} is invalid: use an integer from 8 to {_MAX_DIM} "
                "(384 is the default)"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(
                f"hash embedder batch_size {batch_size!r} is invalid: use a positive integer"
            )
        self._dim = dim
        self.batch_size = batch_size

    @property
    def identity(self) -> str:
        """``hash:v1:dim=<dim>``."""
        return f"hash:{HASH_SCHEME_VERSION}:dim={self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; see :meth:`Embedder.embed`. Never raises EmbedderError."""
        items = check_texts(texts)
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            out[start : start + len(batch)] = self._embed_batch(batch)
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        unigrams: list[str] = []
        bigrams: list[str] = []
        unigram_counts: list[int] = []
        bigram_counts: list[int] = []
        for text in texts:
            tokens = _tokens(text)
            pairs = [f"{a} {b}" for a, b in pairwise(tokens)]
            unigrams.extend(tokens)
            bigrams.extend(pairs)
            unigram_counts.append(len(tokens))
            bigram_counts.append(len(pairs))
        rows = np.arange(len(texts), dtype=np.int64)
        uni_index, uni_weight = self._contributions(unigrams, np.repeat(rows, unigram_counts), 1.0)
        bi_index, bi_weight = self._contributions(
            bigrams, np.repeat(rows, bigram_counts), _BIGRAM_WEIGHT
        )
        counts = np.bincount(
            np.concatenate([uni_index, bi_index]),
            weights=np.concatenate([uni_weight, bi_weight]),
            minlength=len(texts) * self._dim,
        )
        return normalise_rows(counts.reshape(len(texts), self._dim))

    def _contributions(
        self, keys: list[str], rows: np.ndarray, weight: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Flat ``row * dim + bucket`` indices and signed weights of ``keys``."""
        hashes = np.fromiter(map(_feature_hash, keys), dtype=np.uint64, count=len(keys))
        buckets = (hashes % np.uint64(self._dim)).astype(np.int64)
        signs = np.where((hashes >> np.uint64(63)) == 1, weight, -weight)
        return rows * self._dim + buckets, signs
