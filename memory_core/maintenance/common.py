"""What the memory-care bodies share: the tenants and other rows in pages, a write
transaction stamped with the job's clock, and the chat sessions that have ended."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from memory_core.clock import to_db
from memory_core.db.sqlite import Connection, atomic
from memory_core.maintenance.base import JobEnv
from memory_core.model.write_tx import Embeds, WriteTx

TENANT_PAGE = 100


def tenants(conn: Connection, page: int = TENANT_PAGE) -> Iterator[str]:
    """Every tenant, in name order, a page at a time (never the whole table at once)."""
    after = ""
    while rows := conn.execute("SELECT tenant FROM tenants WHERE tenant > ? ORDER BY tenant "
                               "LIMIT ?", (after, page)).fetchall():
        for (tenant,) in rows:
            yield tenant
        after = rows[-1][0]


def id_pages(conn: Connection, sql: str, params: Sequence[Any], page: int
             ) -> Iterator[list[Any]]:
    """The rows of ``sql`` a page at a time, by row id: ``sql`` selects the id first and
    ends ``id > ? ORDER BY id LIMIT ?``, and ``params`` fill the placeholders before those.
    Each page is read when the previous one is done with, so the caller may write in between.
    """
    after = 0
    while rows := conn.execute(sql, (*params, after, page)).fetchall():
        yield rows
        after = rows[-1][0]


@contextlib.contextmanager
def job_tx(env: JobEnv, tenant: str, embeds: Embeds | None = None) -> Iterator[WriteTx]:
    """``write_tx`` with the job's clock as the system time: what a job changes is stamped
    with its firing's time, so a rerun of the window writes the same values."""
    conn = env.state.conn
    with atomic(conn, tenants=(tenant,)):
        env.index.ensure(conn)
        tx = WriteTx(conn, env.index, tenant, to_db(env.now), embeds or Embeds(env.index))
        yield tx
        tx.flush()


def session_ended(conn: Connection, tenant: str, session_id: str, now: datetime,
                  idle_s: int) -> bool:
    """A chat session has ended when no turn of it arrived for ``idle_s`` seconds (by the
    time the turn was recorded: an imported old conversation ends ``idle_s`` after the
    import, not at once). A session whose turns are all deleted has ended too."""
    last = conn.execute("SELECT max(recorded_at) FROM turns WHERE tenant = ? AND "
                        "session_id = ?", (tenant, session_id)).fetchone()[0]
    return last is None or last <= to_db(now - timedelta(seconds=idle_s))


def end_sessions(env: JobEnv, tenant: str) -> int:
    """Move the working episodes of every ended session to ``recent``; returns how many.

    Both macro_sleep and session_purge call it: the move is a function of the clock and
    the turns, so either may come first.
    """
    conn = env.state.conn
    sessions = [r[0] for r in conn.execute(
        "SELECT DISTINCT session_id FROM episodes INDEXED BY ix_episodes_tier WHERE tenant = ? "
        "AND tier = 'working'",
        (tenant,)).fetchall()]
    ended = [s for s in sessions
             if session_ended(conn, tenant, s, env.now, env.settings.session_idle_s)]
    moved = 0
    for session_id in ended:
        with job_tx(env, tenant) as tx:
            uids = [r[0] for r in conn.execute(
                "SELECT episode_uid FROM episodes WHERE tenant = ? AND session_id = ? AND "
                "tier = 'working'", (tenant, session_id)).fetchall()]
            conn.execute("UPDATE episodes SET tier = 'recent', updated_at = ? WHERE tenant = ? "
                         "AND session_id = ? AND tier = 'working'", (tx.now, tenant, session_id))
            for uid in uids:
                tx.change("episode", uid)
            moved += len(uids)
    return moved
