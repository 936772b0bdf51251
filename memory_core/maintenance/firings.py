"""The firing ledger: one row per schedule window in ``schedule_firings`` (``memory_ops.db``).

A window key names one firing: ``<schedule>@<window start>`` (``macro_sleep@2026-12-01T06:
00:00Z``) for a scheduled or catch-up firing, ``manual:<uuid>`` for ``mnemo schedules fire``.
Its message id is derived from the key (``message_id_for``), so whoever sends a window sends
the same message.

A row moves ``claimed`` (the scheduler won the window's claim) -> ``enqueued`` (the broker took
the message) -> ``running`` (a worker started it; chained partitions keep it there) -> ``done``
or ``failed`` (a retry goes back to ``running``). A ``missed`` row stands for windows that
passed while no scheduler ran: one row per outage and schedule, keyed by the first missed
window, with their number in ``missed_count``; the run that catches them up is the next row
(kind ``catch_up``). Writers: the scheduler (claimed, enqueued, missed), the maintenance
actors (running, done, failed), ``mnemo schedules fire`` (a manual row). With Redis and a
scheduler on another host, each side writes its own ops db: the workers' rows are complete.

Times are stored as ``memory_core.clock`` text, so text order is time order.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory_core.clock import from_db, to_db
from memory_core.db.sqlite import atomic
from memory_core.errors import InvalidInputError

CLAIMED, ENQUEUED, RUNNING, DONE, FAILED, MISSED = (
    "claimed", "enqueued", "running", "done", "failed", "missed")
SCHEDULED, CATCH_UP, MANUAL = "scheduled", "catch_up", "manual"

MANUAL_PREFIX = "manual:"
_KEY_TIME = "%Y-%m-%dT%H:%M:%SZ"
_MESSAGE_NS = uuid.UUID("0b7c5f43-6a8e-4d0e-9a3f-2f6d6e656d6f")
CLAIM_PREFIX = "window:"  # the lease name of a window's claim


def window_key(schedule_id: str, start: datetime) -> str:
    return f"{schedule_id}@{start.strftime(_KEY_TIME)}"


def manual_key() -> str:
    return f"{MANUAL_PREFIX}{uuid.uuid4()}"


def parse_window_key(key: str) -> tuple[str | None, datetime | None]:
    """(schedule id, window start) of a scheduled key; (None, None) for a manual one.

    Raises InvalidInputError for anything else (a message's ``window`` is input).
    """
    if not isinstance(key, str) or len(key) > 200:
        raise InvalidInputError("a window key is text like macro_sleep@2026-12-01T06:00:00Z")
    if key.startswith(MANUAL_PREFIX):
        try:
            uuid.UUID(key[len(MANUAL_PREFIX):])
        except ValueError:
            raise InvalidInputError(f"manual window key {key!r} must be manual:<uuid>") from None
        return None, None
    schedule_id, sep, when = key.partition("@")
    try:
        start = datetime.strptime(when, _KEY_TIME).replace(tzinfo=UTC)
    except ValueError:
        start = None
    if not sep or not schedule_id or start is None:
        raise InvalidInputError(f"window key {key!r} must be <schedule>@<YYYY-MM-DDTHH:MM:SSZ> "
                                "or manual:<uuid>")
    return schedule_id, start


def message_id_for(key: str) -> str:
    """The message id of window ``key``: the same for every scheduler and every restart."""
    return str(uuid.uuid5(_MESSAGE_NS, key))


def claim_name(key: str) -> str:
    return f"{CLAIM_PREFIX}{key}"


@dataclass(frozen=True)
class Firing:
    """One ledger row."""

    schedule_id: str
    window_key: str
    kind: str
    status: str
    window_start: datetime | None
    fired_at: datetime
    message_id: str | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    attempts: int
    missed_count: int
    error: str | None
    counts: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.__dict__)
        for name in ("window_start", "fired_at", "started_at", "finished_at"):
            value = out[name]
            out[name] = None if value is None else value.isoformat().replace("+00:00", "Z")
        return out


_COLUMNS = ("schedule_id, window_key, kind, status, window_start, fired_at, message_id, "
            "started_at, finished_at, duration_ms, attempts, missed_count, error, counts")


def _time(text: str | None) -> datetime | None:
    return None if text is None else from_db(text)


def _row(r: Any) -> Firing:
    return Firing(r[0], r[1], r[2], r[3], _time(r[4]), from_db(r[5]), r[6], _time(r[7]),
                  _time(r[8]), r[9], r[10], r[11], r[12], json.loads(r[13]) if r[13] else {})


def record_claimed(conn: Any, schedule_id: str, key: str, *, kind: str,
                   window_start: datetime | None, fired_at: datetime) -> None:
    """A won claim: the row the scheduler writes before it sends (in the claim's
    transaction when the claim is in this database)."""
    conn.execute(
        "INSERT INTO schedule_firings (schedule_id, window_key, kind, status, window_start, "
        "fired_at, message_id) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (schedule_id, window_key) DO NOTHING",
        (schedule_id, key, kind, CLAIMED, window_start and to_db(window_start),
         to_db(fired_at), message_id_for(key)))


def record_missed(conn: Any, schedule_id: str, first_key: str, first_start: datetime,
                  count: int, at: datetime) -> None:
    """``count`` windows from ``first_start`` on passed while no scheduler ran."""
    conn.execute(
        "INSERT INTO schedule_firings (schedule_id, window_key, kind, status, window_start, "
        "fired_at, missed_count) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (schedule_id, window_key) DO NOTHING",
        (schedule_id, first_key, SCHEDULED, MISSED, to_db(first_start), to_db(at), count))


def mark_enqueued(conn: Any, schedule_id: str, key: str) -> None:
    """The broker took the message (a worker may already have moved the row on)."""
    conn.execute("UPDATE schedule_firings SET status = ? WHERE schedule_id = ? AND "
                 "window_key = ? AND status = ?", (ENQUEUED, schedule_id, key, CLAIMED))


def forget_unsent(conn: Any, schedule_id: str, key: str) -> None:
    """Drop a claimed row whose message could not be sent (a manual firing that failed)."""
    conn.execute("DELETE FROM schedule_firings WHERE schedule_id = ? AND window_key = ? AND "
                 "status = ?", (schedule_id, key, CLAIMED))


def begin_run(conn: Any, schedule_id: str, key: str, *, message_id: str | None,
              window_start: datetime | None, now: datetime) -> bool:
    """A worker starts the window: False when it is already done (a redelivery: skip it).

    Creates the row when the scheduler wrote its rows in another ops database.
    """
    kind = MANUAL if window_start is None else SCHEDULED
    with atomic(conn) as c:
        cur = c.execute(
            "INSERT INTO schedule_firings (schedule_id, window_key, kind, status, window_start, "
            "fired_at, message_id, started_at, attempts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1) "
            "ON CONFLICT (schedule_id, window_key) DO UPDATE SET status = excluded.status, "
            "attempts = attempts + 1, started_at = coalesce(started_at, excluded.started_at), "
            "message_id = coalesce(message_id, excluded.message_id), error = NULL "
            "WHERE status NOT IN (?, ?)",
            (schedule_id, key, kind, RUNNING, window_start and to_db(window_start), to_db(now),
             message_id, to_db(now), DONE, MISSED))
        return bool(cur.rowcount == 1)


def _merged(old: str | None, counts: Mapping[str, Any]) -> str:
    """Counts of chained runs (reconsolidation partitions) add up; text values are kept."""
    merged: dict[str, Any] = json.loads(old) if old else {}
    for name, value in counts.items():
        prev = merged.get(name)
        both_numbers = all(isinstance(v, int | float) and not isinstance(v, bool)
                           for v in (prev, value))
        merged[name] = prev + value if both_numbers else value
    return json.dumps(merged, sort_keys=True, separators=(",", ":"))


def finish_run(conn: Any, schedule_id: str, key: str, *, counts: Mapping[str, Any],
               duration_ms: int, done: bool, now: datetime) -> None:
    """A run returned: ``done`` closes the window; otherwise a follow-up continues it."""
    with atomic(conn) as c:
        row = c.execute("SELECT counts FROM schedule_firings WHERE schedule_id = ? AND "
                        "window_key = ?", (schedule_id, key)).fetchone()
        c.execute(
            "UPDATE schedule_firings SET status = ?, counts = ?, finished_at = ?, "
            "duration_ms = coalesce(duration_ms, 0) + ? WHERE schedule_id = ? AND "
            "window_key = ?",
            (DONE if done else RUNNING, _merged(row[0] if row else None, counts),
             to_db(now) if done else None, duration_ms, schedule_id, key))


def fail_run(conn: Any, schedule_id: str, key: str, *, error: str, duration_ms: int,
             now: datetime) -> None:
    """A run raised: ``error`` is the exception's type name, never its text."""
    conn.execute(
        "UPDATE schedule_firings SET status = ?, error = ?, finished_at = ?, "
        "duration_ms = coalesce(duration_ms, 0) + ? WHERE schedule_id = ? AND window_key = ? "
        "AND status != ?", (FAILED, error, to_db(now), duration_ms, schedule_id, key, DONE))


def last_window_start(conn: Any, schedule_id: str) -> datetime | None:
    """The start of the latest scheduled window the ledger knows (missed ones included)."""
    row = conn.execute("SELECT max(window_start) FROM schedule_firings WHERE schedule_id = ? "
                       "AND kind != ?", (schedule_id, MANUAL)).fetchone()
    return _time(row[0])


def unsent(conn: Any, fired_before: datetime) -> list[Firing]:
    """Claimed windows whose message was never confirmed sent (the scheduler died between
    the claim and the send): the next leader sends them again, under the same id."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM schedule_firings WHERE status = ? AND "
                        "fired_at < ? ORDER BY fired_at LIMIT 100",
                        (CLAIMED, to_db(fired_before))).fetchall()
    return [_row(r) for r in rows]


def history(conn: Any, schedule_id: str, limit: int = 20) -> list[Firing]:
    """The schedule's rows, newest first."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM schedule_firings WHERE schedule_id = ? "
                        "ORDER BY fired_at DESC, window_start DESC LIMIT ?",
                        (schedule_id, limit)).fetchall()
    return [_row(r) for r in rows]


