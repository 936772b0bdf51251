"""The Postgres mirror against real servers: the machine's PostgreSQL (no pgvector) and a
PostgreSQL 16 + pgvector the tests start (``conftest.pgvector_server``).

A real memory (the post-turn actors on real SQLite files) is shipped by the ``ship_changes``
actor; the mirror must then equal the state db's current objects, tenant by tenant — after
tombstones (verified delete, invalidate, merge), after re-shipping everything twice (no row
even rewritten), and after the mirror was down while the memory kept changing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.backends import BackendURL, BackendURLError
from memory_core.mirrors.outbox import cursor_of, ship_all
from memory_core.mirrors.postgres import PostgresSink
from memory_core.mirrors.records import snapshot
from memory_core.mirrors.sink import KINDS, MirrorError, MirrorUnavailable
from memory_core.model.beliefs import invalidate_belief
from memory_core.model.deletion import delete_memory
from memory_core.model.merges import merge_entities
from tests.helpers.post_turn import Driver, make_context, record_messages, turn
from tests.helpers.postgres import PgvectorServer, admin_connect, read_back
from tests.mirrors.contract import Harness, expected_state, normalized
from workers.actors import NON_RETRYABLE
from workers.context import WorkerContext

pytestmark = pytest.mark.postgres

TENANTS = ("t1", "t2")


def _expected(ctx: WorkerContext, tenant: str) -> dict:
    harness = Harness(make_sink=lambda: None, make_down_sink=lambda: None,  # type: ignore
                      read_back=lambda t: {})
    return normalized(expected_state(harness, tenant,
                                     snapshot(ctx.state.conn, tenant, KINDS)))


def _assert_mirrored(ctx: WorkerContext, url: BackendURL) -> None:
    for tenant in TENANTS:
        want = _expected(ctx, tenant)
        assert want  # the memory is not empty: the comparison is not vacuous
        assert normalized(read_back(url, tenant)) == want


def _xmins(url: BackendURL) -> dict[str, list[tuple[str, str]]]:
    """Each mirror row's xmin: it changes whenever the row is rewritten."""
    with admin_connect(url) as conn:
        return {t: sorted(conn.execute(f"SELECT tenant || '/' || {k}, xmin::text FROM mnemo.{t}"
                                       ).fetchall())
                for t, k in (("turns", "turn_uid"), ("episodes", "episode_uid"),
                             ("entities", "entity_id"), ("beliefs", "belief_uid"))}


@pytest.fixture
def mirrored_ctx(tmp_path: Path, pgvector_database: BackendURL) -> Iterator[WorkerContext]:
    with admin_connect(pgvector_database) as conn:  # the session's database, emptied
        conn.execute("DROP SCHEMA IF EXISTS mnemo CASCADE")
    ctx = make_context(tmp_path / "m", TENANTS, postgres_url=pgvector_database.canonical)
    yield ctx
    ctx.close()


def _feed(ctx: WorkerContext, start: int, n: int) -> None:
    """Run the real post-turn chain (ship_changes included) for turns start..start+n."""
    turns = [turn(i, tenant=TENANTS[i % 2]) for i in range(start, start + n)]
    Driver(ctx).run_fifo(record_messages(ctx.settings, turns))


def _ship(ctx: WorkerContext) -> int:
    return sum(r.shipped for r in ship_all(ctx.state.conn, ctx.ops.conn, ctx.sinks()))


def test_the_pgvector_mirror_stores_vectors_as_vectors(pgvector_database: BackendURL,
                                                        pg_database: BackendURL) -> None:
    for url, kind in ((pgvector_database, "vector"), (pg_database, "real[]")):
        sink = PostgresSink(url, None)
        sink.open()
        sink.close()
        assert sink.vector_type == kind and sink.schema_version == 1
        with admin_connect(url) as conn:
            udt = conn.execute("SELECT udt_name FROM information_schema.columns WHERE "
                               "table_schema = 'mnemo' AND table_name = 'episodes' AND "
                               "column_name = 'vector'").fetchone()
        assert udt == (("vector",) if kind == "vector" else ("_float4",))


