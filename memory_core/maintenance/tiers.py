"""Episode importance over time, and the tier an episode belongs in.

- **Decay**: importance halves every ``MNEMO_IMPORTANCE_HALF_LIFE_S``. It is computed from
  the time it was last decayed to (``decayed_at``, at first ``created_at``), never applied
  per run: two runs at the same time change nothing the second time, and runs at t1 then
  t2 give what one run at t2 gives.
- **Tiers** (``tier_for``, pure): an episode stays ``working`` while its chat session goes
  on (``common.end_sessions`` moves it on); after that it is ``recent`` while younger than
  ``MNEMO_TIER_RECENT_S`` (by when it happened), then ``long_term``, and ``archive`` once
  older than ``MNEMO_TIER_ARCHIVE_S`` with importance below ``MNEMO_ARCHIVE_IMPORTANCE``.
  Reinforcement can bring an archived episode back to ``long_term``: the tier is a function
  of age and importance, so applying it again changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_core.clock import to_db
from memory_core.db.sqlite import atomic
from memory_core.maintenance.base import JobEnv
from memory_core.maintenance.common import id_pages, job_tx
from memory_core.settings import Settings

PAGE = 1_000
# The pages walk the primary key: NOT INDEXED stops the planner from taking a tenant index
# and sorting every episode of the tenant again for each page.
_SECONDS = "(julianday(?) - julianday({col})) * 86400.0"  # elapsed seconds, in SQL


@dataclass(frozen=True)
class TierPolicy:
    recent_s: float
    archive_s: float
    archive_importance: float

    @classmethod
    def from_settings(cls, s: Settings) -> TierPolicy:
        return cls(s.tier_recent_s, s.tier_archive_s, s.archive_importance)


def tier_for(age_s: float, importance: float, policy: TierPolicy) -> str:
    """The tier of an episode whose chat session has ended."""
    if age_s < policy.recent_s:
        return "recent"
    if age_s >= policy.archive_s and importance < policy.archive_importance:
        return "archive"
    return "long_term"


def decayed(importance: float, elapsed_s: float, half_life_s: float) -> float:
    return importance * 0.5 ** (max(elapsed_s, 0.0) / half_life_s)


def decay(env: JobEnv, tenant: str, page: int = PAGE) -> int:
    """Decay every episode of ``tenant`` up to ``env.now``; returns how many changed.

    Each page is read and written in one transaction, so a concurrent raise of importance
    (beliefs found in the turn) is never overwritten by a stale value.
    """
    conn, now = env.state.conn, to_db(env.now)
    half_life = float(env.settings.importance_half_life_s)
    last, changed = 0, 0
    while True:
        with atomic(conn, tenants=(tenant,)):
            rows = conn.execute(
                "SELECT id, importance, coalesce(decayed_at, created_at) < ?, "
                + _SECONDS.format(col="coalesce(decayed_at, created_at)")
                + " FROM episodes NOT INDEXED WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?",
                (now, now, tenant, last, page)).fetchall()
            if not rows:
                return changed
            last = rows[-1][0]
            updates = [(decayed(imp, elapsed, half_life), now, row_id)
                       for row_id, imp, due, elapsed in rows if due]
            conn.executemany("UPDATE episodes SET importance = ?, decayed_at = ? WHERE id = ?",
                             updates)
            changed += len(updates)


def move(env: JobEnv, tenant: str, page: int = PAGE) -> dict[str, int]:
    """Put every episode of ``tenant`` whose session has ended into its tier; returns the
    moves as ``{"<from>_to_<to>": n}``. Working episodes are left to ``end_sessions``."""
    conn, now = env.state.conn, to_db(env.now)
    policy = TierPolicy.from_settings(env.settings)
    moves: dict[str, int] = {}
    sql = ("SELECT id, episode_uid, tier, importance, " + _SECONDS.format(col="occurred_at")
           + " FROM episodes NOT INDEXED WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?")
    for rows in id_pages(conn, sql, (now, tenant), page):
        todo = [(row_id, uid, tier, tier_for(age, imp, policy))
                for row_id, uid, tier, imp, age in rows if tier != "working"]
        todo = [t for t in todo if t[2] != t[3]]
        if todo:
            _apply_moves(env, tenant, todo, moves)
    return moves


def _apply_moves(env: JobEnv, tenant: str, todo: list[tuple[int, str, str, str]],
                 moves: dict[str, int]) -> None:
    with job_tx(env, tenant) as tx:
        for row_id, uid, old, new in todo:
            # Only if it is still where it was read: a concurrent write wins.
            cur = tx.conn.execute("UPDATE episodes SET tier = ?, updated_at = ? WHERE id = ? "
                                  "AND tier = ?", (new, tx.now, row_id, old))
            if cur.rowcount:
                tx.change("episode", uid)
                key = f"{old}_to_{new}"
                moves[key] = moves.get(key, 0) + 1

