"""Build the configured embedder from Settings (the only place that maps settings to one)."""

from __future__ import annotations

from memory_core.embedders.base import Embedder
from memory_core.embedders.fastembed import DEFAULT_MODEL, FastEmbedEmbedder
from memory_core.embedders.hash import HashEmbedder
from memory_core.settings import Settings


def make_embedder(settings: Settings) -> Embedder:
    """The embedder named by ``MNEMO_EMBEDDER``. A model that cannot load raises
    EmbedderError (never a silent fallback to another embedder).

    Silent about a keyword-grade embedder: every command that opens memory builds one, and a
    warning on each (a health check every few seconds) is noise; the places where the grade
    matters call ``warn_keyword_grade_once`` (the pool's start, the chat process, `mnemo
    recall --explain`)."""
    if settings.embedder == "hash":
        kwargs = {"batch_size": settings.embed_batch_size} if settings.embed_batch_size else {}
        return HashEmbedder(dim=settings.hash_dim, **kwargs)
    kwargs = {"batch_size": settings.embed_batch_size} if settings.embed_batch_size else {}
    cache_dir = settings.embed_cache_dir
    if cache_dir is None and settings.embed_quantize != "none":
        cache_dir = settings.data_dir / "models"  # the int8 copy of the model
    return FastEmbedEmbedder(
        model_name=settings.embed_model or DEFAULT_MODEL,
        model_path=str(settings.embed_model_path) if settings.embed_model_path else None,
        allow_download=settings.embed_allow_download,
        cache_dir=str(cache_dir) if cache_dir else None,
        threads=settings.embed_threads,
        quantize=settings.embed_quantize,
        **kwargs,
    )
