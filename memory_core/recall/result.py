"""What a recall returns: facts, then evidence items, with handles ``[1]..[n]``.

``facts`` are the currently valid beliefs relevant to the query (handles ``[1]..[k]``);
``items`` are the evidence (episodes and turns, handles ``[k+1]..[n]``). Each carries its
score components and turn pointers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RecallItem:
    """One recalled memory.

    ``item_id`` is ``<kind>:<uid>`` (``belief:...``, ``episode:...``, ``turn:...``): give it to
    ``mnemo memory explain``. ``turn_uids`` point back to the raw turns the memory came from
    (``mnemo memory recollect <turn_uid>`` shows them with context).
    """

    handle: int
    item_id: str
    kind: str
    text: str
    score: float
    components: dict[str, float]
    turn_uids: tuple[str, ...]
    occurred_at: str | None = None
    session_id: str | None = None
    status: str | None = None

    @property
    def label(self) -> str:
        return f"[{self.handle}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "handle": self.handle, "label": self.label, "id": self.item_id, "kind": self.kind,
            "text": self.text, "score": round(self.score, 6),
            "components": {k: round(v, 6) for k, v in self.components.items()},
            "turn_uids": list(self.turn_uids), "occurred_at": self.occurred_at,
            "session_id": self.session_id, "status": self.status,
        }


@dataclass(frozen=True)
class RecallFact:
    """One currently valid belief (or, with ``as_of``, one valid at that time).

    ``fact_id`` is ``belief:<uid>`` (give it to ``mnemo memory explain``). ``subject`` is the
    entity's display name (the user's own beliefs name the user, or "the user"). ``valid_to``
    is set only when the validity is closed (an ``as_of`` query into the past).
    ``superseded`` lists earlier values this belief replaced, most recent first.
    ``status`` is ``active``, ``conflict`` (kept beside a more trusted belief, shown with
    uncertainty) or, with ``as_of``, ``superseded``/``expired`` (valid then, not now).
    """

    handle: int
    fact_id: str
    subject: str
    predicate: str
    object: str
    text: str
    valid_from: str | None
    valid_to: str | None
    confidence: float
    source: str
    turn_uids: tuple[str, ...]
    score: float
    components: dict[str, float]
    superseded: tuple[str, ...] = ()
    status: str = "active"

    @property
    def label(self) -> str:
        return f"[{self.handle}]"

    @property
    def item_id(self) -> str:
        """``fact_id``, under the name evidence items use."""
        return self.fact_id

    @property
    def kind(self) -> str:
        return "belief"

    def to_dict(self) -> dict[str, Any]:
        return {
            "handle": self.handle, "label": self.label, "id": self.fact_id,
            "subject": self.subject, "predicate": self.predicate, "object": self.object,
            "text": self.text, "valid_from": self.valid_from, "valid_to": self.valid_to,
            "confidence": round(self.confidence, 6), "source": self.source,
            "turn_uids": list(self.turn_uids), "score": round(self.score, 6),
            "components": {k: round(v, 6) for k, v in self.components.items()},
            "superseded": list(self.superseded), "status": self.status,
        }


@dataclass(frozen=True)
class RecallResult:
    """Facts best first, then evidence items best first.

    ``keyword_only`` is True when dense search was off, with the reason. ``len()`` and
    iteration cover the evidence ``items``; ``facts`` are separate (handles come first).
    """

    tenant: str
    items: tuple[RecallItem, ...]
    query_digest: str
    strategy: str
    keyword_only: bool = False
    degraded_reason: str | None = None
    as_of: str | None = None
    used_turn_fallback: bool = False
    budget: dict[str, int] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    log_id: int | None = None
    facts: tuple[RecallFact, ...] = ()

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[RecallItem]:
        return iter(self.items)

    def entries(self) -> list[RecallFact | RecallItem]:
        """Facts then evidence items, in handle order."""
        return [*self.facts, *self.items]

    def by_handle(self, handle: int) -> RecallFact | RecallItem:
        """The fact or item with handle ``handle`` (1-based; facts are numbered first)."""
        for entry in self.entries():
            if entry.handle == handle:
                return entry
        raise IndexError(f"no recalled memory has handle [{handle}]")

    def turn_uids(self) -> list[str]:
        """Every turn pointer in rank order (facts first, then evidence), without repeats."""
        seen: dict[str, None] = {}
        for item in self.entries():
            for uid in item.turn_uids:
                seen.setdefault(uid, None)
        return list(seen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant, "query_digest": self.query_digest,
            "strategy": self.strategy, "keyword_only": self.keyword_only,
            "degraded_reason": self.degraded_reason, "as_of": self.as_of,
            "used_turn_fallback": self.used_turn_fallback, "budget": dict(self.budget),
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "log_id": self.log_id, "facts": [fact.to_dict() for fact in self.facts],
            "items": [item.to_dict() for item in self.items],
        }