def rows_between(conn: Any, start: datetime, end: datetime, *, page: int = 500
                 ) -> Iterator[Firing]:
    """Rows fired in ``[start, end)``, oldest first, read a page at a time."""
    last = (to_db(start), "", "")
    while True:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM schedule_firings WHERE (fired_at, schedule_id, "
            "window_key) > (?, ?, ?) AND fired_at < ? ORDER BY fired_at, schedule_id, "
            "window_key LIMIT ?", (*last, to_db(end), page)).fetchall()
        for r in rows:
            yield _row(r)
        if len(rows) < page:
            return
        last = (rows[-1][5], rows[-1][0], rows[-1][1])


def prune(conn: Any, before: datetime, now: datetime, *, batch: int = 1000) -> int:
    """Delete rows fired before ``before`` and the window claims lapsed by ``now``, in short
    transactions; how many ledger rows went."""
    total = 0
    while True:
        with atomic(conn) as c:
            n = c.execute(
                "DELETE FROM schedule_firings WHERE rowid IN (SELECT rowid FROM "
                "schedule_firings WHERE fired_at < ? LIMIT ?)", (to_db(before), batch)).rowcount
        total += n
        if n < batch:
            break
    # Window claims expire when their ledger rows are pruned (same retention); a lapsed
    # lease row is never read again, so it can go.
    with atomic(conn) as c:
        c.execute("DELETE FROM leases WHERE name LIKE ? AND expires_at <= ?",
                  (f"{CLAIM_PREFIX}%", now.timestamp()))
    return total


def latest(conn: Any, schedule_id: str) -> Firing | None:
    """The schedule's newest fired window (missed rows aside), or None."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM schedule_firings WHERE schedule_id = ? AND "
                       "status != ? ORDER BY fired_at DESC LIMIT 1",
                       (schedule_id, MISSED)).fetchone()
    return None if row is None else _row(row)


def misses_since(conn: Any, schedule_id: str, since: datetime) -> int:
    """Windows of the schedule recorded missed since ``since``."""
    row = conn.execute("SELECT coalesce(sum(missed_count), 0) FROM schedule_firings WHERE "
                       "schedule_id = ? AND status = ? AND fired_at >= ?",
                       (schedule_id, MISSED, to_db(since))).fetchone()
    return int(row[0])
