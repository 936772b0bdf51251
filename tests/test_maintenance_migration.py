"""Upgrading a version-1 store to the maintenance schema keeps every row, and its search."""

from __future__ import annotations

from pathlib import Path

from memory_core.db import changes, fts, open_ops, open_state
from memory_core.db.migrations import _create_fts, _fts_ddl, latest_version
from memory_core.db.schema_state import FTS_TABLES
from memory_core.db.sqlite import atomic
from memory_core.model.belief_rules import EXPIRED
from memory_core.recall.explain import write_recall_log
from tests.helpers.maintenance import make_world
from tests.helpers.memory import belief_table

# The beliefs table as schema version 1 made it (before the 'expired' status).
V1_BELIEFS = """CREATE TABLE beliefs (
    id INTEGER NOT NULL, tenant TEXT NOT NULL, belief_uid TEXT NOT NULL,
    subject_id TEXT NOT NULL, predicate TEXT NOT NULL, object_text TEXT NOT NULL,
    object_norm TEXT DEFAULT '' NOT NULL, object_entity_id TEXT,
    negated INTEGER DEFAULT '0' NOT NULL, text TEXT NOT NULL, valid_from TEXT NOT NULL,
    valid_to TEXT, stated_valid_to TEXT, recorded_at TEXT NOT NULL, retired_at TEXT,
    status TEXT NOT NULL, source TEXT NOT NULL, confidence FLOAT NOT NULL, turn_uid TEXT,
    expires_at TEXT, PRIMARY KEY (id), UNIQUE (tenant, belief_uid),
    CONSTRAINT ck_status CHECK (status IN ('active', 'superseded', 'invalidated', 'conflict',
        'pending_review')),
    CONSTRAINT ck_source CHECK (source IN ('user_explicit', 'operator', 'imported',
        'heuristic', 'llm_inferred', 'system_tool')),
    CONSTRAINT ck_confidence CHECK (confidence >= 0 AND confidence <= 1),
    FOREIGN KEY(tenant) REFERENCES tenants (tenant))"""
V1_INDEXES = (
    "CREATE INDEX ix_beliefs_subject ON beliefs (tenant, subject_id, predicate, status)",
    "CREATE INDEX ix_beliefs_turn ON beliefs (tenant, turn_uid)",
    "CREATE INDEX ix_beliefs_object ON beliefs (tenant, object_entity_id)",
)
V1_COLUMNS = ("id, tenant, belief_uid, subject_id, predicate, object_text, object_norm, "
              "object_entity_id, negated, text, valid_from, valid_to, stated_valid_to, "
              "recorded_at, retired_at, status, source, confidence, turn_uid, expires_at")


def _to_v1_state(conn) -> None:
    with atomic(conn):
        _drop_changes_log(conn)
        conn.execute("ALTER TABLE beliefs RENAME TO beliefs_now")
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND "
                                    "tbl_name = 'beliefs_now' AND sql IS NOT NULL").fetchall():
            conn.execute(f"DROP INDEX {name}")
        conn.execute(V1_BELIEFS)
        conn.execute(f"INSERT INTO beliefs ({V1_COLUMNS}) SELECT {V1_COLUMNS} FROM beliefs_now")
        conn.execute("DROP TABLE beliefs_now")
        for ddl in V1_INDEXES:
            conn.execute(ddl)
        _to_v1_fts(conn)
        conn.execute("DROP INDEX ix_episodes_expires")
        conn.execute("ALTER TABLE episodes DROP COLUMN decayed_at")
        conn.execute("DELETE FROM schema_migrations WHERE version > 1")
    conn.execute("PRAGMA user_version = 1")


def _drop_changes_log(conn) -> None:
    """Migration 4's log and its triggers (a version-1 store had neither)."""
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND "
                                "name LIKE '%\\_changes\\_%' ESCAPE '\\'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(f"DROP TABLE {changes.TABLE}")


