"""What a recall returns: items with handles ``[1]..[n]``, score components, turn pointers."""

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
class RecallResult:
    """Items best first. ``keyword_only`` is True when dense search was off, with the reason."""

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

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[RecallItem]:
        return iter(self.items)

    def by_handle(self, handle: int) -> RecallItem:
        """The item with handle ``handle`` (1-based)."""
        return self.items[handle - 1]

    def turn_uids(self) -> list[str]:
        """Every turn pointer in rank order, without repeats."""
        seen: dict[str, None] = {}
        for item in self.items:
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
            "log_id": self.log_id, "items": [item.to_dict() for item in self.items],
        }
