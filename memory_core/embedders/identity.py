"""Embedder identities read back for people: what the state db recorded, and how to get it.

An identity is ``hash:<scheme>:dim=<n>`` or
``fastembed:<model>:dim=<n>[:path-sha256=<hex>[:int8=<hex>]]`` (see ``Embedder.identity``);
it never holds a local path or a secret, so it may be shown.
"""

from __future__ import annotations


def _parts(identity: str) -> tuple[str, str, str, str | None, bool]:
    """(kind, model, dims, export sha256 prefix, int8) of an identity; model "" for hash."""
    kind, _, rest = identity.partition(":")
    fields = rest.split(":")
    values = dict(f.split("=", 1) for f in fields if "=" in f)
    model = ":".join(f for f in fields if "=" not in f) if kind == "fastembed" else ""
    return kind, model, values.get("dim", "?"), values.get("path-sha256"), "int8" in values


def describe_identity(identity: str) -> str:
    """``fastembed:<model>:dim=384:...`` as "fastembed (model <model>, 384 dims)", with
    ", int8" for a quantized copy."""
    kind, model, dims, _, int8 = _parts(identity)
    if kind == "fastembed":
        return f"fastembed (model {model}, {dims} dims{', int8' if int8 else ''})"
    if kind == "hash":
        return f"hash ({dims} dims)"
    return repr(identity)


def settings_for(identity: str) -> str:
    """The MNEMO_* settings that give an embedder of ``identity``."""
    kind, model, dims, sha, int8 = _parts(identity)
    if kind == "fastembed":
        source = (f"MNEMO_EMBED_MODEL_PATH set to the folder of the same ONNX export "
                  f"(model file sha256 {sha}...)" if sha else
                  "MNEMO_EMBED_MODEL_PATH unset (the model in fastembed's cache)")
        quantize = "MNEMO_EMBED_QUANTIZE=int8" if int8 else "MNEMO_EMBED_QUANTIZE unset"
        return f"MNEMO_EMBEDDER=fastembed, MNEMO_EMBED_MODEL={model}, {quantize} and {source}"
    if kind == "hash":
        return f"MNEMO_EMBEDDER=hash and MNEMO_HASH_DIM={dims}"
    return f"the embedder that wrote {identity!r}"


def mismatch_message(recorded: str, active: str, where: str) -> str:
    """Why a worker with embedder ``active`` refuses data recorded for ``recorded``, and the
    two fixes. Names both embedders (kind, model, dimension), never a path or a secret."""
    return (
        f"{where} holds vectors made by {describe_identity(recorded)}, but this worker's "
        f"embedder is {describe_identity(active)}: it would store memories without vectors, "
        f"so it refuses to start. Either start it with the data's embedder "
        f"({settings_for(recorded)}), or switch the data to the worker's embedder: run `mnemo "
        "memory reindex` with the worker's settings, then start it again"
    )
