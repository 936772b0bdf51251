"""The words the memory stores in its enumerated columns, written once.

The schema (``memory_core.db.schema_state``) checks its columns against these lists and the
model (``memory_core.model``) decides with them. The stores sit below the model (imports only
go down), so both import the words from here; this module imports nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Belief sources, most trusted first: the order is the trust order. Why this order is in
# ``memory_core.model.belief_rules``, which turns it into ranks.
USER_EXPLICIT = "user_explicit"
OPERATOR = "operator"
IMPORTED = "imported"
HEURISTIC = "heuristic"
LLM_INFERRED = "llm_inferred"
SYSTEM_TOOL = "system_tool"
SOURCES: tuple[str, ...] = (USER_EXPLICIT, OPERATOR, IMPORTED, HEURISTIC, LLM_INFERRED,
                            SYSTEM_TOOL)

# Belief statuses. ``memory_core.model.belief_rules`` says which ones slot resolution leaves
# alone and which ones recall and entity counts use.
ACTIVE = "active"
SUPERSEDED = "superseded"
INVALIDATED = "invalidated"
CONFLICT = "conflict"
PENDING_REVIEW = "pending_review"
EXPIRED = "expired"  # a commitment past its date, or a review never done (commitment_gc)
STATUSES: tuple[str, ...] = (ACTIVE, SUPERSEDED, INVALIDATED, CONFLICT, PENDING_REVIEW,
                             EXPIRED)

# Episode tiers, hottest first (``memory_core.model.episodes`` moves episodes along them).
WORKING = "working"
RECENT = "recent"
LONG_TERM = "long_term"
ARCHIVE = "archive"
TIERS: tuple[str, ...] = (WORKING, RECENT, LONG_TERM, ARCHIVE)

_WORD_RE = re.compile(r"[a-z_]+")


def sql_list(words: Iterable[str]) -> str:
    """``'a', 'b'``: words of this vocabulary quoted for an SQL ``IN (...)`` or ``CHECK``.

    For constants only (a statement keeps one text, so its plan is cached); anything but a
    lower-case word is refused, so user text can never reach SQL this way.
    """
    out = []
    for word in words:
        if not _WORD_RE.fullmatch(word):
            raise ValueError(f"{word!r} is not a vocabulary word: bind it as a parameter")
        out.append(f"'{word}'")
    return ", ".join(out)
