"""Reinforcement: what the recall log shows was used gets stronger.

The chat process never writes the state db: each recall leaves a row in the ops db's recall
log whose ``recalled`` list names the items it returned (``episode:<uid>``,
``belief:<uid>``, ``turn:<turn_uid>``). ``macro_sleep`` reads the rows not applied yet and,
for each one, raises the importance of the episodes it used (a recalled turn counts for
its episodes) by ``MNEMO_REINFORCE_BOOST`` of the way to 1 and counts an access on them and
on the beliefs (``access_count``, ``last_access_at``).

Exactly once, across two files: the effect and a key ``reinforce:<tenant>:<log id>`` are
committed together in the state db; then the log rows are marked applied in the ops db;
then the keys are dropped. A crash after the first commit leaves keys that make the rerun
skip the effect and only mark the rows; a crash after the second leaves keys whose rows
are applied, which the next run drops first. The log is bounded per tenant
(``MNEMO_RECALL_LOG_KEEP``): a row trimmed before a sleep ran is simply not reinforced.
"""

from __future__ import annotations

import json

from memory_core.clock import to_db
from memory_core.db.sqlite import Connection, atomic
from memory_core.maintenance.base import JobEnv
from memory_core.model.episodes import touch

PAGE = 100


def _key(tenant: str, log_id: int) -> str:
    return f"reinforce:{tenant}:{log_id}"


def _settle_leftovers(env: JobEnv, tenant: str) -> None:
    """Drop the keys of rows that a crashed run already marked applied (or that are gone)."""
    state, ops = env.state.conn, env.ops.conn
    prefix = f"reinforce:{tenant}:"
    keys = [r[0] for r in state.execute("SELECT key FROM applied_jobs WHERE key >= ? AND "
                                        "key < ?", (prefix, prefix[:-1] + ";")).fetchall()]
    done = []
    for key in keys:
        row = ops.execute("SELECT applied_at FROM recall_log WHERE id = ?",
                          (int(key[len(prefix):]),)).fetchone()
        if row is None or row[0] is not None:
            done.append((key,))
    if done:
        with atomic(state, tenants=(tenant,)):
            state.executemany("DELETE FROM applied_jobs WHERE key = ?", done)


def _episode_ids(conn: Connection, tenant: str, recalled: list[str]) -> set[int]:
    ids: set[int] = set()
    for item in recalled:
        kind, _, uid = item.partition(":")
        if kind == "episode":
            rows = conn.execute("SELECT id FROM episodes WHERE tenant = ? AND episode_uid = ?",
                                (tenant, uid)).fetchall()
        elif kind == "turn":
            rows = conn.execute(
                "SELECT et.episode_id FROM turns t JOIN episode_turns et ON et.turn_id = t.id "
                "WHERE t.tenant = ? AND t.turn_uid = ?", (tenant, uid)).fetchall()
        else:
            continue
        ids.update(r[0] for r in rows)
    return ids


def _apply_one(env: JobEnv, tenant: str, at: str, body: str) -> tuple[int, int]:
    """Reinforce what one logged recall used; returns (episodes, beliefs) touched."""
    conn = env.state.conn
    try:
        logged = json.loads(body)
    except ValueError:  # a damaged row reinforces nothing; it must not stall the rest
        logged = {}
    recalled = [i for i in logged.get("recalled", []) if isinstance(i, str)] \
        if isinstance(logged, dict) else []
    episode_ids = sorted(_episode_ids(conn, tenant, recalled))
    touch(conn, tenant, episode_ids, at, env.settings.reinforce_boost)
    belief_uids = sorted({i.partition(":")[2] for i in recalled if i.startswith("belief:")})
    cur = conn.executemany(
        "UPDATE beliefs SET access_count = access_count + 1, last_access_at = max(coalesce("
        "last_access_at, ''), ?) WHERE tenant = ? AND belief_uid = ?",
        [(at, tenant, uid) for uid in belief_uids])
    return len(episode_ids), max(cur.rowcount, 0)


def reinforce(env: JobEnv, tenant: str, page: int = PAGE) -> dict[str, int]:
    """Apply every recall-log row of ``tenant`` not applied yet; returns counts."""
    state, ops, now = env.state.conn, env.ops.conn, to_db(env.now)
    _settle_leftovers(env, tenant)
    out = {"recalls_applied": 0, "episodes_reinforced": 0, "beliefs_reinforced": 0}
    while rows := ops.execute(
            "SELECT id, at, explanation FROM recall_log WHERE tenant = ? AND applied_at IS "
            "NULL ORDER BY id LIMIT ?", (tenant, page)).fetchall():
        keys = [(_key(tenant, log_id),) for log_id, _, _ in rows]
        with atomic(state, tenants=(tenant,)):
            for (_, at, body), (key,) in zip(rows, keys, strict=True):
                claimed = state.execute("INSERT OR IGNORE INTO applied_jobs (key, applied_at) "
                                        "VALUES (?, ?)", (key, now)).rowcount
                if claimed:  # else a crashed run did the effect already
                    episodes, beliefs = _apply_one(env, tenant, at, body)
                    out["episodes_reinforced"] += episodes
                    out["beliefs_reinforced"] += beliefs
        with atomic(ops):
            ops.executemany("UPDATE recall_log SET applied_at = ? WHERE id = ?",
                            [(now, r[0]) for r in rows])
        with atomic(state, tenants=(tenant,)):
            state.executemany("DELETE FROM applied_jobs WHERE key = ?", keys)
        out["recalls_applied"] += len(rows)
    return out
