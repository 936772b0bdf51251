"""The meta table on the Postgres primary in a database whose text sorts by an ICU English
collation, as many production databases do (the test server's default is byte order)."""

from __future__ import annotations

from memory_core.backends import parse_backend_url
from memory_core.db.meta import get_meta, meta_by_prefix, set_meta, set_meta_once
from memory_core.db.pg_store import PgDatabase
from memory_core.db.sqlite import atomic
from tests.helpers.postgres import fresh_database


def test_keys_by_prefix_under_a_linguistic_collation(postgres_url: str) -> None:
    server = parse_backend_url("postgres", "test", postgres_url)
    with fresh_database(server, prefix="mnemo_primary", icu_locale="en-US") as url:
        db = PgDatabase(url, None)
        db.migrate()
        try:
            conn = db.conn
            # The premise: a range of keys ("reextracted:" up to "reextracted;") is empty here.
            assert conn.execute("SELECT 'reextracted:t1' < 'reextracted;'").fetchone()[0] is False
            with atomic(conn):
                set_meta(conn, "reextracted:t1", "v1")
                set_meta(conn, "reextracted:t1", "v2")
                set_meta(conn, "reextracted_at:t1", "2026-12-02")
                set_meta_once(conn, "extractor_rules:v2", "first")
                set_meta_once(conn, "extractor_rules:v2", "second")
            assert meta_by_prefix(conn, "reextracted:") == {"t1": "v2"}
            assert meta_by_prefix(conn, "reextracted_at:") == {"t1": "2026-12-02"}
            assert get_meta(conn, "extractor_rules:v2") == "first"
        finally:
            db.close()
