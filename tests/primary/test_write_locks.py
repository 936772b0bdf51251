"""The primary's write locks: per tenant, across processes. A writer of one tenant does not
wait for another tenant's open transaction; a writer of the same tenant does; a store-wide
write (the outbox horizon, maintenance) waits for every tenant writer in flight."""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import pytest

from memory_core.db.pg_state import tenant_lock_key
from memory_core.db.pg_store import PgDatabase
from memory_core.db.sqlite import atomic
from memory_core.errors import StoreError
from memory_core.mirrors.outbox import settled_outbox_id
from memory_core.model.turns import TurnInput, check_turn, insert_turn
from tests.helpers.memory import day
from tests.helpers.primary import make_pg_store, rows, write_turn_in_child

_SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def store(primary_urls):
    db = PgDatabase(primary_urls[0], None)
    db.migrate()
    s = make_pg_store(db.url, ("a", "b"), db=db)
    yield s
    db.close()


@pytest.fixture
def observer(store):
    """Another connection to the primary, reading what others committed."""
    db = PgDatabase(store.db.url, None)
    yield db
    db.close()


def _hold(store: Any, tenant: str, uid: str) -> None:
    """Write one turn of ``tenant`` inside the caller's open transaction."""
    insert_turn(store.conn, check_turn(TurnInput(tenant, "s1", uid, "user", "I live in Oslo",
                                                 day(1))))


def _waiting(db: PgDatabase, pid: int) -> bool:
    """Whether server process ``pid`` waits for an advisory lock."""
    return rows(db, "SELECT count(*) FROM pg_locks WHERE pid = ? AND locktype = 'advisory' "
                "AND NOT granted", (pid,)) != [(0,)]


def _start_child(url: Any, tenant: str, uid: str) -> tuple[Any, int]:
    pids = _SPAWN.Queue()
    child = _SPAWN.Process(target=write_turn_in_child, args=(url, tenant, uid, pids))
    child.start()
    return child, pids.get(timeout=60)


def test_another_tenants_writer_commits_while_one_tenant_is_held(store, observer) -> None:
    with atomic(store.conn, tenants=("a",)):
        _hold(store, "a", "held")
        child, _ = _start_child(store.db.url, "b", "other")
        child.join(60)  # finishes while tenant a's transaction is still open
        assert child.exitcode == 0
        assert rows(observer, "SELECT tenant FROM turns WHERE turn_uid = 'other'") == [("b",)]
        assert rows(observer, "SELECT count(*) FROM turns WHERE turn_uid = 'held'") == [(0,)]
    assert rows(observer, "SELECT count(*) FROM turns WHERE tenant = 'a'") == [(1,)]


def test_a_second_writer_of_the_same_tenant_waits_for_the_first(store, observer) -> None:
    with atomic(store.conn, tenants=("a",)):
        _hold(store, "a", "first")
        child, pid = _start_child(store.db.url, "a", "second")
        deadline = time.monotonic() + 60
        while not _waiting(observer, pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _waiting(observer, pid)
        time.sleep(0.3)
        assert child.is_alive()
        assert rows(observer, "SELECT count(*) FROM turns WHERE tenant = 'a'") == [(0,)]
    child.join(120)
    assert child.exitcode == 0
    assert rows(observer, "SELECT turn_uid FROM turns WHERE tenant = 'a' ORDER BY id") == \
        [("first",), ("second",)]


def test_the_outbox_horizon_waits_for_tenant_writers_in_flight(store) -> None:
    """A later transaction of another tenant may commit a higher outbox id first; the
    horizon the shipper reads is taken only once every writer in flight has ended."""
    other = store.db.connect()
    got: list[int] = []
    try:
        with atomic(store.conn, tenants=("a",)):
            store.conn.execute("INSERT INTO outbox (tenant, kind, object_id, op, created_at) "
                               "VALUES ('a', 'turn', 'x', 'upsert', 'now')")
            t = threading.Thread(target=lambda: got.append(settled_outbox_id(other)))
            t.start()
            time.sleep(0.5)
            assert not got  # the store-wide lock waits for tenant a's writer
        t.join(30)
        assert got == [rows(store.db, "SELECT max(id) FROM outbox")[0][0]]
    finally:
        other.close()


def test_a_savepoint_may_not_add_a_tenant(store) -> None:
    with pytest.raises(StoreError, match="more tenant"), atomic(store.conn, tenants=("a",)), \
            atomic(store.conn, tenants=("a", "b")):
        pass
    assert not store.conn.in_transaction


def test_tenant_keys_are_stable_and_distinct() -> None:
    assert tenant_lock_key("acme") == tenant_lock_key("acme")
    assert tenant_lock_key("acme") != tenant_lock_key("acme2")
    assert -2**63 <= tenant_lock_key("acme") < 2**63