def test_ship_tombstones_and_reship_twice_with_no_change(mirrored_ctx: WorkerContext,
                                                         pgvector_database: BackendURL) -> None:
    ctx, url = mirrored_ctx, pgvector_database
    _feed(ctx, 0, 16)  # the chain's ship_changes messages shipped it
    assert cursor_of(ctx.ops.conn, "postgres") == ctx.state.conn.execute(
        "SELECT max(id) FROM outbox").fetchone()[0]
    _assert_mirrored(ctx, url)
    with admin_connect(url) as conn:  # real vectors, searchable with pgvector's operators
        near = conn.execute("SELECT count(*) FROM mnemo.episodes WHERE vector IS NOT NULL AND "
                            "vector <=> vector = 0").fetchone()[0]
    assert near > 0

    # Tombstones: a verified delete (turn, episode, beliefs), an invalidate, a merge.
    index = ctx.index
    deleted = ctx.state.conn.execute("SELECT turn_uid FROM turns WHERE tenant = 't1' "
                                     "ORDER BY id LIMIT 1").fetchone()[0]
    delete_memory(ctx.state.conn, index, "t1", "turn", deleted)
    active = ctx.state.conn.execute("SELECT belief_uid FROM beliefs WHERE tenant = 't1' AND "
                                    "status = 'active' ORDER BY id LIMIT 1").fetchone()[0]
    invalidate_belief(ctx.state.conn, index, "t1", active)
    ents = [r[0] for r in ctx.state.conn.execute(
        "SELECT entity_id FROM entities WHERE tenant = 't2' AND entity_id != 'user' "
        "ORDER BY id LIMIT 2")]
    merge_entities(ctx.state.conn, index, "t2", ents[0], ents[1])
    assert _ship(ctx) > 0
    _assert_mirrored(ctx, url)
    gone = read_back(url, "t1")
    assert ("turn", deleted) not in gone and gone[("belief", active)]["status"] == "invalidated"
    assert ("entity", ents[0]) not in read_back(url, "t2")

    # Re-ship everything from the start, twice: the mirror is unchanged, no row rewritten.
    before = _xmins(url)
    for _ in range(2):
        ctx.ops.conn.execute("UPDATE mirror_cursors SET last_outbox_id = 0")
        assert _ship(ctx) > 0
        _assert_mirrored(ctx, url)
    assert _xmins(url) == before


def test_a_down_mirror_is_retried_and_then_gets_everything(
        mirrored_ctx: WorkerContext, pgvector_database: BackendURL,
        pgvector_server: PgvectorServer) -> None:
    ctx, url = mirrored_ctx, pgvector_database
    assert MirrorUnavailable not in NON_RETRYABLE and not issubclass(
        MirrorUnavailable, NON_RETRYABLE)  # the Retries middleware retries it with backoff
    _feed(ctx, 0, 6)
    shipped_to = cursor_of(ctx.ops.conn, "postgres")
    pgvector_server.stop()
    try:
        driver = Driver(ctx)
        messages = record_messages(ctx.settings, [turn(i, tenant=TENANTS[i % 2])
                                                  for i in range(6, 14)])
        with pytest.raises(MirrorUnavailable) as caught:
            driver.run_fifo(messages)  # the first ship_changes of the chain fails
        assert url.canonical in str(caught.value) and "Lisbon" not in str(caught.value)
        assert cursor_of(ctx.ops.conn, "postgres") == shipped_to  # nothing skipped
        error = ctx.ops.conn.execute("SELECT last_error FROM mirror_cursors WHERE sink = "
                                     "'postgres'").fetchone()[0]
        assert error.startswith("MirrorUnavailable: Postgres mirror at ")
        # The memory keeps changing while the mirror is down (the rest of the chain; its
        # ship_changes messages would fail the same way and wait for their retry).
        pending = [m for m in driver.sent if m.actor_name != "ship_changes"]
        while pending:
            pending.extend(m for m in driver.deliver(pending.pop(0))
                           if m.actor_name != "ship_changes")
        assert cursor_of(ctx.ops.conn, "postgres") == shipped_to
    finally:
        pgvector_server.start()
    # The pool's idle connections died with the server: the sink finds out and reconnects.
    assert _ship(ctx) > 0
    _assert_mirrored(ctx, url)
    assert ctx.ops.conn.execute("SELECT last_error FROM mirror_cursors WHERE sink = "
                                "'postgres'").fetchone()[0] is None
    assert _ship(ctx) == 0


