"""Upgrading a version-1 store to the maintenance schema keeps every row, and its search."""

from __future__ import annotations

from pathlib import Path

from memory_core.db import open_ops, open_state
from memory_core.db.migrations import _fts_ddl, latest_version
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
        conn.execute("ALTER TABLE beliefs RENAME TO beliefs_now")
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND "
                                    "tbl_name = 'beliefs_now' AND sql IS NOT NULL").fetchall():
            conn.execute(f"DROP INDEX {name}")
        conn.execute(V1_BELIEFS)
        conn.execute(f"INSERT INTO beliefs ({V1_COLUMNS}) SELECT {V1_COLUMNS} FROM beliefs_now")
        conn.execute("DROP TABLE beliefs_now")
        for ddl in V1_INDEXES:
            conn.execute(ddl)
        for ddl in _fts_ddl("beliefs_fts", "beliefs")[1:]:  # the triggers
            conn.execute(ddl)
        conn.execute("DROP INDEX ix_episodes_expires")
        conn.execute("ALTER TABLE episodes DROP COLUMN decayed_at")
        conn.execute("DELETE FROM schema_migrations WHERE version > 1")
    conn.execute("PRAGMA user_version = 1")


def _to_v1_ops(conn) -> None:
    with atomic(conn):
        conn.execute("DROP INDEX ix_recall_log_pending")
        conn.execute("ALTER TABLE recall_log DROP COLUMN applied_at")
        conn.execute("DELETE FROM schema_migrations WHERE version > 1")
    conn.execute("PRAGMA user_version = 1")


def test_a_version_1_store_upgrades_with_its_rows_and_search(tmp_path: Path) -> None:
    world = make_world(tmp_path / "data", tenants=("t1",))
    world.turn("t1", "u1", "My sister Ana lives in Porto and loves jazz.")
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
        assert conn.execute("SELECT count(*) FROM beliefs_fts WHERE beliefs_fts MATCH "
                            "'lisbon'").fetchone()[0] == 1
        # The triggers are back on the new table, and it takes the new status and columns.
        with atomic(conn):
            conn.execute("UPDATE beliefs SET status = ?, access_count = 2 WHERE predicate = "
                         "'plans_to'", (EXPIRED,))
            conn.execute("UPDATE beliefs SET text = 'user plans to fly to Oslo' WHERE "
                         "predicate = 'plans_to'")
        assert conn.execute("SELECT count(*) FROM beliefs_fts WHERE beliefs_fts MATCH "
                            "'oslo'").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM beliefs_fts WHERE beliefs_fts MATCH "
                            "'lisbon'").fetchone()[0] == 0
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                              "'index'")}
        assert {"ix_beliefs_expires", "ix_beliefs_open_commitments", "ix_beliefs_pending",
                "ix_beliefs_subject", "ix_episodes_expires"} <= indexes
        assert conn.execute("SELECT decayed_at FROM episodes").fetchall() == [(None,)]
        assert ops.conn.execute("SELECT applied_at FROM recall_log").fetchall() == [(None,)]
    finally:
        state.close()
        ops.close()
