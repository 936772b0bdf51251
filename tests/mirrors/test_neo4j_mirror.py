"""The Neo4j mirror on the real write path and a real Bolt server: shipping the outbox,
tombstones, re-shipping, a server that is down, parallel workers, the tenant clear, and the
backfill (`mnemo mirror sync`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_core.db import open_ops
from memory_core.db.stores import Database
from memory_core.mirrors.neo4j import Neo4jSink
from memory_core.mirrors.outbox import cursor_of, ship_outbox
from memory_core.mirrors.records import snapshot
from memory_core.mirrors.sink import MirrorUnavailable, order_records
from memory_core.model.beliefs import BeliefInput, invalidate_belief, mutate_belief
from memory_core.model.merges import merge_entities
from memory_core.settings import Settings
from scripts.cli import main
from tests.helpers.bolt_server import BoltServer
from tests.helpers.memory import Store, day, make_store
from tests.helpers.neo4j_mirror import graph_counts, make_down_sink, make_sink, read_back
from tests.mirrors.contract import fresh_tenant

LIVE_SQL = ("SELECT belief_uid, subject_id, predicate, object_text, status, valid_to "
            "FROM beliefs WHERE tenant = ? AND status IN ('active', 'conflict') "
            "AND valid_to IS NULL AND retired_at IS NULL")


class Env:
    def __init__(self, tmp_path: Path, server: BoltServer, database: str | None = None) -> None:
        self.tenant, self.other = fresh_tenant("n"), fresh_tenant("o")
        self.data = tmp_path / "data"
        self.store: Store = make_store(self.data, (self.tenant, self.other))
        self.ops: Database = open_ops(Settings.from_env({}, data_dir=self.data))
        self.server = server
        self.database = database or server.database
        self.sink: Neo4jSink = make_sink(server, self.database)

    def put(self, subject: str, predicate: str, obj: str, when: float,
            tenant: str | None = None, **kw: Any) -> Any:
        return mutate_belief(self.store.conn, self.store.index, tenant or self.tenant,
                             BeliefInput(subject, predicate, obj, day(when), **kw))

    def ship(self, sink: Neo4jSink | None = None) -> Any:
        return ship_outbox(self.store.conn, self.ops.conn, sink or self.sink)

    def expected(self, tenant: str | None = None) -> dict[str, tuple[Any, ...]]:
        """The live beliefs by uid, read with plain SQL (not through the mirror code)."""
        rows = self.store.conn.execute(LIVE_SQL, (tenant or self.tenant,)).fetchall()
        return {r[0]: tuple(r[1:]) for r in rows}

    def mirrored(self, tenant: str | None = None) -> dict[str, tuple[Any, ...]]:
        got = read_back(self.server, tenant or self.tenant, self.database)
        return {key: (f["subject_id"], f["predicate"], f["object_text"], f["status"],
                      f["valid_to"]) for (kind, key), f in got.items() if kind == "belief"}

    def env_vars(self) -> dict[str, str]:
        return {"MNEMO_DATA_DIR": str(self.data), "MNEMO_NEO4J_URL": self.server.url,
                "MNEMO_NEO4J_USER": self.server.user,
                "MNEMO_NEO4J_PASSWORD": self.server.password,
                "MNEMO_NEO4J_DATABASE": self.database}

    def close(self) -> None:
        self.sink.close()
        self.ops.close()
        self.store.db.close()


@pytest.fixture
def env(tmp_path: Path, bolt_server: BoltServer) -> Iterator[Env]:
    e = Env(tmp_path, bolt_server)
    yield e
    e.close()


def _memory(env: Env) -> None:
    env.put("I", "lives_in", "Lisbon", 1)
    env.put("Anna", "works_at", "Acme", 2)
    env.put("I", "name_is", "Sam", 3)
    env.put("I", "likes", "green tea", 4)
    env.put("I", "lives_in", "Lisbon", 1, tenant=env.other)  # the same fact, another tenant


def test_shipping_mirrors_the_live_beliefs_and_reshipping_changes_nothing(env: Env) -> None:
    _memory(env)
    report = env.ship()
    assert report.shipped > 0 and cursor_of(env.ops.conn, "neo4j") == report.last_id
    assert env.mirrored() == env.expected() and len(env.expected()) >= 4
    assert env.mirrored(env.other) == env.expected(env.other)
    first = read_back(env.server, env.tenant)
    counts = graph_counts(env.server, env.tenant)
    for _ in range(2):  # the cursor lost twice: the whole outbox again, same graph
        env.ops.conn.execute("DELETE FROM mirror_cursors")
        env.ship()
        assert read_back(env.server, env.tenant) == first
        assert graph_counts(env.server, env.tenant) == counts


def test_supersede_invalidate_and_merge_reach_the_graph(env: Env) -> None:
    _memory(env)
    env.ship()
    env.put("I", "lives_in", "Porto", 10)  # supersedes Lisbon
    env.ship()
    assert env.mirrored() == env.expected()
    places = {v[2] for v in env.mirrored().values() if v[1] == "lives_in"}
    assert places == {"Porto"}
    porto = next(k for k, v in env.expected().items() if v[2] == "Porto")
    invalidate_belief(env.store.conn, env.store.index, env.tenant, porto)  # Lisbon reopens
    env.ship()
    assert {v[2] for v in env.mirrored().values() if v[1] == "lives_in"} == {"Lisbon"}
    acme = env.store.conn.execute("SELECT entity_id FROM entities WHERE tenant = ? AND "
                                  "name = 'Acme'", (env.tenant,)).fetchone()[0]
    env.put("Anna", "works_at", "ACME Inc", 11)
    inc = env.store.conn.execute("SELECT entity_id FROM entities WHERE tenant = ? AND "
                                 "name = 'ACME Inc'", (env.tenant,)).fetchone()[0]
    merge_entities(env.store.conn, env.store.index, env.tenant, inc, acme)
    env.ship()
    assert env.mirrored() == env.expected()
    got = read_back(env.server, env.tenant)
    assert ("entity", inc) not in got and ("entity", acme) in got
    assert env.mirrored(env.other) == env.expected(env.other)  # untouched


def test_a_down_mirror_keeps_the_cursor_and_loses_nothing(env: Env) -> None:
    _memory(env)
    down = make_down_sink(env.server)
    with pytest.raises(MirrorUnavailable) as caught:
        env.ship(down)
    down.close()
    assert "Lisbon" not in str(caught.value) and env.server.password not in str(caught.value)
    assert cursor_of(env.ops.conn, "neo4j") == 0
    row = env.ops.conn.execute("SELECT last_error FROM mirror_cursors WHERE sink = 'neo4j'")
    assert "MirrorUnavailable" in row.fetchone()[0]
    env.ship()  # back up: everything arrives
    assert env.mirrored() == env.expected()


def test_parallel_workers_applying_overlapping_batches_do_not_deadlock(env: Env) -> None:
    for i in range(30):
        env.put(f"Person {i % 6}", "friend_of", f"Person {(i * 7 + 1) % 6}", i)
        env.put("I", "likes", f"thing {i % 9}", i)
    records = order_records(snapshot(env.store.conn, env.tenant, ("entity", "belief")))
    errors: list[BaseException] = []

    def worker(batch: list[Any]) -> None:
        sink = make_sink(env.server)
        try:
            for _ in range(3):
                sink.apply(batch)
        except BaseException as e:  # collected: a thread's error must fail the test
            errors.append(e)
        finally:
            sink.close()

    halves = [records, list(reversed(records))]
    threads = [threading.Thread(target=worker, args=(order_records(h),)) for h in halves * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert env.mirrored() == env.expected()
    counts = graph_counts(env.server, env.tenant)
    assert counts["BELIEF"] == len(env.expected())  # MERGE made each edge once


def test_clear_tenant_edges_touches_no_other_tenant(env: Env) -> None:
    _memory(env)
    env.ship()
    assert env.sink.clear_tenant_edges(env.tenant) == len(env.expected())
    assert env.mirrored() == {}
    assert graph_counts(env.server, env.tenant)["Value"] == 0
    assert env.mirrored(env.other) == env.expected(env.other) != {}


def test_sync_backfills_existing_beliefs(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    from scripts.cli import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    _memory(env)
    env.put("I", "lives_in", "Porto", 10)
    result = CliRunner().invoke(main, ["mirror", "sync", "--sink", "neo4j", "--tenant",
                                       env.tenant, "--json"], env=env.env_vars())
    assert result.exit_code == 0, result.output
    assert env.mirrored() == env.expected()
    assert env.mirrored(env.other) == {}  # only the tenant asked for
    assert cursor_of(env.ops.conn, "neo4j") == 0  # one tenant: the cursor stays
    summary = result.stdout[result.stdout.index("{"):]
    import json
    totals = json.loads(summary)["totals"]
    beliefs = env.store.conn.execute("SELECT count(*) FROM beliefs WHERE tenant = ?",
                                     (env.tenant,)).fetchone()[0]
    assert totals["beliefs"] == beliefs
    assert "records" not in result.stderr  # no progress with --json
    full = CliRunner().invoke(main, ["mirror", "sync", "--sink", "neo4j"], env=env.env_vars())
    assert full.exit_code == 0, full.output
    assert "sync neo4j records " in full.stderr and "(100%)  in " in full.stderr  # progress
    head = env.store.conn.execute("SELECT max(id) FROM outbox").fetchone()[0]
    assert cursor_of(env.ops.conn, "neo4j") == head
    assert env.mirrored(env.other) == env.expected(env.other)
