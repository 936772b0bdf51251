"""Reconsolidation of episodes: one episode per thing said, whatever order turns came in.

**Duplicates** are the episodes of one tenant whose texts are equal once case-folded and
whitespace-collapsed (``episodes.normalize_text``, the rule micro-consolidation uses) on the
same UTC day. An episode's text starts with its day label, so this is "the same words on the
same day"; the day is in the key too, so texts of an older format without a label never
merge across days. Episodes are not subjects: they go to the partition of the stable hash
of (tenant, UTC day), so duplicates always meet. A partition walks each tenant's days
through the (tenant, tier, occurred_at) index and loads one day at a time, so its memory is
bounded by the largest day of one tenant, not by the corpus.

**Merging a group** (``plan_group``, pure) looks at the group's turns, never at row ids,
arrival order or how earlier merges grouped them:
- the canonical turn is the group's earliest by (occurred_at, turn_uid); the surviving row
  (the member holding it) takes that turn's episode uid, session, time and text, so the row
  is the same whichever copy arrived or merged first;
- the tier: ``working`` while a turn belongs to its session's current run, that is, the
  tenant's latest session after the last turn of any other session (``current_run``; a turn
  of another session demotes the working tier, so that is what processing the turns in time
  order leaves). The group stays ``working`` when its canonical turn is in the current run
  and a member was working; otherwise it takes the hottest other tier of its members
  (``recent`` when all were working). A tier is never promoted, so this cannot fight the
  sleep loop's moves; and it runs for single episodes too, so a working episode left behind
  by out-of-order processing is demoted like a duplicate;
- importance is the highest, access count the sum, last access the latest, expiry the
  latest (none when any member has none); the others' turn pointers move to the survivor
  and they are deleted with their FTS (trigger) and vector rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.maintenance.partitions import bucket, digest
from memory_core.model.episodes import episode_text, episode_uid, normalize_text
from memory_core.model.write_tx import WriteTx
from memory_core.vocabulary import RECENT, TIERS, WORKING, sql_list


def group_key(tenant: str, text: str, occurred_at: str) -> str:
    """The duplicate key of an episode (stored times start with the UTC day)."""
    return digest("episode", tenant, f"{occurred_at[:10]}\x1f{normalize_text(text)}")


def day_bucket(tenant: str, day: str, partitions: int) -> int:
    """The partition of a tenant's day: duplicates share their day, so they meet in it."""
    return bucket("episode-day", tenant, day, partitions)


@dataclass(frozen=True, order=True)
class TurnRef:
    turn_uid: str
    session_id: str
    occurred_at: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Fields:
    """The columns a merge decides."""

    uid: str
    session_id: str
    tier: str
    text: str
    occurred_at: str
    importance: float
    access_count: int
    last_access_at: str | None
    created_at: str
    expires_at: str | None


@dataclass(frozen=True)
class Member:
    """One episode of a group: its row id and tenant, its current ``Fields``, and the turns
    it covers."""

    id: int
    tenant: str
    fields: Fields
    turns: tuple[TurnRef, ...] = ()

    @classmethod
    def from_row(cls, row: Sequence[Any], turns: tuple[TurnRef, ...]) -> Member:
        """From the first twelve columns of ``_MEMBER_SQL``."""
        return cls(row[0], row[1], Fields(*row[2:12]), turns)


@dataclass(frozen=True)
class GroupPlan:
    survivor: Member
    fields: Fields
    losers: tuple[Member, ...]

    @property
    def changed(self) -> bool:
        return bool(self.losers) or self.fields != self.survivor.fields


def _tier(members: Sequence[Member], canon: TurnRef | None,
          current: tuple[str, str] | None) -> str:
    tiers = {m.fields.tier for m in members}
    in_run = (canon is not None and current is not None and canon.session_id == current[0]
              and canon.occurred_at > current[1])
    if in_run and WORKING in tiers:
        return WORKING
    return next((t for t in TIERS[1:] if t in tiers), RECENT)


def plan_group(members: Sequence[Member], current: tuple[str, str] | None) -> GroupPlan:
    """The merge of one duplicate group (see the module docstring). ``current`` is the
    tenant's current run, ``(session_id, time of the last turn of any other session)``. Pure.
    """
    turns = [(t, m) for m in members for t in m.turns]
    canon: TurnRef | None = None
    if turns:
        canon, survivor = min(turns, key=lambda tm: (tm[0].occurred_at, tm[0].turn_uid))
        uid = episode_uid(survivor.tenant, canon.turn_uid)
        session_id, occurred_at = canon.session_id, canon.occurred_at
        old = survivor.fields
        text = old.text  # written from the canonical turn when it has that turn's uid
        if uid != old.uid:
            text = episode_text(canon.speaker, canon.text, canon.occurred_at)
            if normalize_text(text) != normalize_text(old.text):
                text = old.text  # an older text format: keep the words as they are
    else:
        survivor = min(members, key=lambda m: (m.fields.occurred_at, m.fields.uid))
        old = survivor.fields
        uid, session_id, occurred_at, text = old.uid, old.session_id, old.occurred_at, old.text
    expiries = [m.fields.expires_at for m in members]
    accessed = [m.fields.last_access_at for m in members if m.fields.last_access_at is not None]
    fields = Fields(
        uid, session_id, _tier(members, canon, current), text, occurred_at,
        importance=max(m.fields.importance for m in members),
        access_count=sum(m.fields.access_count for m in members),
        last_access_at=max(accessed) if accessed else None,
        created_at=min(m.fields.created_at for m in members),
        expires_at=None if None in expiries else max(e for e in expiries if e is not None))
    losers = tuple(sorted((m for m in members if m.id != survivor.id), key=lambda m: m.id))
    return GroupPlan(survivor, fields, losers)


