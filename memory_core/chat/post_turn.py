"""The chat side of the post-turn work: check a turn, build its message, send it.

``Memory.after_turn`` and ``mnemo ingest`` both go through here. A turn is checked in full
(``turns.check_turn``) and its tenant must exist before anything is enqueued, so bad input is
refused in the chat process with a clear error instead of becoming a dead letter. The message
is the ``record_turn`` job of the contract (``memory_core.jobs``), built by name: the chat
side never imports ``workers/``. The turn travels as its checked form (storage-encoded time,
stripped speaker), so the worker's own check of it is the identity.

Message ids are derived, not random (``turn_message_id``): the job, the tenant, the turn uid
and a digest of the turn's content. The same turn sent twice is therefore the same message,
which each broker keeps once (``Enqueuer.offer``); before sending, ``Memory.after_turn`` and
``mnemo ingest`` look the turn up in the state db (``turns.is_recorded``, read-only) and
skip a turn already recorded, or refuse one whose turn uid is recorded with other content.
The digest is in the id so that a reused turn uid with other content sent blind (before the
first is recorded) is a second message, which the worker dead-letters with the turn uid
and the reason, instead of one the broker would silently drop as a duplicate.

``check_turn_lines`` checks every line of a JSON Lines file of turns and returns the good
turns with every bad line (``mnemo ingest`` lists them all and sends nothing);
``parse_turn_lines`` is the same, all or nothing (``mnemo demo``). ``TurnSender`` builds
the enqueuer on first use (nothing connects when ``Memory`` opens) and sends through it: on
the embedded broker one INSERT, on Redis a short-timeout send with the spool behind it
(never raises because Redis is down).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from dramatiq import Message

from memory_core.brokers.factory import Enqueuer, make_enqueuer
from memory_core.db.sqlite import Connection
from memory_core.errors import InvalidInputError
from memory_core.jobs import RECORD_TURN, build_message, derived_message_id
from memory_core.model.tenants import require_tenant
from memory_core.model.turns import DEFAULT_MAX_TURN_CHARS, CheckedTurn, TurnInput, check_turn
from memory_core.settings import Settings


def checked_turn(turn: TurnInput | Mapping[str, Any],
                 max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> CheckedTurn:
    """``turn`` (a TurnInput or a mapping of its fields) checked; InvalidInputError names the
    field and the fix."""
    if isinstance(turn, Mapping):
        turn = TurnInput.from_dict(turn)
    return check_turn(turn, max_turn_chars)


_TURN_FIELDS = tuple(f.name for f in dataclasses.fields(CheckedTurn))


def turn_payload(t: CheckedTurn) -> dict[str, Any]:
    """The ``turn`` of a record_turn message: the checked turn's fields, JSON values only
    (str, int, None: nothing to copy deeply, so not ``dataclasses.asdict``, which deep-copies
    each value: 10 us of ``after_turn``'s CPU instead of 1)."""
    return {name: getattr(t, name) for name in _TURN_FIELDS}


def turn_message(conn: Connection, turn: TurnInput | Mapping[str, Any], *,
                 max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> Message[Any]:
    """The record_turn message for ``turn``, after checking it and that its tenant exists.

    ``conn``: a (read-only is enough) connection to the state db. Raises InvalidInputError
    (bad field) or UnknownTenantError (create the tenant first); nothing is sent.
    """
    t = checked_turn(turn, max_turn_chars)
    require_tenant(conn, t.tenant)
    return checked_message(t)


class TurnSender:
    """Sends post-turn messages; the enqueuer is built on the first send. Thread-safe."""

    def __init__(self, settings: Settings, *, namespace: str = "mnemo") -> None:
        self.settings = settings
        self.namespace = namespace  # Redis key prefix (benchmarks and tests use their own)
        self._enqueuer: Enqueuer | None = None
        self._lock = threading.Lock()

    @property
    def enqueuer(self) -> Enqueuer:
        enqueuer = self._enqueuer
        if enqueuer is None:
            with self._lock:
                if self._enqueuer is None:
                    self._enqueuer = make_enqueuer(self.settings, namespace=self.namespace)
                enqueuer = self._enqueuer
        return enqueuer

    def send(self, message: Message[Any]) -> str:
        """Enqueue ``message``; its id. Raises BrokerError only when nothing could keep it
        (the embedded queue file, or on Redis the spool, cannot be written)."""
        return self.enqueuer.send(message)

    def offer(self, message: Message[Any]) -> bool:
        """Enqueue ``message`` unless a message with its id is already queued (or spooled);
        True when it was queued now. Raises BrokerError as ``send``."""
        return self.enqueuer.offer(message)

    def close(self) -> None:
        with self._lock:
            enqueuer, self._enqueuer = self._enqueuer, None
        if enqueuer is not None:
            enqueuer.close()


@dataclasses.dataclass(frozen=True)
class BadLine:
    """A line of a turns file that cannot be ingested: its number (from 1) and why. The
    reason names fields, never the line's text."""

    number: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.number}: {self.reason}"


def _decoded(number: int, line: str | bytes) -> str:
    if isinstance(line, str):
        return line
    try:
        return line.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInputError(f"not UTF-8 text (byte {e.start + 1}): save the file as "
                                "UTF-8") from None


def _line_turn(number: int, line: str | bytes, default_tenant: str,
               max_turn_chars: int) -> CheckedTurn | None:
    """The checked turn of one line (None for a blank one); InvalidInputError why not."""
    text = _decoded(number, line)
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InvalidInputError(
            f"not a JSON object ({type(e).__name__} at column {getattr(e, 'colno', '?')}): "
            "write one turn per line") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"expected a JSON object, got {type(data).__name__}")
    data.setdefault("tenant", default_tenant)
    return checked_turn(data, max_turn_chars)