def _to_v1_fts(conn) -> None:
    """The full-text indexes as migration 1 made them: one vocabulary and one set of
    statistics for every tenant, external content, porter stemming in FTS5."""
    for name in FTS_TABLES:
        for suffix in ("ai", "ad", "au"):
            conn.execute(f"DROP TRIGGER IF EXISTS {name}_{suffix}")
        for table in (f"{name}_v", f"{name}_i", name):
            conn.execute(f"DROP TABLE {table}")
    conn.execute("DROP TABLE fts_stats")
    conn.execute("DELETE FROM meta WHERE key = ?", (fts.META_KEY,))
    _create_fts(conn)
    for name in FTS_TABLES:
        conn.execute(f"INSERT INTO {name}({name}) VALUES ('rebuild')")
    assert _fts_ddl  # migration 2 makes the beliefs triggers again from it


def _to_v1_ops(conn) -> None:
    with atomic(conn):
        conn.execute("DROP INDEX ix_recall_log_pending")
        conn.execute("ALTER TABLE recall_log DROP COLUMN applied_at")
        conn.execute("DELETE FROM schema_migrations WHERE version > 1")
    conn.execute("PRAGMA user_version = 1")


def _matches(conn, table: str, tenant: str, word: str) -> int:
    return conn.execute(f"SELECT count(*) FROM {table}_fts WHERE {table}_fts MATCH ?",
                        (fts.match(tenant, word),)).fetchone()[0]


def test_a_version_1_store_upgrades_with_its_rows_and_search(tmp_path: Path) -> None:
    world = make_world(tmp_path / "data", tenants=("t1", "t2"))
    world.turn("t1", "u1", "My sister Ana lives in Porto and loves jazz.")
    world.turn("t2", "u1", "Porto again: the jazz club in Porto closed.")
    world.belief("t1", "I", "plans_to", "fly to Lisbon", world.start)
    write_recall_log(world.ops.conn, "t1", "d", "default", '{"recalled":[]}', keep=10)
    before = belief_table(world.conn)
    vectors = world.index.counts(world.conn)
    _to_v1_state(world.conn)
    _to_v1_ops(world.ops.conn)
    assert "'expired'" not in world.conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'beliefs'").fetchone()[0]
    world.close()

    state, ops = open_state(world.settings), open_ops(world.settings)  # migrates
    try:
        conn = state.conn
        assert state.version() == latest_version("state")
        assert ops.version() == latest_version("ops")
        assert belief_table(conn) == before
        assert world.index.counts(conn) == vectors
        assert _matches(conn, "beliefs", "t1", "lisbon") == 1
        # Each tenant's rows under its own tokens, with its own statistics.
        assert _matches(conn, "turns", "t1", "porto") == 1
        assert _matches(conn, "turns", "t2", "porto") == 1
        assert _matches(conn, "turns", "t2", "ana") == 0
        assert conn.execute("SELECT tenant, rows, tokens FROM fts_stats WHERE tbl = 'turns' "
                            "ORDER BY tenant").fetchall() == [("t1", 1, 9), ("t2", 1, 8)]
        assert fts.recorded_version(conn) == fts.TOKENS_VERSION
        # The triggers are back on the new table, and it takes the new status and columns.
        with atomic(conn):
            conn.execute("UPDATE beliefs SET status = ?, access_count = 2 WHERE predicate = "
                         "'plans_to'", (EXPIRED,))
            conn.execute("UPDATE beliefs SET text = 'user plans to fly to Oslo' WHERE "
                         "predicate = 'plans_to'")
        assert _matches(conn, "beliefs", "t1", "oslo") == 1
        assert _matches(conn, "beliefs", "t1", "lisbon") == 0
        # Migration 4's log records both updates for the chat processes holding rows.
        plans = conn.execute("SELECT id FROM beliefs WHERE predicate = 'plans_to'").fetchone()
        assert conn.execute("SELECT tbl, tenant, row_id FROM recall_changes").fetchall() == [
            ("beliefs", "t1", plans[0])] * 2
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                              "'index'")}
        assert {"ix_beliefs_expires", "ix_beliefs_open_commitments", "ix_beliefs_pending",
                "ix_beliefs_subject", "ix_episodes_expires"} <= indexes
        assert conn.execute("SELECT decayed_at FROM episodes").fetchall() == [(None,)] * 2
        assert ops.conn.execute("SELECT applied_at FROM recall_log").fetchall() == [(None,)]
    finally:
        state.close()
        ops.close()
