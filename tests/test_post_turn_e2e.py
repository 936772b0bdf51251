"""End to end on real parts: ``after_turn`` in this process, a real worker pool (processes)
on the embedded broker, the real pipeline; plus ``after_turn``'s own checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory_core import Memory
from memory_core.brokers import make_broker
from memory_core.db import migrate_stores, open_ops, open_state
from memory_core.errors import InvalidInputError, UnknownTenantError
from memory_core.model.tenants import create_tenant
from memory_core.model.turns import TurnInput
from memory_core.settings import Settings
from tests.conftest import REPO
from tests.helpers.post_turn import TEXTS, through_a_pool, turn
from tests.helpers.timing import Stopwatch


def _settings(tmp_path: Path) -> Settings:
    return Settings.from_env({}, data_dir=tmp_path / "data", hash_dim=32, log_level="error")


def _count(conn, sql: str) -> int:
    return int(conn.execute(sql).fetchone()[0])


@pytest.mark.slow
def test_after_turn_to_a_worker_pool_records_turns_beliefs_and_audit(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    state = open_state(settings)
    create_tenant(state.conn, "t1")
    turns = [turn(i) for i in range(48)]
    pool, ids = through_a_pool(settings, state.conn, turns, processes=2, threads=2)
    assert len(set(ids)) == 48
    assert all(proc.exitcode == 0 for proc in pool._procs)
    assert _count(state.conn, "SELECT count(*) FROM episode_turns") == 48
    assert _count(state.conn, "SELECT count(*) FROM beliefs") >= 20
    assert _count(state.conn, "SELECT count(*) FROM entities") > 3
    ops = open_ops(settings)
    rows = ops.conn.execute("SELECT action, object_kind, object_id, message_id, detail "
                            "FROM audit_log").fetchall()
    ops.close()
    state.close()
    assert sum(r[0] == "turn_recorded" for r in rows) == 48
    assert {r[3] for r in rows if r[0] == "turn_recorded"} == set(ids)
    assert sum(r[0] == "belief_applied" for r in rows) >= 20
    dump = json.dumps(rows)
    for text in TEXTS:
        for word in text.format(place="Lisbon").split():
            if len(word) > 3 and word.istitle():
                assert word.strip(".") not in dump, word


def test_after_turn_refuses_bad_turns_clearly_and_enqueues_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    migrate_stores(settings)
    state = open_state(settings)
    create_tenant(state.conn, "t1")
    state.close()
    with Memory.open(settings) as mem:
        good = turn(0)
        with pytest.raises(UnknownTenantError, match="mnemo tenant add nope"):
            mem.after_turn({**good, "tenant": "nope"})
        with pytest.raises(InvalidInputError, match="lacks"):
            mem.after_turn({k: v for k, v in good.items() if k != "text"})
        with pytest.raises(InvalidInputError, match="occurred_at"):
            mem.after_turn({**good, "occurred_at": "yesterday"})
        with pytest.raises(InvalidInputError, match="turn text is empty"):
            mem.after_turn({**good, "text": "  "})
        with pytest.raises(InvalidInputError, match="session_id"):
            mem.after_turn(TurnInput("t1", "bad session!", "u1", "user", "hi",
                                     "2024-05-01T12:00:00Z"))
        broker = make_broker(settings)
        assert all(s.ready == 0 for s in broker.queue_stats())
        with Stopwatch() as watch:  # no worker runs: a wait for one would last seconds
            message_id = mem.after_turn(TurnInput(**{**good, "index": 0}))
        assert watch.seconds < 2.0
        (row,) = broker.db.conn.execute("SELECT message_id, actor_name FROM queue_messages"
                                        ).fetchall()
        assert tuple(row) == (message_id, "record_turn")
        broker.close()


def test_the_chat_side_never_imports_workers() -> None:
    code = (
        "import sys, tempfile\n"
        "from memory_core import Memory\n"
        "from memory_core.db import migrate_stores, open_state\n"
        "from memory_core.settings import Settings\n"
        "from memory_core.model.tenants import create_tenant\n"
        "s = Settings.from_env({}, data_dir=tempfile.mkdtemp(), log_level='error')\n"
        "migrate_stores(s)\n"
        "db = open_state(s); create_tenant(db.conn, 't1'); db.close()\n"
        "with Memory.open(s) as m:\n"
        "    m.after_turn(dict(tenant='t1', session_id='s', turn_uid='u', speaker='user',\n"
        "                      text='hello', occurred_at='2024-05-01T12:00:00Z'))\n"
        "print('\\n' + ','.join(m for m in ('workers', 'dramatiq.brokers.redis')\n"
        "                        if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].strip() == ""

