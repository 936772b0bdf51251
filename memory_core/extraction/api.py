"""The extractor plug point: any callable ``extractor(turn_text) -> candidates``.

``memory_core.extraction.extract_heuristic`` is the default; an LLM extractor later is just
another callable (give it a ``name`` attribute so its idempotency key differs). A candidate
has ``subject`` (a label, ``"@speaker"`` for the turn's speaker), ``predicate``, ``object``
and optionally ``valid_from`` / ``valid_to`` (aware datetimes; default: the turn's time),
``confidence`` and ``source`` (default ``heuristic``). Candidates are checked like any other
input; an invalid one is skipped and counted (hygiene reason ``invalid_candidate``) so a
sloppy extractor cannot block a turn.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

from memory_core.clock import from_db
from memory_core.errors import InvalidInputError
from memory_core.model.beliefs import BeliefInput, Checked, check_belief
from memory_core.model.turns import CheckedTurn
from memory_core.vocabulary import HEURISTIC

Extractor = Callable[[Any], Iterable[Any]]
DEFAULT_SOURCE = HEURISTIC


def default_extractor() -> Extractor:
    from memory_core.extraction.heuristic import (
        extract_heuristic,  # the rule tables load on first use
    )

    return extract_heuristic


def extractor_name(extractor: Extractor) -> str:
    return str(getattr(extractor, "name", None) or getattr(extractor, "__name__", None)
               or type(extractor).__name__)


def turn_text(t: CheckedTurn) -> Any:
    """The extractor's input: ``extraction.TurnText`` built from the fields it declares."""
    values = {"text": t.text, "speaker": t.speaker, "occurred_at": from_db(t.occurred_at),
              "turn_uid": t.turn_uid, "session_id": t.session_id, "tenant": t.tenant}
    cls = _turn_text_class()
    if cls is None:
        return SimpleNamespace(**values)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


@functools.cache
def _turn_text_class() -> Any:
    try:
        from memory_core.extraction.heuristic import TurnText
    except ImportError:  # custom extractors work without the heuristic extractor's module
        return None
    return TurnText


def _field(candidate: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        value = getattr(candidate, name, None)
        if value is not None:
            return value
    return default


def to_input(candidate: Any, t: CheckedTurn) -> BeliefInput:
    negated = bool(getattr(candidate, "negated", False))
    if negated:  # a negation starts when the fact stopped holding
        valid_from, valid_to = _field(candidate, "valid_to", default=t.occurred_at), None
    else:
        valid_from = _field(candidate, "valid_from", default=t.occurred_at)
        valid_to = _field(candidate, "valid_to")
    return BeliefInput(
        subject=_field(candidate, "subject"),
        predicate=_field(candidate, "predicate"),
        object=_field(candidate, "object", "obj", "object_text"),
        valid_from=valid_from,
        valid_to=valid_to,
        negated=negated,
        replaces=bool(getattr(candidate, "replaces", False)),
        confidence=_field(candidate, "confidence", default=0.7),
        source=_field(candidate, "source", default=DEFAULT_SOURCE),
        turn_uid=t.turn_uid,
        expires_at=_field(candidate, "expires_at"),
    )


def candidates_for(extractor: Extractor | None, t: CheckedTurn) -> tuple[list[Checked], int]:
    """Run the extractor on a turn (outside any transaction): ``(checked, invalid count)``."""
    run = extractor or default_extractor()
    checked: list[Checked] = []
    invalid = 0
    for candidate in run(turn_text(t)) or ():
        try:
            checked.append(check_belief(to_input(candidate, t)))
        except InvalidInputError:
            invalid += 1
    return checked, invalid
