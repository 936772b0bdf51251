"""Reconcile against the real Postgres mirror (the machine's PostgreSQL, a database of its
own): it keeps the bi-temporal history, so a missed invalidate is a row still live there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memory_core.backends import BackendURL, parse_backend_url
from memory_core.db import open_ops
from memory_core.mirrors.outbox import ship_outbox
from memory_core.mirrors.postgres import PostgresSink
from memory_core.model.beliefs import invalidate_belief
from memory_core.settings import Settings
from scripts.cli import exit_codes, main
from tests.helpers.memory import make_store
from tests.helpers.postgres import admin_connect, fresh_database, read_back
from tests.mirrors.contract import fresh_tenant
from tests.mirrors.test_neo4j_mirror import Env, _memory


@pytest.fixture
def pg(postgres_url: str) -> Iterator[BackendURL]:
    server = parse_backend_url("postgres", "test", postgres_url)
    with fresh_database(server, prefix="mnemo_neo4jsink") as url:
        yield url


class PgEnv(Env):
    """The Neo4j tests' memory, shipped to Postgres instead."""

    def __init__(self, tmp_path: Path, url: BackendURL) -> None:
        self.tenant, self.other = fresh_tenant("p"), fresh_tenant("q")
        self.data = tmp_path / "data"
        self.store = make_store(self.data, (self.tenant, self.other))
        self.ops = open_ops(Settings.from_env({}, data_dir=self.data))
        self.url = url
        self.pg_sink = PostgresSink(url, None, connect_timeout_s=2)

    def ship(self, sink: Any = None) -> Any:
        return ship_outbox(self.store.conn, self.ops.conn, sink or self.pg_sink)

    def env_vars(self) -> dict[str, str]:
        return {"MNEMO_DATA_DIR": str(self.data), "MNEMO_POSTGRES_URL": self.url.canonical}

    def close(self) -> None:
        self.pg_sink.close()
        self.ops.close()
        self.store.db.close()


@pytest.fixture
def env(tmp_path: Path, pg: BackendURL) -> Iterator[PgEnv]:
    e = PgEnv(tmp_path, pg)
    _memory(e)
    e.ship()
    yield e
    e.close()


def _reconcile(env: PgEnv, *args: str) -> Result:
    return CliRunner().invoke(main, ["mirror", "reconcile", "--sink", "postgres", *args],
                              env=env.env_vars())


def _uid(env: PgEnv, predicate: str) -> str:
    return str(env.store.conn.execute(
        "SELECT belief_uid FROM beliefs WHERE tenant = ? AND predicate = ? AND status = "
        "'active'", (env.tenant, predicate)).fetchone()[0])


def test_postgres_drift_is_found_then_repaired(env: PgEnv) -> None:
    assert _reconcile(env, "--dry-run").exit_code == exit_codes.RECONCILE_CLEAN
    missing, stale, dead = _uid(env, "works_at"), _uid(env, "likes"), _uid(env, "lives_in")
    with admin_connect(env.url) as conn:
        conn.execute("DELETE FROM mnemo.beliefs WHERE tenant = %s AND belief_uid = %s",
                     (env.tenant, missing))
        conn.execute("UPDATE mnemo.beliefs SET confidence = 0.01 WHERE tenant = %s AND "
                     "belief_uid = %s", (env.tenant, stale))
    invalidate_belief(env.store.conn, env.store.index, env.tenant, dead)
    head = env.store.conn.execute("SELECT max(id) FROM outbox").fetchone()[0]
    env.ops.conn.execute("UPDATE mirror_cursors SET last_outbox_id = ?", (head,))
    before = read_back(env.url, env.tenant)
    found = _reconcile(env, "--dry-run", "--json")
    assert found.exit_code == exit_codes.RECONCILE_DRIFT, found.output
    mine = json.loads(found.stdout)["mirrors"][0]["tenants"][env.tenant]
    assert (mine["dead_uids"], mine["missing_uids"], mine["stale_uids"]) == (
        [dead], [missing], [stale])
    assert read_back(env.url, env.tenant) == before
    fixed = _reconcile(env)
    assert fixed.exit_code == exit_codes.RECONCILE_CLEAN, fixed.output
    assert _reconcile(env, "--dry-run").exit_code == exit_codes.RECONCILE_CLEAN
    after = read_back(env.url, env.tenant)
    assert after[("belief", dead)]["status"] == "invalidated"
    assert after[("belief", stale)]["confidence"] != 0.01 and ("belief", missing) in after
