"""Embedders: the plug point that turns texts into unit-length vectors.

``HashEmbedder`` (keyword-grade, no model) and ``FastEmbedEmbedder`` (semantic, ONNX model via
fastembed). Importing this package never imports fastembed or onnxruntime.
"""

from memory_core.embedders.base import Embedder, warn_keyword_grade_once
from memory_core.embedders.fastembed import FastEmbedEmbedder
from memory_core.embedders.hash import HashEmbedder

__all__ = ["Embedder", "FastEmbedEmbedder", "HashEmbedder", "warn_keyword_grade_once"]
