"""An int8 copy of a local ONNX model, made once from its fp32 file (``MNEMO_EMBED_QUANTIZE``).

``onnxruntime.quantization.quantize_dynamic`` stores the weights of the matrix products as
int8, one scale per output channel, and quantizes their inputs at run time; nothing is
downloaded and no calibration data is needed. Per channel matters: on all-MiniLM-L6-v2 and
LoCoMo turns one scale per tensor gave vectors at cosine 0.953 to the fp32 ones (p5 0.930),
per channel 0.990 (p5 0.986), at the same cost (``bench/embed_budget.py``). The vectors still
differ from the fp32 model's, so the copy is a separate embedder identity: its vectors never
share an index with the fp32 model's.

The copy is a folder ``<cache>/int8pc-<sha256 prefix of the fp32 file>`` holding the
quantized model under the fp32 file's name and the tokenizer and config files beside it,
so fastembed loads it like the original. It is built in a temporary folder and renamed into
place: a crash leaves no half-written copy, and two processes that build it at once both
end up using one complete folder.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

import structlog

from memory_core.errors import EmbedderError

log = structlog.get_logger(__name__)

INT8 = "int8"
QUANTIZATIONS = ("none", INT8)


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def int8_model_dir(source_dir: Path, model_file: str, cache_dir: Path) -> Path:
    """The folder of the int8 copy of ``source_dir/model_file``, built on first use.

    Raises:
        EmbedderError: the ``onnx`` package (needed by onnxruntime's quantizer) is missing,
            the cache folder cannot be written, or quantization fails.
    """
    source = source_dir / model_file
    target = cache_dir / f"int8pc-{file_sha256(source)[:16]}"
    if (target / model_file).is_file():
        return target
    quantize_dynamic, quant_type = _quantizer()
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".int8-", dir=cache_dir))
    except OSError as e:
        raise EmbedderError(
            f"cannot write the int8 model copy under {cache_dir} ({e.strerror}): set "
            "MNEMO_EMBED_CACHE_DIR to a writable folder, or unset MNEMO_EMBED_QUANTIZE"
        ) from e
    try:
        for item in source_dir.iterdir():
            if item.is_file() and item.suffix not in (".onnx", ".onnx_data") \
                    and item.name != "SHA256SUMS":
                shutil.copyfile(item, work / item.name)
        (work / model_file).parent.mkdir(parents=True, exist_ok=True)
        root = logging.getLogger()
        root.addFilter(_no_preprocess_hint)
        try:
            quantize_dynamic(str(source), str(work / model_file), per_channel=True,
                             weight_type=quant_type.QInt8)
        except Exception as e:  # onnx / onnxruntime errors, wrapped at the boundary
            raise EmbedderError(
                f"quantizing {source} to int8 failed ({type(e).__name__}: {e}): unset "
                "MNEMO_EMBED_QUANTIZE to use the fp32 model"
            ) from e
        finally:
            root.removeFilter(_no_preprocess_hint)
        try:
            work.rename(target)
        except OSError:  # another process renamed its complete copy first: use that one
            if not (target / model_file).is_file():
                raise
        else:
            log.info("embedder_quantized", quantization=INT8, folder=target.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _no_preprocess_hint(record: logging.LogRecord) -> bool:
    """Drop the quantizer's advice to pre-process the model (shape inference for static
    quantization; nothing an operator can act on here)."""
    return not str(record.msg).startswith("Please consider to run pre-processing")


def _quantizer() -> tuple[Any, Any]:
    try:
        module = importlib.import_module("onnxruntime.quantization")
    except ImportError as e:
        raise EmbedderError(
            "MNEMO_EMBED_QUANTIZE=int8 needs the onnx package for onnxruntime's quantizer "
            f"({e}): `pip install 'mnemo[int8]'` (or `pip install onnx`), or unset "
            "MNEMO_EMBED_QUANTIZE"
        ) from e
    return module.quantize_dynamic, module.QuantType
