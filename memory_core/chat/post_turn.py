"""The chat side of the post-turn work: check a turn, build its message, send it.

``Memory.after_turn`` and ``mnemo ingest`` both go through here. A turn is checked in full
(``turns.check_turn``) and its tenant must exist before anything is enqueued, so bad input is
refused in the chat process with a clear error instead of becoming a dead letter. The message
is the ``record_turn`` job of the contract (``memory_core.jobs``), built by name: the chat
side never imports ``workers/``. The turn travels as its checked form (storage-encoded time,
stripped speaker), so the worker's own check of it is the identity.

``parse_turn_lines`` reads a JSON Lines file of turns (``mnemo ingest``, ``mnemo demo``),
checking every line before anything is sent. ``TurnSender`` builds the enqueuer on first use
(nothing connects when ``Memory`` opens) and sends through it: on the embedded broker one
INSERT, on Redis a short-timeout send with the spool behind it (never raises because Redis
is down).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from dramatiq import Message

from memory_core.brokers.factory import Enqueuer, make_enqueuer
from memory_core.db.sqlite import Connection
from memory_core.errors import InvalidInputError
from memory_core.jobs import build_message
from memory_core.model.tenants import require_tenant
from memory_core.model.turns import DEFAULT_MAX_TURN_CHARS, CheckedTurn, TurnInput, check_turn
from memory_core.settings import Settings

RECORD_TURN = "record_turn"


def checked_turn(turn: TurnInput | Mapping[str, Any],
                 max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> CheckedTurn:
    """``turn`` (a TurnInput or a mapping of its fields) checked; InvalidInputError names the
    field and the fix."""
    if isinstance(turn, Mapping):
        turn = TurnInput.from_dict(turn)
    return check_turn(turn, max_turn_chars)


def turn_payload(t: CheckedTurn) -> dict[str, Any]:
    """The ``turn`` of a record_turn message: the checked turn's fields, JSON values only."""
    return asdict(t)


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

    def close(self) -> None:
        with self._lock:
            enqueuer, self._enqueuer = self._enqueuer, None
        if enqueuer is not None:
            enqueuer.close()


def parse_turn_lines(lines: Iterable[str], *, default_tenant: str,
                     max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> list[CheckedTurn]:
    """Turns from JSON Lines (one object per line: session_id, turn_uid, speaker, text,
    occurred_at, optional index and tenant; blank lines skipped), all checked first.

    ``default_tenant`` applies to lines without a tenant. Raises InvalidInputError naming the
    first bad line (and never quoting its text): not JSON, a bad field, or a turn_uid used
    twice in one tenant.
    """
    turns: list[CheckedTurn] = []
    seen: dict[tuple[str, str], int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as e:
            raise InvalidInputError(
                f"line {number}: not a JSON object ({type(e).__name__} at column "
                f"{getattr(e, 'colno', '?')}): write one turn per line") from None
        if not isinstance(data, dict):
            raise InvalidInputError(f"line {number}: expected a JSON object, got "
                                    f"{type(data).__name__}")
        data.setdefault("tenant", default_tenant)
        try:
            t = checked_turn(data, max_turn_chars)
        except InvalidInputError as e:
            raise InvalidInputError(f"line {number}: {e}") from None
        first = seen.setdefault((t.tenant, t.turn_uid), number)
        if first != number:
            raise InvalidInputError(f"line {number}: turn_uid {t.turn_uid!r} is already used "
                                    f"on line {first}: turn uids are unique per tenant")
        turns.append(t)
    return turns


def checked_message(t: CheckedTurn) -> Message[Any]:
    """The record_turn message of an already checked turn (its tenant checked by the
    caller)."""
    return build_message(RECORD_TURN, tenant=t.tenant, turn=turn_payload(t))
