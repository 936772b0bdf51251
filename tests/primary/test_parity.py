"""The Postgres primary gives what SQLite gives: the same beliefs and the same recall on the
same LoCoMo turns (the first sessions of one conversation; bench/primary_parity.py runs a
whole one), and a chat process's ``Memory`` reads it through ``MNEMO_STATE_BACKEND``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memory_core.db.pg_store import PgDatabase
from memory_core.embedders import HashEmbedder
from tests.conftest import SHARED
from tests.helpers.primary import reset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "bench"))
import locomo_data
import primary_parity

DATA = SHARED / "data" / "locomo" / "locomo_dev.json"


@pytest.fixture(scope="module")
def conversation() -> locomo_data.Conversation:
    if not DATA.exists():
        pytest.skip(f"LoCoMo is not at {DATA}")
    return locomo_data.load(DATA)[0]


def test_same_beliefs_and_recall_as_sqlite(conversation, primary_urls, tmp_path) -> None:
    url = primary_urls[0]
    db = PgDatabase(url, None)
    db.migrate()
    reset(db)
    db.close()
    p = primary_parity.run(conversation, url, HashEmbedder(dim=64), tmp_path, limit=80)
    assert p.beliefs_sqlite > 0
    assert p.beliefs_equal, (p.beliefs_sqlite, p.beliefs_postgres)
    assert p.questions >= 10
    assert p.overlap_at_10 >= 0.8, p


def test_same_on_pgvector_with_hnsw(conversation, primary_vector_urls, tmp_path) -> None:
    """The same against PostgreSQL with pgvector: vectors are ``vector(dim)`` under an HNSW
    index, and recall still matches SQLite's."""
    url = primary_vector_urls[0]
    p = primary_parity.run(conversation, url, HashEmbedder(dim=64), tmp_path, limit=80)
    db = PgDatabase(url, None)
    try:
        assert db.vector_type() == "vector"
        indexes = [r[0] for r in db.conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'mnemo_primary' AND "
            "tablename = 'episodes_vec_g1'").fetchall()]
        assert any("hnsw" in i and "vector_cosine_ops" in i for i in indexes), indexes
    finally:
        db.close()
    assert p.beliefs_equal, (p.beliefs_sqlite, p.beliefs_postgres)
    assert p.overlap_at_10 >= 0.8, p
