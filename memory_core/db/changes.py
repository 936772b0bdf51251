"""The change log of the rows recall holds in a process (``recall.resident``).

Every change to what recall reads of an episode or a belief appends ``(seq, tbl, tenant,
row_id)`` to ``recall_changes`` in the writer's transaction: by triggers (``TRIGGERS``), an
insert or delete, an update of a column recall reads (``READ``), a change to an episode's
turns (``episode_turns``) or to a turn a belief or an episode points at; and by
``vectors.VectorIndex`` every vector it writes or deletes. A process
holding a tenant's postings and vectors reads the tenant's entries past the seq it holds
(one indexed statement: other tenants' writes cost it nothing) and re-reads those rows.
``macro_sleep`` keeps the newest entries (``prune``); a process whose seq is older than what
was pruned rebuilds the tenant (``PRUNED_KEY``). SQLite only: the Postgres primary keeps no
log, and recall there reads the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memory_core.db.meta import get_meta, set_meta

TABLE = "recall_changes"
LOGGED: tuple[str, ...] = ("episodes", "beliefs")
DDL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "tbl TEXT NOT NULL, tenant TEXT NOT NULL, row_id INTEGER NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_tenant_seq ON {TABLE} (tenant, seq)",
)
PRUNED_KEY = f"{TABLE}_pruned_to"  # meta: the highest seq ``prune`` removed


# The columns of each logged table that recall reads (``recall.candidates``): an update of
# another one (access counts, decay bookkeeping) is not logged.
# (A row's tenant and id never change.)
READ: dict[str, tuple[str, ...]] = {
    "episodes": ("episode_uid", "text", "occurred_at", "session_id", "tier", "importance",
                 "expires_at"),
    "beliefs": ("belief_uid", "text", "valid_from", "valid_to", "confidence", "status",
                "turn_uid", "subject_id", "object_entity_id", "predicate", "object_text",
                "negated", "source", "expires_at"),
}


def _log(tbl: str, tenant: str, row_id: str) -> str:
    return f"INSERT INTO {TABLE} (tbl, tenant, row_id) VALUES ('{tbl}', {tenant}, {row_id});"


def _episodes_of(turn_id: str) -> str:
    return (f"INSERT INTO {TABLE} (tbl, tenant, row_id) SELECT 'episodes', e.tenant, e.id "
            f"FROM episode_turns et JOIN episodes e ON e.id = et.episode_id "
            f"WHERE et.turn_id = {turn_id};")


def _beliefs_of(turn: str) -> str:
    return (f"INSERT INTO {TABLE} (tbl, tenant, row_id) SELECT 'beliefs', tenant, id "
            f"FROM beliefs WHERE tenant = {turn}.tenant AND turn_uid = {turn}.turn_uid;")


def _episode(episode_id: str) -> str:
    return (f"INSERT INTO {TABLE} (tbl, tenant, row_id) SELECT 'episodes', tenant, id "
            f"FROM episodes WHERE id = {episode_id};")


TRIGGERS: tuple[str, ...] = (
    *(statement for base in LOGGED for statement in (
        f"CREATE TRIGGER IF NOT EXISTS {base}_changes_ai AFTER INSERT ON {base} BEGIN "
        f"{_log(base, 'new.tenant', 'new.id')} END",
        f"CREATE TRIGGER IF NOT EXISTS {base}_changes_au AFTER UPDATE OF "
        f"{', '.join(READ[base])} ON {base} BEGIN {_log(base, 'new.tenant', 'new.id')} END",
        f"CREATE TRIGGER IF NOT EXISTS {base}_changes_ad AFTER DELETE ON {base} BEGIN "
        f"{_log(base, 'old.tenant', 'old.id')} END",
    )),
    # An episode's turn pointers and first speaker.
    "CREATE TRIGGER IF NOT EXISTS episode_turns_changes_ai AFTER INSERT ON episode_turns "
    f"BEGIN {_episode('new.episode_id')} END",
    "CREATE TRIGGER IF NOT EXISTS episode_turns_changes_au AFTER UPDATE ON episode_turns "
    f"BEGIN {_episode('old.episode_id')} {_episode('new.episode_id')} END",
    "CREATE TRIGGER IF NOT EXISTS episode_turns_changes_ad AFTER DELETE ON episode_turns "
    f"BEGIN {_episode('old.episode_id')} END",
    # A turn's speaker and session: read with the beliefs drawn from it and the episodes
    # holding it.
    f"CREATE TRIGGER IF NOT EXISTS turns_changes_ai AFTER INSERT ON turns BEGIN "
    f"{_beliefs_of('new')} END",
    "CREATE TRIGGER IF NOT EXISTS turns_changes_au AFTER UPDATE OF tenant, turn_uid, speaker, "
    f"session_id, idx ON turns BEGIN {_beliefs_of('old')} {_beliefs_of('new')} "
    f"{_episodes_of('new.id')} END",
    f"CREATE TRIGGER IF NOT EXISTS turns_changes_ad AFTER DELETE ON turns BEGIN "
    f"{_beliefs_of('old')} {_episodes_of('old.id')} END",
)


def install(conn: Any) -> None:
    """Create the log and its triggers (state migration 4; idempotent). A later migration
    that rebuilds ``episodes``, ``beliefs``, ``episode_turns`` or ``turns`` (rename, copy,
    drop) must call it again: the triggers go with the old table."""
    for statement in (*DDL, *TRIGGERS):
        conn.execute(statement)


def log_rows(conn: Any, base: str, rows: Iterable[tuple[int, str]]) -> None:
    """Append ``(row id, tenant)`` of ``base`` to the log (inside the caller's transaction;
    SQLite only)."""
    conn.executemany(f"INSERT INTO {TABLE} (tbl, tenant, row_id) VALUES (?, ?, ?)",
                     [(base, tenant, int(row_id)) for row_id, tenant in rows])


def prune(conn: Any, keep: int) -> int:
    """Delete all but the newest ``keep`` entries (inside the caller's transaction); record
    the highest seq removed, so a process holding rows older than that rebuilds them instead
    of missing a change. Returns the entries removed."""
    top = conn.execute(f"SELECT max(seq) FROM {TABLE}").fetchone()[0]
    if top is None or top <= keep:
        return 0
    cut = int(top) - keep
    removed = int(conn.execute(f"DELETE FROM {TABLE} WHERE seq <= ?", (cut,)).rowcount or 0)
    if removed:
        pruned = int(get_meta(conn, PRUNED_KEY) or 0)
        set_meta(conn, PRUNED_KEY, str(max(pruned, cut)))
    return removed
