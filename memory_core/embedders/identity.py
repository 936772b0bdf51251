"""Embedder identities read back for people: what the state db recorded, and how to get it.

An identity is ``hash:<scheme>:dim=<n>`` or ``fastembed:<model>:dim=<n>[:path-sha256=<hex>]``
(see ``Embedder.identity``); it never holds a local path or a secret, so it may be shown.
"""

from __future__ import annotations


def _parts(identity: str) -> tuple[str, str, str, str | None]:
    """(kind, model, dims, export sha256 prefix) of an identity; model "" for hash."""
    kind, _, rest = identity.partition(":")
    fields = rest.split(":")
    values = dict(f.split("=", 1) for f in fields if "=" in f)
    model = ":".join(f for f in fields if "=" not in f) if kind == "fastembed" else ""
    return kind, model, values.get("dim", "?"), values.get("path-sha256")


def describe_identity(identity: str) -> str:
    """``fastembed:<model>:dim=384:...`` as "fastembed (model <model>, 384 dims)"."""
    kind, model, dims, _ = _parts(identity)
    if kind == "fastembed":
        return f"fastembed (model {model}, {dims} dims)"
    if kind == "hash":
        return f"hash ({dims} dims)"
    return repr(identity)


def settings_for(identity: str) -> str:
    """The MNEMO_* settings that give an embedder of ``identity``."""
    kind, model, dims, sha = _parts(identity)
    if kind == "fastembed":
        source = (f"MNEMO_EMBED_MODEL_PATH set to the folder of the same ONNX export "
                  f"(model file sha256 {sha}...)" if sha else
                  "MNEMO_EMBED_MODEL_PATH unset (the model in fastembed's cache)")
        return f"MNEMO_EMBEDDER=fastembed, MNEMO_EMBED_MODEL={model} and {source}"
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
