"""The mirror sink interface: what the shipper hands a sink, and what a sink promises.

A sink (Postgres, Neo4j) is a copy of part of ``memory_state.db``, kept current from the change
outbox (``memory_core.mirrors.outbox``). The shipper reads the outbox after the sink's cursor,
turns each change into a ``Record`` — the object's *current* state in the state db, or a
tombstone when it is gone — and calls ``apply`` with a batch. Because a record is the current
state, not a diff, a sink never needs the state db, and shipping a batch twice (a crash
between ``apply`` and the cursor move, or two shippers at once) ends in the same mirror.

Tombstones, as records (``row is None``):

- a deleted turn, episode, belief or entity (verified delete, a merge's loser, a dedupe):
  ``Record(tenant, kind, key, None)`` — the sink removes that object (and nothing else);
- a tenant cleared (``kind == "tenant"``, ``key == tenant``): the sink removes everything it
  holds for that tenant — the "tenant graph clear";
- invalidate and supersede are not tombstones: they are belief upserts whose ``status`` /
  ``valid_to`` / ``retired_at`` changed. A sink that mirrors only live facts (a graph of
  current edges) removes the belief when ``is_live(row)`` is false; a sink that mirrors the
  bi-temporal history (Postgres) keeps the row with its new fields.

The interface is deliberately small (huey's ``BaseStorage`` is the model): ``open``,
``apply``, ``close``, plus two class attributes. ``tests/mirrors/contract.py`` is the one
behavioural contract every sink must pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memory_core.errors import MnemoError

# Record kinds, in the order a batch is applied: parents before the rows that point at them
# (a belief's entities, an episode's turns), so a sink with foreign keys can enforce them.
KINDS = ("tenant", "turn", "entity", "episode", "belief")

# The fields a record's row carries, per kind: the state db's columns under the same names
# (times as the state db's fixed-width ISO text, UTC), plus ``turn_uids`` and ``vector`` for
# episodes and ``aliases`` for entities. Natural keys: (tenant, uid) — the same uids as the
# state db, so a mirror can be compared with it row by row.
FIELDS: dict[str, tuple[str, ...]] = {
    "turn": ("turn_uid", "session_id", "idx", "speaker", "occurred_at", "text", "recorded_at"),
    "episode": ("episode_uid", "session_id", "tier", "text", "occurred_at", "importance",
                "created_at", "updated_at", "expires_at", "turn_uids", "vector"),
    "entity": ("entity_id", "name", "kind", "aliases", "created_at", "updated_at"),
    "belief": ("belief_uid", "subject_id", "predicate", "object_text", "object_entity_id",
               "negated", "text", "valid_from", "valid_to", "stated_valid_to", "recorded_at",
               "retired_at", "status", "source", "confidence", "turn_uid", "expires_at"),
    "tenant": (),
}
KEY_FIELD = {"turn": "turn_uid", "episode": "episode_uid", "entity": "entity_id",
             "belief": "belief_uid"}


class MirrorError(MnemoError):
    """A mirror refused a batch for a reason retrying will not fix (its schema is newer than
    this mnemo, a row it cannot store). The message names the sink and the fix."""


class MirrorUnavailable(MnemoError):
    """A mirror cannot be reached or its transaction failed: retry later. The message names
    the sink by its canonical identity and the error's type, never the client's text."""


@dataclass(frozen=True)
class Record:
    """One object to mirror: its natural key and its current fields, or ``row=None`` when it
    is gone (a tombstone). ``kind`` is one of ``KINDS``; for ``tenant`` the key is the tenant
    and the record always is a tombstone (clear everything of the tenant)."""

    tenant: str
    kind: str
    key: str
    row: Mapping[str, Any] | None

    @property
    def tombstone(self) -> bool:
        return self.row is None


def is_live(row: Mapping[str, Any]) -> bool:
    """Whether a belief row is a current fact: active or in conflict, not retired and with no
    world-time end. Sinks that mirror only live facts drop the others."""
    return (row["status"] in ("active", "conflict") and row["retired_at"] is None
            and row["valid_to"] is None)


class MirrorSink(Protocol):
    """A mirror of the state db.

    Class attributes:
        name: keys the sink's cursor in ``mirror_cursors`` (``postgres``, ``neo4j``); stable.
        kinds: the record kinds this sink mirrors; the shipper never hands it others (it
            still moves the cursor past them).

    Errors: ``MirrorUnavailable`` when the mirror is down or a transaction fails (the
    ``ship_changes`` message is retried with backoff; the cursor stays), ``MirrorError`` when
    retrying cannot help (dead-lettered). Messages carry no password, no URL as entered and
    no memory text.
    """

    name: str
    kinds: frozenset[str]

    def open(self) -> None:
        """Connect and create or migrate the mirror's schema (versioned). Idempotent; called
        before the first ``apply``, and again after a failure."""
        ...

    def apply(self, records: Sequence[Record]) -> None:
        """Apply ``records`` in order, all or nothing, and return only once the mirror holds
        them durably (committed). Upserts on natural keys ``(tenant, key)`` and deletes of
        tombstones, so applying the same records again changes nothing. Every statement is
        scoped by the record's tenant: nothing of another tenant is read or touched."""
        ...

    def close(self) -> None:
        """Release connections; the sink may be opened again."""
        ...


def order_records(records: Sequence[Record]) -> list[Record]:
    """``records`` with one per (tenant, kind, key) — the last wins (it is the newest state) —
    and a tenant clear first for its tenant, then parents before children (``KINDS``)."""
    last: dict[tuple[str, str, str], Record] = {}
    for r in records:
        last.pop((r.tenant, r.kind, r.key), None)
        last[(r.tenant, r.kind, r.key)] = r
    rank = {k: i for i, k in enumerate(KINDS)}
    return sorted(last.values(), key=lambda r: rank[r.kind])
