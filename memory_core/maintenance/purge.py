"""``session_purge`` (daily): tidy the chat sessions that ended, and the retention sweep.

A chat session has ended when no turn of it arrived for ``MNEMO_SESSION_IDLE_S``
(``common.session_ended``). Its working-tier material is then:
- moved on: its working episodes go to ``recent`` (as ``macro_sleep`` does too);
- purged: an episode of it (still ``working`` or ``recent``) that recall never used and
  whose importance signals score below ``MNEMO_SESSION_PURGE_BELOW`` is deleted through
  the verified delete path (reason ``session_purge``). The signals are those an episode
  starts with (``belief_rules.importance``: length, beliefs drawn from its turns, an
  explicit "remember"), recomputed from its turns, not its decayed importance: at the
  default 0.35 that is a short turn ("ok", "thanks!", "lol") with no belief in it. The
  raw turns stay (verbatim, findable by recall's turn fallback and ``recollect_turn``).
  ``MNEMO_SESSION_PURGE_BELOW=0`` keeps every episode.
Then the retention sweep (``sweep``) removes every memory past its ``expires_at``.

Idempotent: what is purged or swept is gone, and the rest is decided again from the same
signals, so a rerun of the window removes nothing more.
"""

from __future__ import annotations

from memory_core.db.sqlite import Connection
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.common import end_sessions, id_pages, session_ended, tenants
from memory_core.maintenance.sweep import sweep
from memory_core.model.belief_rules import importance
from memory_core.model.deletion import delete_memories
from memory_core.model.episodes import is_explicit

PAGE = 500
REASON = "session_purge"
_SESSION_CACHE = 10_000  # sessions whose end is remembered within one tenant's pass
_CANDIDATES_SQL = ("SELECT id, session_id FROM episodes NOT INDEXED WHERE tenant = ? AND "
                   "tier IN ('working', 'recent') AND access_count = 0 AND id > ? "
                   "ORDER BY id LIMIT ?")


def start_signals(conn: Connection, tenant: str, episode_id: int) -> float:
    """The importance an episode's turns give it at the start (never decayed)."""
    turns = conn.execute(
        "SELECT t.turn_uid, t.text FROM episode_turns et JOIN turns t ON t.id = et.turn_id "
        "WHERE et.episode_id = ? AND t.tenant = ?", (episode_id, tenant)).fetchall()
    if not turns:
        return 1.0  # nothing to judge it by: keep it
    text = "\n".join(t[1] for t in turns)
    marks = ",".join("?" * len(turns))
    has_beliefs = conn.execute(
        f"SELECT 1 FROM beliefs WHERE tenant = ? AND turn_uid IN ({marks}) LIMIT 1",
        (tenant, *(t[0] for t in turns))).fetchone() is not None
    return importance(text, has_beliefs=has_beliefs, explicit=is_explicit(text))


def purge_ended_sessions(env: JobEnv, tenant: str) -> int:
    """Delete the trivial, never-recalled episodes of ended sessions; returns how many."""
    below = env.settings.session_purge_below
    if below <= 0:
        return 0
    conn, purged = env.state.conn, 0
    ended: dict[str, bool] = {}
    for rows in id_pages(conn, _CANDIDATES_SQL, (tenant,), PAGE):
        if len(ended) > _SESSION_CACHE:
            ended.clear()
        for _, session_id in rows:
            if session_id not in ended:
                ended[session_id] = session_ended(conn, tenant, session_id, env.now,
                                                  env.settings.session_idle_s)
        doomed = [("episode", row_id) for row_id, session_id in rows
                  if ended[session_id] and start_signals(conn, tenant, row_id) < below]
        if doomed:
            done = delete_memories(conn, env.index, tenant, doomed, reason=REASON, now=env.now)
            purged += done.deleted.get("episodes", 0)
    return purged


def session_purge(env: JobEnv) -> JobReport:
    """End idle sessions, purge their trivial episodes, sweep expired memories."""
    report = JobReport("session_purge")
    for tenant in tenants(env.state.conn):
        report.add("tenants")
        report.add("working_to_recent", end_sessions(env, tenant))
        report.add("episodes_purged", purge_ended_sessions(env, tenant))
        swept = sweep(env.state.conn, env.index, tenant, env.now)
        report.add("beliefs_swept", swept.deleted.get("beliefs", 0))
        report.add("episodes_swept", swept.deleted.get("episodes", 0))
        report.add("entities_dropped", swept.deleted.get("entities", 0))
    return report
