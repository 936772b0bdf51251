"""The Postgres primary as a store: its settings, its refusals, its schema."""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest

from memory_core.db.entity_kinds import backfill_sql
from memory_core.db.pg_store import LATEST, MIGRATIONS, PgDatabase
from memory_core.errors import ConfigurationError, SchemaTooNewError
from memory_core.model.turns import TurnInput
from memory_core.settings import Settings
from memory_core.write.pipeline import process_turns
from tests.helpers.memory import day
from tests.helpers.primary import make_pg_store, rows


def test_the_backend_needs_its_url() -> None:
    with pytest.raises(ConfigurationError, match="MNEMO_STATE_BACKEND=postgres needs "
                                                 "MNEMO_POSTGRES_URL"):
        Settings.from_env({"MNEMO_STATE_BACKEND": "postgres"})
    with pytest.raises(ConfigurationError, match="MNEMO_STATE_BACKEND"):
        Settings.from_env({"MNEMO_STATE_BACKEND": "mysql"})


@pytest.fixture
def store(primary_urls):
    db = PgDatabase(primary_urls[0], None)
    db.migrate()
    s = make_pg_store(db.url, ("t1",), db=db)
    yield s
    db.close()


def test_a_newer_schema_is_refused(store) -> None:
    store.conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES "
                       "(?, 'from the future', 'x')", (LATEST + 1,))
    try:
        with pytest.raises(SchemaTooNewError, match="upgrade mnemo"):
            store.db.migrate()
        with pytest.raises(SchemaTooNewError, match="upgrade mnemo"):
            store.db.require_current()
    finally:
        store.conn.execute("DELETE FROM schema_migrations WHERE version = ?", (LATEST + 1,))


def test_rows_full_text_and_vectors_stay_in_step(store) -> None:
    """Every turn, episode and belief has its postings and length at commit, and a vector."""
    process_turns(store.db, store.index, [TurnInput("t1", "s1", f"u{i}", "user", text, day(i))
                                          for i, text in enumerate(
                                              ["I live in Berlin", "I moved to Paris"])])
    for base in ("turns", "episodes", "beliefs"):
        n = rows(store.db, f"SELECT count(*) FROM {base}")[0][0]
        assert rows(store.db, f"SELECT count(*) FROM {base}_fts_len") == [(n,)]
        assert rows(store.db, "SELECT rows FROM fts_stats WHERE tbl = ? AND tenant = 't1'",
                    (base,)) == [(n,)]
    assert rows(store.db, "SELECT count(*) FROM fts_pending") == [(0,)]
    counts = store.index.counts(store.conn)
    assert counts["episodes"] == rows(store.db, "SELECT count(*) FROM episodes")[0][0]
    assert counts["beliefs"] == rows(store.db, "SELECT count(*) FROM beliefs")[0][0]


def test_writers_on_two_connections_take_turns(store) -> None:
    """BEGIN IMMEDIATE holds the store's write lock until COMMIT: a second writer (another
    host's) waits, as on one SQLite file, so the belief rules see one order."""
    import threading
    import time

    from memory_core.db.sqlite import atomic

    other = store.db.connect()  # another connection, as another process's
    entered = threading.Event()
    try:
        with atomic(store.conn):
            store.conn.execute("INSERT INTO applied_jobs (key, applied_at) VALUES ('a', 'x')")

            def second() -> None:
                with atomic(other):
                    entered.set()

            t = threading.Thread(target=second)
            t.start()
            time.sleep(0.5)
            assert not entered.is_set()  # still waiting for the first writer
        t.join(10)
        assert entered.is_set()
    finally:
        other.close()


