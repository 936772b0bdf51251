"""Reconcile against the real Neo4j mirror (the Bolt test server): drift injected on purpose —
an edge deleted (missing), a tombstone missed (dead), a stale version — is found by
``--dry-run`` (exit 1, nothing changed) and repaired without it (exit 0, then clean); errors
exit 2; the script is the same command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memory_core.mirrors.reconcile import last_drift
from memory_core.model.beliefs import invalidate_belief
from scripts.cli import exit_codes, main
from tests.conftest import REPO
from tests.helpers.bolt_server import OWN_DATABASE, BoltServer
from tests.helpers.neo4j_mirror import query, read_back
from tests.mirrors.test_neo4j_mirror import Env, _memory


@pytest.fixture
def env(tmp_path: Path, bolt_server: BoltServer) -> Iterator[Env]:
    """A memory shipped to a database of its own: reconcile looks at every tenant there."""
    query(bolt_server, "MATCH (n) DETACH DELETE n", OWN_DATABASE)
    e = Env(tmp_path, bolt_server, OWN_DATABASE)
    _memory(e)
    e.ship()
    yield e
    e.close()


def _reconcile(env: Env, *args: str) -> Result:
    return CliRunner().invoke(main, ["mirror", "reconcile", "--sink", "neo4j", *args],
                              env=env.env_vars())


def _uid(env: Env, predicate: str) -> str:
    return str(env.store.conn.execute(
        "SELECT belief_uid FROM beliefs WHERE tenant = ? AND predicate = ? AND status = "
        "'active'", (env.tenant, predicate)).fetchone()[0])


def _inject_drift(env: Env) -> dict[str, str]:
    """One of each: an edge deleted, a tombstone the mirror never got, a stale field."""
    missing, stale = _uid(env, "works_at"), _uid(env, "likes")
    dead = _uid(env, "lives_in")
    query(env.server, "MATCH ()-[e:BELIEF {tenant: $t, belief_uid: $u}]->() DELETE e",
          env.database, t=env.tenant, u=missing)
    query(env.server, "MATCH ()-[e:BELIEF {tenant: $t, belief_uid: $u}]->() "
          "SET e.confidence = 0.01", env.database, t=env.tenant, u=stale)
    invalidate_belief(env.store.conn, env.store.index, env.tenant, dead)
    head = env.store.conn.execute("SELECT max(id) FROM outbox").fetchone()[0]
    env.ops.conn.execute("UPDATE mirror_cursors SET last_outbox_id = ? WHERE sink = 'neo4j'",
                         (head,))  # the tombstone was skipped, as by a lost batch
    return {"missing": missing, "stale": stale, "dead": dead}


def test_dry_run_finds_each_kind_of_drift_and_changes_nothing(env: Env) -> None:
    clean = _reconcile(env, "--dry-run", "--json")
    assert clean.exit_code == exit_codes.RECONCILE_CLEAN, clean.output
    drift = _inject_drift(env)
    before = read_back(env.server, env.tenant, env.database)
    result = _reconcile(env, "--dry-run", "--json", "--tenant", env.tenant)
    assert result.exit_code == exit_codes.RECONCILE_DRIFT, result.output
    report = json.loads(result.stdout)["mirrors"][0]
    mine = report["tenants"][env.tenant]
    assert (mine["dead_uids"], mine["missing_uids"], mine["stale_uids"]) == (
        [drift["dead"]], [drift["missing"]], [drift["stale"]])
    assert report["drift"] == 3 and report["repaired"] == 0
    assert read_back(env.server, env.tenant, env.database) == before  # nothing changed
    assert "Lisbon" not in result.output and "Acme" not in result.output  # ids, no text


def test_repair_fixes_the_drift_then_the_check_is_clean(env: Env) -> None:
    _inject_drift(env)
    other_before = read_back(env.server, env.other, env.database)
    result = _reconcile(env)
    assert result.exit_code == exit_codes.RECONCILE_CLEAN, result.output
    assert "3 repaired, 0 left" in result.output
    assert env.mirrored() == env.expected()
    assert read_back(env.server, env.other, env.database) == other_before  # other tenant untouched
    again = _reconcile(env, "--dry-run", "--json")
    assert again.exit_code == exit_codes.RECONCILE_CLEAN, again.output
    assert json.loads(again.stdout)["mirrors"][0]["drift"] == 0
    assert last_drift(env.ops.conn, "neo4j") is not None
    assert last_drift(env.ops.conn, "neo4j")[1] == {}  # type: ignore[index]


def test_a_tenant_the_state_db_no_longer_has_is_dead_in_the_mirror(env: Env) -> None:
    ghost = env.tenant + "_gone"
    query(env.server, "CREATE (:Entity {tenant: $t, entity_id: 'user'})-[:BELIEF {tenant: $t, "
          "belief_uid: 'b_ghost', status: 'active'}]->(:Value {tenant: $t, key: 'x'})",
          env.database, t=ghost)
    found = _reconcile(env, "--dry-run", "--json")
    assert found.exit_code == exit_codes.RECONCILE_DRIFT, found.output
    tenants = json.loads(found.stdout)["mirrors"][0]["tenants"]
    assert tenants[ghost]["dead_uids"] == ["b_ghost"]
    assert last_drift(env.ops.conn, "neo4j")[1][ghost]["dead"] == 1  # type: ignore[index]
    assert _reconcile(env).exit_code == exit_codes.RECONCILE_CLEAN
    assert read_back(env.server, ghost, env.database) == {}


def test_errors_exit_2(env: Env, tmp_path: Path) -> None:
    down = {**env.env_vars(), "MNEMO_NEO4J_URL": "bolt://127.0.0.1:9"}
    result = CliRunner().invoke(main, ["mirror", "reconcile", "--dry-run"], env=down)
    assert result.exit_code == exit_codes.RECONCILE_ERROR, result.output
    assert "MirrorUnavailable" not in result.output and "could not" in result.output
    assert env.server.password not in result.output
    bare = {"MNEMO_DATA_DIR": str(env.data)}
    result = CliRunner().invoke(main, ["mirror", "reconcile"], env=bare)
    assert result.exit_code == exit_codes.RECONCILE_ERROR and "no mirror" in result.output
    result = _reconcile(env, "--tenant", "nobody")
    assert result.exit_code == exit_codes.RECONCILE_ERROR and "unknown tenant" in result.output


def test_the_script_is_the_same_command(env: Env) -> None:
    _inject_drift(env)
    script = REPO / "scripts" / "reconcile_memory_mirror.py"
    run = subprocess.run([sys.executable, str(script), "--dry-run", "--sink", "neo4j",
                          "--json"], env={**env.env_vars(), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == exit_codes.RECONCILE_DRIFT, run.stderr
    assert json.loads(run.stdout)["mirrors"][0]["drift"] == 3


def test_the_backup_warns_of_drift_and_health_reports_it(env: Env) -> None:
    from structlog.testing import capture_logs

    from memory_core.clock import utcnow
    from memory_core.db import open_ops, open_state
    from memory_core.health import DEGRADED, OK, HealthEnv
    from memory_core.health.mirrors import check_mirror_drift
    from memory_core.maintenance.backup import backup
    from memory_core.maintenance.base import JobEnv
    from memory_core.settings import Settings

    settings = Settings.from_env(env.env_vars())

    def health() -> Any:
        h = HealthEnv(settings, utcnow())
        try:
            return check_mirror_drift(h)
        finally:
            h.close()

    assert health().status == OK and "not checked yet" in health().reason
    _inject_drift(env)
    state, ops = open_state(settings), open_ops(settings)
    try:
        with capture_logs() as logs:
            report = backup(JobEnv(settings, state, ops, env.store.index, utcnow(), "w1"))
    finally:
        state.close()
        ops.close()
    assert report.counts["mirror_drift_neo4j"] == 3
    warned = [e for e in logs if e["event"] == "mirror_drift"]
    assert warned and (warned[0]["dead"], warned[0]["missing"], warned[0]["stale"]) == (1, 1, 1)
    assert warned[0]["log_level"] == "warning"
    check = health()
    assert check.status == DEGRADED and "1 dead, 1 missing, 1 stale" in check.reason
    assert _reconcile(env).exit_code == exit_codes.RECONCILE_CLEAN
    assert health().status == OK and "neo4j clean at" in health().reason


def test_progress_goes_to_stderr_unless_json_or_quiet(env: Env,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from scripts.cli import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    loud = _reconcile(env, "--dry-run")
    assert loud.exit_code == exit_codes.RECONCILE_CLEAN, loud.output
    lines = [x for x in loud.stderr.splitlines() if x.startswith("reconcile neo4j beliefs ")]
    assert lines and "(100%)  in " in lines[-1] and "/s" in lines[-1]
    assert "reconcile neo4j" not in loud.stdout
    for quiet in ("--quiet", "--json"):
        assert "reconcile neo4j" not in _reconcile(env, "--dry-run", quiet).stderr
