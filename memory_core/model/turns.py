"""Raw turns: the words as said, verbatim, never rewritten; every derived row points back.

``record_turn`` stores one turn (idempotent on ``turn_uid``: the same turn again is a no-op,
a different turn under a used ``turn_uid`` is refused). ``recollect_turn`` returns a turn
with up to ``context`` turns either side from the same chat session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory_core.clock import from_db, to_db, utcnow
from memory_core.db.sqlite import Connection, atomic, inserted_id
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.model.tenants import require_tenant, validate_tenant
from memory_core.validate import check_ident, check_text, db_time

MAX_SPEAKER_CHARS = 100
MAX_CONTEXT = 100
DEFAULT_MAX_TURN_CHARS = 32_768


@dataclass(frozen=True)
class TurnInput:
    """A turn as the chat process hands it over. ``index`` None: next in its session."""

    tenant: str
    session_id: str
    turn_uid: str
    speaker: str
    text: str
    occurred_at: datetime | str
    index: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnInput:
        """From a job payload; unknown or missing keys are refused with the valid ones."""
        fields = {"tenant", "session_id", "turn_uid", "speaker", "text", "occurred_at", "index"}
        if not isinstance(data, Mapping):
            raise InvalidInputError("a turn must be a mapping with keys " + ", ".join(fields))
        extra = set(data) - fields
        missing = fields - {"index"} - set(data)
        if extra or missing:
            raise InvalidInputError(
                f"turn has unknown keys {sorted(extra)} / lacks {sorted(missing)}: use "
                + ", ".join(sorted(fields)))
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        occurred = self.occurred_at
        return {"tenant": self.tenant, "session_id": self.session_id, "turn_uid": self.turn_uid,
                "speaker": self.speaker, "text": self.text, "index": self.index,
                "occurred_at": to_db(occurred) if isinstance(occurred, datetime) else occurred}


@dataclass(frozen=True)
class CheckedTurn:
    tenant: str
    session_id: str
    turn_uid: str
    speaker: str
    text: str
    occurred_at: str  # storage encoding
    index: int | None


def check_turn(turn: TurnInput, max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> CheckedTurn:
    """Validate a turn; raises InvalidInputError naming the field and the fix."""
    if not isinstance(turn, TurnInput):
        raise InvalidInputError(f"expected a TurnInput, not {type(turn).__name__}")
    index = turn.index
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)
                              or not 0 <= index < 2**62):
        raise InvalidInputError("turn index must be a whole number >= 0, or None")
    speaker = check_text(turn.speaker, "turn speaker", MAX_SPEAKER_CHARS)
    if any(ch in speaker for ch in "\r\n\t"):
        raise InvalidInputError("turn speaker must be one line, e.g. 'user' or 'assistant'")
    return CheckedTurn(
        tenant=validate_tenant(turn.tenant),
        session_id=check_ident(turn.session_id, "session_id"),
        turn_uid=check_ident(turn.turn_uid, "turn_uid"),
        speaker=speaker.strip(),
        text=check_text(turn.text, "turn text", max_turn_chars),
        occurred_at=db_time(turn.occurred_at, "occurred_at"),
        index=index,
    )


@dataclass(frozen=True)
class TurnRow:
    id: int
    tenant: str
    turn_uid: str
    session_id: str
    index: int
    speaker: str
    occurred_at: datetime
    text: str


_COLS = "id, tenant, turn_uid, session_id, idx, speaker, occurred_at, text"


def _row(r: Any) -> TurnRow:
    return TurnRow(r[0], r[1], r[2], r[3], r[4], r[5], from_db(r[6]), r[7])


def get_turn(conn: Connection, tenant: str, turn_uid: str) -> TurnRow | None:
    r = conn.execute(f"SELECT {_COLS} FROM turns WHERE tenant = ? AND turn_uid = ?",
                     (tenant, turn_uid)).fetchone()
    return _row(r) if r else None


def turns_page(conn: Connection, tenant: str, after: TurnRow | None,
               limit: int) -> list[TurnRow]:
    """Up to ``limit`` of the tenant's turns after ``after`` (None: from the first), by
    session, then position, then id: a scan of every turn a page at a time, along
    ``ix_turns_session`` (no other tenant's rows are read)."""
    key = ("", -1, 0) if after is None else (after.session_id, after.index, after.id)
    rows = conn.execute(
        f"SELECT {_COLS} FROM turns WHERE tenant = ? AND (session_id, idx, id) > (?, ?, ?) "
        "ORDER BY session_id, idx, id LIMIT ?", (tenant, *key, limit)).fetchall()
    return [_row(r) for r in rows]


def insert_turn(conn: Connection, t: CheckedTurn) -> tuple[int, bool]:
    """Insert inside an open transaction; ``(turn id, created)``. Idempotent on turn_uid."""
    found = conn.execute(
        "SELECT id, session_id, speaker, text, occurred_at, idx FROM turns "
        "WHERE tenant = ? AND turn_uid = ?", (t.tenant, t.turn_uid)).fetchone()
    if found is not None:
        same = found[1:5] == (t.session_id, t.speaker, t.text, t.occurred_at)
        if not same or (t.index is not None and t.index != found[5]):
            raise reused_uid_error(t)
        return int(found[0]), False
    index = t.index
    if index is None:
        index = conn.execute("SELECT coalesce(max(idx) + 1, 0) FROM turns WHERE tenant = ? "
                             "AND session_id = ?", (t.tenant, t.session_id)).fetchone()[0]
    cur = conn.execute(
        "INSERT INTO turns (tenant, turn_uid, session_id, idx, speaker, occurred_at, text, "
        "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (t.tenant, t.turn_uid, t.session_id, index, t.speaker, t.occurred_at, t.text,
         to_db(utcnow())))
    return inserted_id(cur), True