def test_recall_degrades_when_the_vector_table_is_broken(store) -> None:
    """A broken vector table on the primary gives keyword-only recall with the reason, as on
    SQLite: never an error."""
    from memory_core.embedders import HashEmbedder
    from memory_core.recall import engine
    from memory_core.recall.fusion import Budget
    from memory_core.recall.strategy import get_strategy
    from memory_core.vectors import VectorIndex

    process_turns(store.db, store.index, [TurnInput("t1", "s1", "u1", "user",
                                                    "I live in Berlin", day(1))])
    store.conn.execute("DROP TABLE episodes_vec_g1")
    index = VectorIndex(HashEmbedder(dim=32))
    strategy = replace(get_strategy(None), dense_with_keyword_embedder=True)  # dense: hash
    result, _ = engine.recall(store.conn, index, query="where do I live in Berlin",
                              tenant="t1", strategy=strategy, max_query_chars=4096,
                              budget=Budget(10, 4000))
    assert result.keyword_only
    assert "vector index unreadable (UndefinedTable)" in (result.degraded_reason or "")
    assert result.items  # keyword recall still answers
    assert any("episode" in i.item_id for i in result.items)


def test_a_read_only_connection_reads_in_a_snapshot_transaction(store) -> None:
    """The chat side's connection (read only) commits a read transaction (the digest's one
    snapshot) without touching the full-text queue, which it may not write."""
    from memory_core.maintenance.digest import compute_digest

    process_turns(store.db, store.index, [TurnInput("t1", "s1", "u1", "user",
                                                    "I live in Berlin", day(1))])
    reader = PgDatabase(store.db.url, None, readonly=True)
    try:
        digest = compute_digest(reader.conn, "t1", day(1).date())
        assert digest["tenant"] == "t1"
    finally:
        reader.close()


def test_a_connection_the_server_ended_is_replaced_at_the_next_use(store) -> None:
    first = store.db.conn
    pid = first.execute("SELECT pg_backend_pid()").fetchone()[0]
    other = store.db.connect()
    try:
        other.execute("SELECT pg_terminate_backend(?)", (pid,))
    finally:
        other.close()
    with pytest.raises(psycopg.OperationalError):
        first.execute("SELECT 1")  # the thread learns it is gone
    assert first.closed
    assert store.db.conn.execute("SELECT 1").fetchone() == (1,)  # a new one, not a dead end


def test_the_maintenance_indexes_are_partial_as_in_sqlite(store) -> None:
    """A partial index of the SQLite schema is partial on the primary too (migration 1 built
    them whole: every belief in an index the maintenance jobs scan for a few)."""
    rows = dict(store.conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'mnemo_primary' AND "
        "indexname IN ('ix_beliefs_open_commitments', 'ix_beliefs_pending', "
        "'ix_beliefs_expires', 'ix_episodes_expires')").fetchall())
    assert len(rows) == 4
    assert "WHERE (status = 'pending_review'" in rows["ix_beliefs_pending"]
    assert "WHERE (expires_at IS NOT NULL)" in rows["ix_episodes_expires"]
    assert all(" WHERE " in definition for definition in rows.values())


def test_entity_kinds_are_written_and_backfilled_as_in_sqlite(store) -> None:
    """The primary's writer gives entities their kinds, and its migration 6 runs the same
    backfill as SQLite's migration 5 (tests/test_entity_kinds.py)."""
    process_turns(store.db, store.index, [TurnInput("t1", "s1", f"u{i}", "user", text, day(i))
                                          for i, text in enumerate(
                                              ["My sister Elin lives in Stockholm.",
                                               "I work at Summit Parks."])])
    expected = {"Elin": "person", "Stockholm": "place", "Summit Parks": "organization"}

    def kinds() -> dict[str, str]:
        found = dict(rows(store.db, "SELECT name, kind FROM entities WHERE tenant = 't1'"))
        return {name: found.get(name, "") for name in expected}

    assert kinds() == expected
    store.conn.execute("UPDATE entities SET kind = 'thing' WHERE entity_id != 'user'")
    for statement in backfill_sql("2026-01-01T00:00:00.000000Z"):
        store.conn.execute(statement)
    assert kinds() == expected
    assert rows(store.db, "SELECT name FROM schema_migrations WHERE version = 6") == [
        (dict(MIGRATIONS)[6],)]