def current_run(conn: Any, tenant: str) -> tuple[str, str] | None:
    """``(session, since)``: the tenant's latest session, and the time of the last turn of any
    other session ("" when there is none); None when the tenant has no turns. From the raw
    turns, which merges never change (two aggregate scans per tenant and partition)."""
    latest = conn.execute("SELECT session_id FROM turns WHERE tenant = ? ORDER BY "
                          "occurred_at DESC, turn_uid DESC LIMIT 1", (tenant,)).fetchone()
    if latest is None:
        return None
    other = conn.execute("SELECT max(occurred_at) FROM turns WHERE tenant = ? AND "
                         "session_id != ?", (tenant, latest[0])).fetchone()
    return latest[0], other[0] or ""


# --- a partition's episodes, walked day by day -------------------------------------------

_TIERS_SQL = sql_list(TIERS)
# A stored time is "YYYY-MM-DDTHH:MM:SS.ffffffZ": every time of day D sorts before D + "U".
_DAY_END = "U"


def next_day(conn: Any, tenant: str, after: str) -> str | None:
    """The first day after ``after`` ("" for the first) with an episode of ``tenant``: one
    index search per tier (ix_episodes_tier)."""
    start = after + _DAY_END if after else ""
    found = [conn.execute("SELECT min(occurred_at) FROM episodes WHERE tenant = ? AND "
                          "tier = ? AND occurred_at >= ?", (tenant, tier, start)).fetchone()[0]
             for tier in TIERS]
    first = min((f for f in found if f is not None), default=None)
    return first[:10] if first else None


def day_size(conn: Any, tenant: str, day: str) -> int:
    return int(conn.execute(
        f"SELECT count(*) FROM episodes WHERE tenant = ? AND tier IN ({_TIERS_SQL}) AND "
        "occurred_at >= ? AND occurred_at < ?", (tenant, day, day + _DAY_END)).fetchone()[0])


_MEMBER_SQL = (
    "SELECT e.id, e.tenant, e.episode_uid, e.session_id, e.tier, e.text, e.occurred_at, "
    "e.importance, e.access_count, e.last_access_at, e.created_at, e.expires_at, "
    "t.turn_uid, t.session_id, t.occurred_at, t.speaker, t.text FROM episodes e "
    "LEFT JOIN episode_turns et ON et.episode_id = e.id LEFT JOIN turns t ON t.id = et.turn_id "
    f"WHERE e.tenant = ? AND e.tier IN ({_TIERS_SQL}) AND e.occurred_at >= ? "
    "AND e.occurred_at < ? ORDER BY e.id")


def load_day(conn: Any, tenant: str, day: str) -> list[list[Member]]:
    """The duplicate groups of one tenant's day (single episodes included), in key order."""
    rows: dict[int, list[Any]] = {}
    for r in conn.execute(_MEMBER_SQL, (tenant, day, day + _DAY_END)):
        rows.setdefault(r[0], []).append(r)
    groups: dict[str, list[Member]] = {}
    for parts in rows.values():
        head = parts[0]
        turns = tuple(sorted(TurnRef(*p[12:17]) for p in parts if p[12] is not None))
        member = Member.from_row(head, turns)
        key = group_key(tenant, member.fields.text, member.fields.occurred_at)
        groups.setdefault(key, []).append(member)
    return [groups[k] for k in sorted(groups)]


def apply_plan(tx: WriteTx, plan: GroupPlan) -> None:
    """Write one group's merge (inside the caller's transaction)."""
    conn, s, old, f = tx.conn, plan.survivor, plan.survivor.fields, plan.fields
    for loser in plan.losers:
        conn.execute("INSERT OR IGNORE INTO episode_turns (episode_id, turn_id) SELECT ?, "
                     "turn_id FROM episode_turns WHERE episode_id = ?", (s.id, loser.id))
        conn.execute("DELETE FROM episodes WHERE id = ?", (loser.id,))
        tx.drop_vector("episodes", loser.id)
        tx.change("episode", loser.fields.uid, "delete")
    uid = f.uid
    if uid != old.uid and conn.execute(
            "SELECT 1 FROM episodes WHERE tenant = ? AND episode_uid = ? AND id != ?",
            (tx.tenant, uid, s.id)).fetchone():
        uid = old.uid  # taken by an episode outside the group (written since): keep ours
    conn.execute(
        "UPDATE episodes SET episode_uid = ?, session_id = ?, tier = ?, text = ?, "
        "occurred_at = ?, importance = ?, access_count = ?, last_access_at = ?, "
        "created_at = ?, expires_at = ?, updated_at = ? WHERE id = ?",
        (uid, f.session_id, f.tier, f.text, f.occurred_at, f.importance, f.access_count,
         f.last_access_at, f.created_at, f.expires_at, tx.now, s.id))
    if uid != old.uid:
        tx.change("episode", old.uid, "delete")
    tx.change("episode", uid)
    if f.text != old.text:
        tx.vector("episodes", s.id, f.text)
    if plan.losers:
        tx.act("episode_merged", len(plan.losers))
