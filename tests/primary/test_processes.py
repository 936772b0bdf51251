"""Acceptance of the Postgres primary on real parts: two worker hosts (pools of their own
data dirs) and two chat processes against one Postgres and Redis (a namespace of its own)
process LoCoMo turns; the beliefs equal SQLite's on the same turns, and both chat
processes' recall overlaps SQLite's (bench/primary_processes.py runs a whole conversation).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memory_core.db.pg_store import PgDatabase
from tests.conftest import SHARED
from tests.helpers.primary import reset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "bench"))
import locomo_data
import primary_processes

DATA = SHARED / "data" / "locomo" / "locomo_dev.json"


@pytest.mark.slow
def test_two_worker_hosts_and_two_chat_processes_on_one_primary(primary_urls, redis_url,
                                                                 tmp_path) -> None:
    if not DATA.exists():
        pytest.skip(f"LoCoMo is not at {DATA}")
    url = primary_urls[1]
    db = PgDatabase(url, None)
    db.migrate()
    reset(db)
    db.close()
    conv = locomo_data.load(DATA)[0]
    r = primary_processes.run(conv, url, redis_url, tmp_path, limit=60, timeout_s=600)
    assert r.beliefs_sqlite > 0
    assert r.beliefs_equal, (r.beliefs_sqlite, r.beliefs_postgres)
    assert r.questions >= 10
    assert all(o >= 0.8 for o in r.overlap_at_10), r.overlap_at_10
