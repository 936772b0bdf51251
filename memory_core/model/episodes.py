"""Episodes: what happened, one per turn (or a merged run of turns), in four tiers.

A turn's episode reads ``"[<day>] <speaker>: <text>"`` (the raw turn stays verbatim in ``turns``)
and starts in ``working`` while its chat session is the tenant's current one (the session of
the latest turn); a turn of a newer session moves the older working episodes to ``recent``.
``macro_sleep`` moves them on to ``long_term`` and ``archive``. Importance starts from simple
signals (length, beliefs found, an explicit "remember") and is reinforced by recall.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any

from memory_core.clock import from_db
from memory_core.db.sqlite import Connection, inserted_id
from memory_core.model.belief_rules import importance
from memory_core.model.write_tx import WriteTx
from memory_core.vocabulary import RECENT, WORKING

# English month names, independent of the process locale (strftime's %B is not).
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_EXPLICIT_RE = re.compile(r"\b(remember|don'?t forget|note that|keep in mind)\b", re.IGNORECASE)


def episode_uid(tenant: str, turn_uid: str) -> str:
    return "ep_" + hashlib.sha256(f"episode\x1f{tenant}\x1f{turn_uid}".encode()).hexdigest()[:24]


def episode_text(speaker: str, text: str, occurred_at: str | datetime | None = None) -> str:
    """``"[8 May 2023] <speaker>: <text>"``: the day it was said (UTC; stored-time text or an
    aware datetime) makes a question naming a month or a year find it, by keyword and by
    meaning (LoCoMo: +1.5-4 points of evidence R@10 for every retrieval method). Without a
    readable time: ``"<speaker>: <text>"``."""
    day = _day_label(occurred_at)
    return f"[{day}] {speaker}: {text}" if day else f"{speaker}: {text}"


def _day_label(occurred_at: str | datetime | None) -> str | None:
    if occurred_at is None:
        return None
    try:
        at = from_db(occurred_at) if isinstance(occurred_at, str) else occurred_at
    except ValueError:
        return None
    return f"{at.day} {_MONTHS[at.month - 1]} {at.year}"


def is_explicit(text: str) -> bool:
    return _EXPLICIT_RE.search(text[:2000]) is not None


def _tier_for(tx: WriteTx, session_id: str, occurred_at: str) -> str:
    """``working`` for the current session (demoting older sessions' working episodes, each
    one a change for the mirrors)."""
    conn, tenant = tx.conn, tx.tenant
    latest = conn.execute(
        f"SELECT session_id, occurred_at FROM episodes WHERE tenant = ? AND tier = '{WORKING}' "
        "ORDER BY occurred_at DESC LIMIT 1", (tenant,)).fetchone()
    if latest is None or latest[0] == session_id:
        return WORKING
    if occurred_at < latest[1]:
        return RECENT  # a late turn of an older session
    demoted = conn.execute(
        f"UPDATE episodes SET tier = '{RECENT}', updated_at = ? WHERE tenant = ? AND "
        f"tier = '{WORKING}' AND session_id != ? RETURNING episode_uid",
        (occurred_at, tenant, session_id)).fetchall()
    for (uid,) in demoted:
        tx.change("episode", uid)
    return WORKING


def add_turn_episode(tx: WriteTx, turn_id: int, turn_uid: str, session_id: str, speaker: str,
                     text: str, occurred_at: str) -> tuple[int, str, bool]:
    """The episode of one turn: ``(episode id, episode_uid, created)``. Idempotent."""
    conn, tenant = tx.conn, tx.tenant
    uid = episode_uid(tenant, turn_uid)
    # By turn, not by uid: a merged-away episode's turn points at the survivor.
    found = conn.execute("SELECT e.id, e.episode_uid FROM episode_turns et JOIN episodes e "
                         "ON e.id = et.episode_id WHERE et.turn_id = ? LIMIT 1",
                         (turn_id,)).fetchone()
    if found is not None:
        return int(found[0]), found[1], False
    body = episode_text(speaker, text, occurred_at)
    tier = _tier_for(tx, session_id, occurred_at)
    score = importance(text, has_beliefs=False, explicit=is_explicit(text))
    cur = conn.execute(
        "INSERT INTO episodes (tenant, episode_uid, session_id, tier, text, occurred_at, "
        "importance, access_count, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
        (tenant, uid, session_id, tier, body, occurred_at, score, tx.now, tx.now))
    episode_id = inserted_id(cur)
    conn.execute("INSERT INTO episode_turns (episode_id, turn_id) VALUES (?, ?)",
                 (episode_id, turn_id))
    tx.vector("episodes", episode_id, body)
    tx.change("episode", uid)
    tx.act("episode_added")
    return episode_id, uid, True


def note_beliefs(tx: WriteTx, turn_id: int, text: str) -> None:
    """Raise the importance of the turn's episodes once beliefs were drawn from it."""
    score = importance(text, has_beliefs=True, explicit=is_explicit(text))
    tx.conn.execute(
        "UPDATE episodes SET importance = max(importance, ?), updated_at = ? WHERE id IN "
        "(SELECT episode_id FROM episode_turns WHERE turn_id = ?)", (score, tx.now, turn_id))


def normalize_text(text: str) -> str:
    """The comparison form of an episode text: case-folded, single spaces."""
    return " ".join(text.casefold().split())


def merge_duplicates(tx: WriteTx, session_id: str) -> int:
    """Fold working episodes of a session with the same normalised text into the earliest.

    The survivor keeps every turn pointer, the highest importance and the summed access
    count; the others are dropped with their FTS and vector rows. Returns how many went.
    """
    conn, tenant = tx.conn, tx.tenant
    rows = conn.execute(
        "SELECT id, episode_uid, text, importance, access_count FROM episodes WHERE "
        f"tenant = ? AND session_id = ? AND tier = '{WORKING}' ORDER BY occurred_at, id",
        (tenant, session_id)).fetchall()
    keep: dict[str, tuple[Any, ...]] = {}
    dropped = 0
    for row in rows:
        first = keep.setdefault(normalize_text(row[2]), row)
        if first is row:
            continue
        conn.execute("INSERT OR IGNORE INTO episode_turns (episode_id, turn_id) SELECT ?, "
                     "turn_id FROM episode_turns WHERE episode_id = ?", (first[0], row[0]))
        conn.execute("UPDATE episodes SET importance = max(importance, ?), access_count = "
                     "access_count + ?, updated_at = ? WHERE id = ?",
                     (row[3], row[4], tx.now, first[0]))
        conn.execute("DELETE FROM episodes WHERE id = ?", (row[0],))
        tx.drop_vector("episodes", row[0])
        tx.change("episode", row[1], "delete")
        tx.change("episode", first[1])
        dropped += 1
    if dropped:
        tx.act("episode_merged", dropped)
    return dropped


def touch(conn: Connection, tenant: str, episode_ids: list[int], when: str,
          boost: float = 0.0) -> None:
    """Record that recall used these episodes (access count and time, once per id given)
    and reinforce them: importance moves ``boost`` of the way to 1."""
    conn.executemany(
        "UPDATE episodes SET access_count = access_count + 1, last_access_at = max(coalesce("
        "last_access_at, ''), ?), importance = importance + (1.0 - importance) * ? "
        "WHERE tenant = ? AND id = ?", [(when, boost, tenant, i) for i in episode_ids])
