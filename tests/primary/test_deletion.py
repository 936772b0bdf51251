"""Verified deletion on the Postgres primary: what a tenant's deleted turns leave behind in
every table of the primary's schema (base rows, postings, row lengths, vectors) is nothing
but the digest-only tombstones, and another tenant's memory is untouched."""

from __future__ import annotations

import pytest

from memory_core.db.fts import tenant_prefix
from memory_core.db.pg_state import SCHEMA
from memory_core.db.pg_store import PgDatabase
from memory_core.model.deletion import delete_memories, delete_memory
from memory_core.model.turns import TurnInput
from memory_core.write.pipeline import process_turns
from tests.helpers import forget_name
from tests.helpers.memory import day
from tests.helpers.primary import make_pg_store, rows

SAID = ["I live in Zanzibar", "I work at Quokkasoft", "My sister Brunhilde lives in Zanzibar"]
# Rows of the deleted tenant that may stay: the tenant itself, its hub entity and the hub's
# own alias, digest-only tombstones, the outbox's ids for the mirrors' tombstones, the
# full-text counters (at 0).
MAY_STAY = {"tenants", "entities", "entity_aliases", "tombstones", "outbox", "fts_stats"}


@pytest.fixture
def store(primary_urls):
    db = PgDatabase(primary_urls[0], None)
    db.migrate()
    s = make_pg_store(db.url, ("t1", "t2"), db=db)
    for tenant in ("t1", "t2"):
        process_turns(s.db, s.index, [TurnInput(tenant, "s1", f"{tenant}-u{i}", "user", text,
                                                day(i + 1)) for i, text in enumerate(SAID)])
    yield s
    db.close()


def _tenant_rows(store, tenant: str) -> dict[str, int]:
    """Rows of ``tenant`` in every table of the schema with a tenant column (vectors too)."""
    tables = rows(store.db, "SELECT table_name FROM information_schema.columns WHERE "
                  "table_schema = ? AND column_name = 'tenant' AND table_name IN (SELECT "
                  "tablename FROM pg_tables WHERE schemaname = ?)", (SCHEMA, SCHEMA))
    out = {t: rows(store.db, f"SELECT count(*) FROM {t} WHERE tenant = ?", (tenant,))[0][0]
           for (t,) in tables}
    return {t: n for t, n in out.items() if n}


def _text_hits(store, word: str) -> list[str]:
    """Every text column of every table in the schema that still holds ``word``."""
    columns = rows(store.db, "SELECT c.table_name, c.column_name FROM "
                   "information_schema.columns c JOIN pg_tables p ON p.schemaname = "
                   "c.table_schema AND p.tablename = c.table_name WHERE c.table_schema = ? "
                   "AND c.data_type = 'text'", (SCHEMA,))
    return [f"{t}.{c}" for t, c in columns
            if rows(store.db, f"SELECT count(*) FROM {t} WHERE lower({c}) LIKE ?",
                    (f"%{word}%",))[0][0]]


def test_deleting_every_turn_of_a_tenant_leaves_no_row_of_it(store) -> None:
    before_t2 = _tenant_rows(store, "t2")
    assert {"turns", "episodes", "beliefs", "turns_fts_len"} <= set(before_t2)
    assert any(t.endswith("_vec_g1") for t in _tenant_rows(store, "t1"))
    refs = [("turn", f"t1-u{i}") for i in range(len(SAID))]
    done = delete_memories(store.conn, store.index, "t1", refs, reason="user_request")
    assert done.deleted["turns"] == 3 and done.deleted["beliefs"] >= 2
    assert not done.checkpointed  # no secure_delete or checkpoint on PostgreSQL

    left = _tenant_rows(store, "t1")
    assert set(left) <= MAY_STAY, left
    assert rows(store.db, "SELECT entity_id FROM entities WHERE tenant = 't1'") == [("user",)]
    assert rows(store.db, "SELECT alias_norm FROM entity_aliases WHERE tenant = 't1'") == \
        [("user",)]
    assert rows(store.db, "SELECT rows, tokens FROM fts_stats WHERE tenant = 't1'") == \
        [(0, 0)] * 3
    for base in ("turns", "episodes", "beliefs"):  # postings hold tenant-prefixed tokens
        assert rows(store.db, f"SELECT count(*) FROM {base}_fts_p WHERE starts_with(token, ?)",
                    (tenant_prefix("t1"),)) == [(0,)]
    # t2 said the same words: only t2's rows (or t2's postings) may still hold them
    for word in ("zanzibar", "quokkasoft", "brunhilde"):
        for hit in _text_hits(store, word):
            table, column = hit.split(".")
            not_t2 = (f"NOT starts_with(token, '{tenant_prefix('t2')}')"
                      if table.endswith("_fts_p") else "tenant <> 't2'")
            assert rows(store.db, f"SELECT count(*) FROM {table} WHERE lower({column}) LIKE ? "
                        f"AND {not_t2}", (f"%{word}%",)) == [(0,)], hit
    assert _tenant_rows(store, "t2") == before_t2
    assert rows(store.db, "SELECT count(*) FROM tombstones WHERE tenant = 't1'")[0][0] >= 3
    # a rerun finds nothing left to delete, and deletes nothing else
    again = delete_memories(store.conn, store.index, "t1", refs, reason="user_request")
    assert again.skipped == 3 and _tenant_rows(store, "t2") == before_t2


def test_one_belief_goes_and_its_index_rows_with_it(store) -> None:
    uid, bid = rows(store.db, "SELECT belief_uid, id FROM beliefs WHERE tenant = 't1' AND "
                    "predicate = 'works_at'")[0]
    report = delete_memory(store.conn, store.index, "t1", "belief", uid)
    assert report.deleted["beliefs"] == 1
    for sql in ("SELECT count(*) FROM beliefs WHERE id = ?",
                "SELECT count(*) FROM beliefs_fts_p WHERE doc = ?",
                "SELECT count(*) FROM beliefs_fts_len WHERE doc = ?",
                "SELECT count(*) FROM beliefs_vec_g1 WHERE rowid = ?"):
        assert rows(store.db, sql, (bid,)) == [(0,)], sql


def test_a_deleted_name_of_the_user_leaves_nothing_of_it(primary_urls) -> None:
    db = PgDatabase(primary_urls[0], None)
    db.migrate()
    s = make_pg_store(db.url, ("t1", "t2"), db=db)
    try:
        uid = forget_name.tell(s)
        forget_name.tell(s, "t2")  # another tenant's Maya: untouched
        before_t2 = _tenant_rows(s, "t2")
        assert "beliefs.text" in _text_hits(s, "maya")
        delete_memory(s.conn, s.index, "t1", "belief", uid)
        # every text column of the schema (postings included) holds the name only for t2
        for hit in _text_hits(s, "maya"):
            table, column = hit.split(".")
            not_t2 = (f"NOT starts_with(token, '{tenant_prefix('t2')}')"
                      if table.endswith("_fts_p") else "tenant <> 't2'")
            assert rows(s.db, f"SELECT count(*) FROM {table} WHERE lower({column}) LIKE ? "
                        f"AND {not_t2}", ("%maya%",)) == [(0,)], hit
        assert forget_name.keyword_hits(s, "maya") == {"beliefs": [], "episodes": [],
                                                       "turns": []}
        assert forget_name.keyword_hits(s, "maya", "t2")["beliefs"]
        assert "Anna friend of user" in forget_name.texts(s)
        assert "user's sister has sibling user" in forget_name.texts(s)
        assert forget_name.stale_vectors(s) == []
        assert _tenant_rows(s, "t2") == before_t2
    finally:
        db.close()
