"""The mirror sink contract: one behavioural suite that every ``MirrorSink`` must pass.

How a sink plugs in (the Neo4j sink does it like the Postgres one):

1. Write a fixture named ``harness_<name>`` (in ``tests/mirrors/conftest.py`` or a module it
   imports) that yields a ``SinkHarness`` — usually a ``Harness(...)`` built from:

   - ``make_sink()``: a new, not yet opened sink connected to a mirror that is empty for the
     test's tenants (use fresh tenant names or a fresh database per test);
   - ``read_back(tenant)``: what the mirror holds for ``tenant``, read with the engine's own
     client (not through the sink), as ``{(kind, key): {field: value}}`` with the values in
     the record representation (times as ``memory_core.clock.to_db`` text, vectors as lists
     of floats, ``turn_uids`` / ``aliases`` as lists) and only the fields the mirror keeps;
   - ``make_down_sink()``: a sink whose mirror cannot be reached (a closed port);
   - ``fields``: per kind, the fields ``read_back`` returns (kinds missing: not mirrored);
   - ``live_only``: True when the mirror keeps only current facts (``is_live``: a graph of
     current belief edges); False when it keeps the bi-temporal history (Postgres).

2. Add ``<name>`` to ``SINK_HARNESSES`` in ``tests/mirrors/conftest.py``.
   ``tests/mirrors/test_contract.py`` then runs every test below against it.

The suite covers: upsert then read back; a second (and third) apply of the same batch
changes nothing; tombstones — invalidate and supersede (belief upserts with a new status),
delete, merge (loser entity deleted, its beliefs rewired), tenant clear; last record of a key
in a batch wins; tenant isolation (same keys in two tenants, a clear of one leaves the other);
an empty batch; a down mirror raises ``MirrorUnavailable`` and applies nothing; ``open`` twice.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory_core.mirrors.sink import FIELDS, MirrorSink, Record, is_live, order_records

Readback = dict[tuple[str, str], dict[str, Any]]


class SinkHarness(Protocol):
    fields: Mapping[str, tuple[str, ...]]
    live_only: bool

    def make_sink(self) -> MirrorSink: ...

    def make_down_sink(self) -> MirrorSink: ...

    def read_back(self, tenant: str) -> Readback: ...


@dataclass
class Harness:
    make_sink: Callable[[], MirrorSink]
    make_down_sink: Callable[[], MirrorSink]
    read_back: Callable[[str], Readback]
    fields: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {k: v for k, v in FIELDS.items() if v})
    live_only: bool = False


_seq = itertools.count(1)


def fresh_tenant(prefix: str = "t") -> str:
    """A tenant name no earlier test used (mirrors may be shared by a session)."""
    return f"{prefix}{next(_seq)}_{id(_seq) % 9973}"


def _norm(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 5) if math.isfinite(value) else value
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    return value


def expected_state(harness: SinkHarness, tenant: str,
                   *batches: Sequence[Record]) -> Readback:
    """What the mirror of ``harness`` must hold for ``tenant`` after applying ``batches`` in
    turn (each as the shipper hands it: ``order_records``)."""
    state: Readback = {}
    for r in (r for batch in batches for r in order_records(batch)):
        if r.tenant != tenant:
            continue
        if r.kind == "tenant":
            state.clear()
            continue
        if r.kind not in harness.fields:
            continue
        keep = r.row is not None and not (
            harness.live_only and r.kind == "belief" and not is_live(r.row))
        if keep and r.row is not None:
            state[(r.kind, r.key)] = {f: r.row[f] for f in harness.fields[r.kind]}
        else:
            state.pop((r.kind, r.key), None)
    return state


def normalized(state: Readback) -> Readback:
    return {k: {f: _norm(v) for f, v in fields.items()} for k, fields in state.items()}


# --- records the suite applies ------------------------------------------------------------

T0 = "2026-01-01T00:00:00.000000Z"
T1 = "2026-02-01T00:00:00.000000Z"
T2 = "2026-03-01T12:30:00.250000Z"


def turn(tenant: str, uid: str, idx: int = 0, text: str = "I live in Lisbon") -> Record:
    return Record(tenant, "turn", uid, {
        "turn_uid": uid, "session_id": "s1", "idx": idx, "speaker": "user",
        "occurred_at": T0, "text": text, "recorded_at": T0})


def episode(tenant: str, uid: str, turn_uids: Sequence[str], vector: Sequence[float] | None,
            tier: str = "working", text: str = "user: I live in Lisbon") -> Record:
    return Record(tenant, "episode", uid, {
        "episode_uid": uid, "session_id": "s1", "tier": tier, "text": text,
        "occurred_at": T0, "importance": 0.5, "created_at": T0, "updated_at": T0,
        "expires_at": None, "turn_uids": list(turn_uids),
        "vector": list(vector) if vector is not None else None})


def entity(tenant: str, entity_id: str, name: str, aliases: Sequence[str] = ()) -> Record:
    return Record(tenant, "entity", entity_id, {
        "entity_id": entity_id, "name": name, "kind": "thing", "aliases": sorted(aliases),
        "created_at": T0, "updated_at": T0})


def belief(tenant: str, uid: str, subject: str, predicate: str, obj: str, *,
           obj_entity: str | None = None, status: str = "active",
           valid_to: str | None = None, retired_at: str | None = None,
           turn_uid: str | None = "u1") -> Record:
    return Record(tenant, "belief", uid, {
        "belief_uid": uid, "subject_id": subject, "predicate": predicate, "object_text": obj,
        "object_entity_id": obj_entity, "negated": 0, "text": f"{subject} {predicate} {obj}",
        "valid_from": T0, "valid_to": valid_to, "stated_valid_to": None, "recorded_at": T0,
        "retired_at": retired_at, "status": status, "source": "heuristic", "confidence": 0.7,
        "turn_uid": turn_uid, "expires_at": None})


def vector(seed: int, dim: int = 8) -> list[float]:
    return [round(math.sin(seed * 7 + i), 4) for i in range(dim)]


def base_batch(tenant: str) -> list[Record]:
    """A small memory: two turns, their episodes, three entities, four beliefs."""
    return [
        turn(tenant, "u1", 0), turn(tenant, "u2", 1, "I work at Acme with Ana"),
        episode(tenant, "e1", ["u1"], vector(1)),
        episode(tenant, "e2", ["u2"], None, text="user: I work at Acme with Ana"),
        entity(tenant, "user", "user"), entity(tenant, "acme", "Acme", ["ACME corp"]),
        entity(tenant, "ana", "Ana"),
        belief(tenant, "b1", "user", "lives_in", "Lisbon"),
        belief(tenant, "b2", "user", "works_at", "Acme", obj_entity="acme", turn_uid="u2"),
        belief(tenant, "b3", "user", "knows", "Ana", obj_entity="ana", turn_uid="u2"),
        belief(tenant, "b4", "user", "related_to", "acme", obj_entity="acme", turn_uid=None),
    ]