def reused_uid_error(t: CheckedTurn) -> InvalidInputError:
    """The error for a turn_uid already recorded with other content (ids only, no text)."""
    reason = (f"turn_uid {t.turn_uid!r} of tenant {t.tenant!r} is already recorded with "
              "different content")
    return InvalidInputError(
        f"{reason}: turn uids must be unique per tenant; send the new turn under a new "
        "turn_uid", reason=reason)


# One indexed read: whether (tenant, turn_uid) is recorded and, if so, whether with the same
# content (compared inside SQLite, so the stored text never comes back to the caller).
_SAME_TURN = """
SELECT session_id = ? AND speaker = ? AND text = ? AND occurred_at = ?
       AND (? IS NULL OR idx = ?)
FROM turns WHERE tenant = ? AND turn_uid = ?
"""


def is_recorded(conn: Connection, t: CheckedTurn) -> bool:
    """True when ``t`` is already recorded (same content), False when its turn_uid is free.

    Raises InvalidInputError (with a ``reason`` naming the turn uid) when the turn_uid is
    recorded with other content: what the worker would refuse, refused before sending.
    ``conn`` may be read-only.
    """
    row = conn.execute(_SAME_TURN, (t.session_id, t.speaker, t.text, t.occurred_at, t.index,
                                    t.index, t.tenant, t.turn_uid)).fetchone()
    if row is None:
        return False
    if not row[0]:
        raise reused_uid_error(t)
    return True


def record_turn(conn: Connection, turn: TurnInput,
                max_turn_chars: int = DEFAULT_MAX_TURN_CHARS) -> tuple[int, bool]:
    """Store one raw turn in one transaction; ``(turn id, created)``.

    Raises InvalidInputError (bad field, or a reused turn_uid with other content) or
    UnknownTenantError; nothing is stored then.
    """
    checked = check_turn(turn, max_turn_chars)
    require_tenant(conn, checked.tenant)
    with atomic(conn, tenants=(checked.tenant,)):
        return insert_turn(conn, checked)


@dataclass(frozen=True)
class Recollection:
    turn: TurnRow
    before: list[TurnRow]  # oldest first
    after: list[TurnRow]


def recollect_turn(conn: Connection, tenant: str, turn_uid: str, context: int = 10) -> Recollection:
    """The turn ``turn_uid`` with up to ``context`` turns either side of the same session.

    Raises NotFoundError for an unknown turn (in this tenant), InvalidInputError for a bad
    ``context`` (0 to 100).
    """
    require_tenant(conn, tenant)
    check_ident(turn_uid, "turn_uid")
    if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= MAX_CONTEXT:
        raise InvalidInputError(f"context must be a whole number from 0 to {MAX_CONTEXT}")
    turn = get_turn(conn, tenant, turn_uid)
    if turn is None:
        raise NotFoundError(f"turn {turn_uid!r} does not exist in tenant {tenant!r}")
    before = conn.execute(
        f"SELECT {_COLS} FROM turns WHERE tenant = ? AND session_id = ? AND idx < ? "
        "ORDER BY idx DESC LIMIT ?", (tenant, turn.session_id, turn.index, context)).fetchall()
    after = conn.execute(
        f"SELECT {_COLS} FROM turns WHERE tenant = ? AND session_id = ? AND idx > ? "
        "ORDER BY idx LIMIT ?", (tenant, turn.session_id, turn.index, context)).fetchall()
    return Recollection(turn, [_row(r) for r in reversed(before)], [_row(r) for r in after])
