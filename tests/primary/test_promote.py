"""`mnemo mirror promote` on real parts: a SQLite memory, the machine's PostgreSQL as mirror
and primary. Refused while reconcile finds drift; after a sync, the copy holds the same
beliefs and answers recall the same; the file is refused with the SQLite backend from then
on, and a second promote is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_core.chat.memory import Memory
from memory_core.db import migrate_stores, open_state
from memory_core.db.pg_store import PgDatabase
from memory_core.errors import StoreError
from memory_core.model.turns import TurnInput
from memory_core.settings import Settings
from memory_core.write.pipeline import process_turns
from memory_core.write.reextract import note_rules, rules_drift
from scripts.cli import main
from tests.helpers.memory import belief_table, day, make_store
from tests.helpers.primary import reset

TEXTS = ["I live in Berlin and I work at Acme", "My sister Anna lives in Rome",
         "I moved to Paris last week", "I like jazz and I play chess on Sundays",
         "Anna works at Globex now"]
QUERIES = ["where do I live", "what does Anna do", "chess", "Acme"]


def _recall(settings: Settings) -> list[list[str]]:
    with Memory.open(settings) as memory:
        out = []
        for q in QUERIES:
            r = memory.recall(q, tenant="t1", budget=10)
            out.append([*(f.fact_id for f in r.facts), *(i.item_id for i in r.items)])
        memory.flush_recall_log()
    return out


def test_promote_refuses_drift_then_switches_the_memory(tmp_path: Path, primary_urls) -> None:
    url = primary_urls[2]
    db = PgDatabase(url, None)
    db.migrate()
    reset(db)
    db.close()
    data = tmp_path / "data"
    store = make_store(data, ("t1",), dim=32)
    process_turns(store.db, store.index, [
        TurnInput("t1", "s1", f"u{i}", "user", text, day(i)) for i, text in enumerate(TEXTS)])
    before = belief_table(store.conn)
    note_rules(store.conn)  # the extractor rules' record moves with the memory
    since = rules_drift(store.conn).since
    store.db.close()
    assert len(before) >= 4
    env = {"MNEMO_DATA_DIR": str(data), "MNEMO_POSTGRES_URL": url.canonical,
           "MNEMO_HASH_DIM": "32", "MNEMO_LOG_LEVEL": "error"}
    lite = Settings.from_env(env)
    migrate_stores(lite)  # the ops database too (Memory.open only checks)
    recalled = _recall(lite)

    def mnemo(*args: str):
        return CliRunner().invoke(main, list(args), env=env)

    prim = Settings.from_env({**env, "MNEMO_STATE_BACKEND": "postgres"})
    with pytest.raises(StoreError, match="was not promoted"):
        open_state(prim)  # not yet: the file holds the memory

    refused = mnemo("mirror", "promote", "--yes")
    assert refused.exit_code == 1, refused.output
    assert "drifted" in refused.output and "missing" in refused.output
    assert mnemo("mirror", "sync", "--sink", "postgres").exit_code == 0
    dry = mnemo("mirror", "promote", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output[dry.output.index("{"):])["promoted"] is False
    done = mnemo("mirror", "promote", "--yes", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output[done.output.index("{"):])
    assert report["promoted"] is True and report["rows"]["beliefs"] == len(before)

    with pytest.raises(StoreError, match="MNEMO_STATE_BACKEND=postgres"):
        open_state(lite)
    again = mnemo("mirror", "promote", "--yes")
    assert again.exit_code == 1 and "promoted to the Postgres primary" in again.output

    state = open_state(prim, migrate=False, readonly=True)
    try:
        assert belief_table(state.conn) == before
        assert since is not None and rules_drift(state.conn).since == since
        # Vacuumed and analysed after the load (without statistics recall plans as if the
        # tables were empty), and the postings' covering key rebuilt after the bulk load.
        assert state.conn.execute(
            "SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = 'mnemo_primary' AND "
            "relname IN ('episodes', 'episodes_fts_p', 'turns_fts_p') AND last_vacuum IS NOT "
            "NULL AND last_analyze IS NOT NULL").fetchone() == (3,)
        assert "INCLUDE (tf, len)" in state.conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'mnemo_primary' AND "
            "indexname = 'episodes_fts_p_pkey'").fetchone()[0]
    finally:
        state.close()
    assert _recall(prim) == recalled