def check_turn_lines(lines: Iterable[str | bytes], *, default_tenant: str,
                     max_turn_chars: int = DEFAULT_MAX_TURN_CHARS
                     ) -> tuple[list[CheckedTurn], list[BadLine]]:
    """Every line of a JSON Lines file of turns checked (one object per line: session_id,
    turn_uid, speaker, text, occurred_at, optional index and tenant; blank lines skipped):
    the good turns and every bad line, in file order. ``default_tenant`` applies to lines
    without a tenant. A line is bad when it is not UTF-8 (for bytes), not a JSON object,
    has a bad field, or reuses a turn_uid of an earlier line in the same tenant."""
    turns: list[CheckedTurn] = []
    bad: list[BadLine] = []
    seen: dict[tuple[str, str], int] = {}
    for number, line in enumerate(lines, start=1):
        try:
            t = _line_turn(number, line, default_tenant, max_turn_chars)
        except InvalidInputError as e:
            bad.append(BadLine(number, str(e)))
            continue
        if t is None:
            continue
        first = seen.setdefault((t.tenant, t.turn_uid), number)
        if first != number:
            bad.append(BadLine(number, f"turn_uid {t.turn_uid!r} is already used on line "
                                       f"{first}: turn uids are unique per tenant"))
            continue
        turns.append(t)
    return turns, bad


def parse_turn_lines(lines: Iterable[str | bytes], *, default_tenant: str,
                     max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> list[CheckedTurn]:
    """``check_turn_lines``, all or nothing: the turns, or InvalidInputError naming the
    first bad line (and never quoting its text)."""
    turns, bad = check_turn_lines(lines, default_tenant=default_tenant,
                                  max_turn_chars=max_turn_chars)
    if bad:
        more = f" (and {len(bad) - 1} more bad line(s))" if len(bad) > 1 else ""
        raise InvalidInputError(f"{bad[0]}{more}")
    return turns


def turn_digest(t: CheckedTurn) -> str:
    """sha256 of the turn's content (every field the worker compares for a reused uid)."""
    content = json.dumps([t.session_id, t.speaker, t.text, t.occurred_at, t.index],
                         separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def turn_message_id(t: CheckedTurn, job: str = RECORD_TURN) -> str:
    """The message id of ``job`` for turn ``t``: the same turn gives the same id."""
    return derived_message_id(job, t.tenant, t.turn_uid, turn_digest(t))


def checked_message(t: CheckedTurn) -> Message[Any]:
    """The record_turn message of an already checked turn (its tenant checked by the
    caller), under its derived id (``turn_message_id``)."""
    message = build_message(RECORD_TURN, tenant=t.tenant, turn=turn_payload(t))
    return dataclasses.replace(message, message_id=turn_message_id(t))