def test_a_stale_pooled_connection_is_retried_not_lost(mirrored_ctx: WorkerContext,
                                                       pgvector_database: BackendURL) -> None:
    ctx, url = mirrored_ctx, pgvector_database
    _feed(ctx, 0, 4)
    sink = ctx.sinks()[0]
    assert isinstance(sink, PostgresSink)
    with admin_connect(url) as conn:  # kill the pool's idle connections behind its back
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                     "application_name = 'mnemo' AND pid != pg_backend_pid()")
    _feed(ctx, 4, 4)  # no ship_changes fails for good; the cursor may lag one message
    _ship(ctx)
    _assert_mirrored(ctx, url)


def test_the_mirror_refuses_a_newer_schema(pg_database: BackendURL) -> None:
    sink = PostgresSink(pg_database, None)
    sink.open()
    with admin_connect(pg_database) as conn:
        conn.execute("INSERT INTO mnemo.schema_version (version, name) VALUES (99, 'future')")
    try:
        with pytest.raises(MirrorError, match="newer than this mnemo"):
            PostgresSink(pg_database, None).open()
    finally:
        with admin_connect(pg_database) as conn:
            conn.execute("DELETE FROM mnemo.schema_version WHERE version = 99")
        sink.close()


def test_a_libpq_variable_refuses_the_connection(monkeypatch: pytest.MonkeyPatch,
                                                 pg_database: BackendURL) -> None:
    monkeypatch.setenv("PGSSLMODE", "disable-this-secret-value")
    sink = PostgresSink(pg_database, None)
    with pytest.raises(BackendURLError) as caught:
        sink.open()
    assert "PGSSLMODE" in str(caught.value)
    assert "disable-this-secret-value" not in str(caught.value)


def test_a_schema_dropped_behind_the_sinks_back_is_made_again(pg_database: BackendURL) -> None:
    from memory_core.mirrors.sink import order_records
    from tests.mirrors.contract import base_batch, fresh_tenant

    tenant = fresh_tenant("drop")
    sink = PostgresSink(pg_database, None)
    try:
        sink.open()
        with admin_connect(pg_database) as conn:
            conn.execute("DROP SCHEMA mnemo CASCADE")
        with pytest.raises(MirrorUnavailable, match="SQLSTATE 42P01"):
            sink.apply(order_records(base_batch(tenant)))
        sink.open()
        sink.apply(order_records(base_batch(tenant)))  # the retry: schema made again
        assert len(read_back(pg_database, tenant)) == len(base_batch(tenant))
    finally:
        sink.close()


def test_the_ship_changes_actor_retries_a_down_mirror_until_it_is_back(
        mirrored_ctx: WorkerContext, pgvector_database: BackendURL,
        pgvector_server: PgvectorServer) -> None:
    """The real actor on a Dramatiq worker with mnemo's middleware: the mirror is down when
    the message runs, the Retries middleware re-delivers it (backoff shortened for the test),
    and once the server is back the retry ships everything."""
    from dramatiq.brokers.stub import StubBroker

    from memory_core.jobs import build_message
    from tests.helpers.queue_env import running, wait_for
    from workers.actors import declare_actors
    from workers.context import LazyContext
    from workers.middleware import worker_middleware

    ctx, url = mirrored_ctx, pgvector_database
    _feed(ctx, 0, 4)
    broker = StubBroker(middleware=worker_middleware())
    declare_actors(broker, LazyContext.of(ctx))
    broker.actors["ship_changes"].options.update(min_backoff=200, max_backoff=400)
    head = ctx.state.conn.execute("SELECT max(id) FROM outbox").fetchone()[0]
    ctx.ops.conn.execute("UPDATE mirror_cursors SET last_outbox_id = 0")  # ship it all again
    pgvector_server.stop()
    try:
        with running(broker):
            broker.enqueue(build_message("ship_changes", tenant="t1"))
            wait_for(lambda: ctx.ops.conn.execute(
                "SELECT last_error FROM mirror_cursors WHERE sink = 'postgres'").fetchone()[0],
                timeout=30)
            assert cursor_of(ctx.ops.conn, "postgres") == 0
            pgvector_server.start()
            wait_for(lambda: cursor_of(ctx.ops.conn, "postgres") == head, timeout=60)
    finally:
        if not _up(pgvector_server):
            pgvector_server.start()
        broker.close()
    assert broker.dead_letters == []
    _assert_mirrored(ctx, url)


def _up(server: PgvectorServer) -> bool:
    try:
        admin_connect(server.url).close()
        return True
    except Exception:
        return False
