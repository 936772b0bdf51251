"""``mnemo health``: healthy, a stale worker, dead letters, Redis without persistence, a
damaged database, an embedder mismatch; heartbeats written by real worker processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_core import heartbeats
from memory_core.brokers import make_broker
from memory_core.clock import utcnow
from memory_core.db import open_ops, open_state
from memory_core.db.leases import claim
from memory_core.db.stores import migrate_stores
from memory_core.embedders.hash import HashEmbedder
from memory_core.embedders.identity import mismatch_message
from memory_core.errors import ConfigurationError
from memory_core.health import EXIT_CODES, HealthEnv, overall, probe
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex, vec_table
from schedules.health import health_report
from schedules.leader import LEADER_LEASE
from scripts.cli import main
from tests.conftest import REPO
from tests.helpers.post_turn import record_messages, seed_tenants, turn
from tests.helpers.queue_env import (
    RedisServer,
    start_worker_process,
    started_redis,
    stop_process,
    wait_for,
)
from tests.helpers.vector_seed import seed
from tests.test_queue_cli import _dead_letter
from workers.entry import build_worker_broker

pytest_plugins = ("tests.helpers.queue_fixtures",)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    return {**base, "MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "error",
            "MNEMO_HEARTBEAT_INTERVAL_S": "1", **extra}


def _health(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, ["health", "--json", *args], env=env,
                                catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def _by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"]}


def _alive(settings: Settings) -> None:
    """A fresh worker heartbeat and a held leader lease, written as the processes would."""
    ops = open_ops(settings)
    try:
        heartbeats.Heartbeater(ops, heartbeats.WORKER, interval_s=1, keep_s=3600).beat()
        assert claim(ops.conn, LEADER_LEASE, "test-scheduler", 300)
    finally:
        ops.close()


@pytest.fixture
def migrated(tmp_path: Path) -> Settings:
    settings = Settings.from_env(_env(tmp_path))
    migrate_stores(settings)
    return settings


def test_healthy_under_mnemo_up_then_the_probes_see_it_stop(tmp_path: Path) -> None:
    env = _env(tmp_path)
    settings = Settings.from_env(env)
    seed_tenants(settings)
    broker = make_broker(settings)
    for message in record_messages(settings, [turn(i) for i in range(3)]):
        broker.enqueue(message)
    broker.close()
    log = open(tmp_path / "up.log", "wb")  # noqa: SIM115
    up = subprocess.Popen([sys.executable, "-c", "from scripts.cli import main; main()", "up",
                           "--processes", "1", "--threads", "1", "--grace", "2"],
                          cwd=REPO, env=env, stdout=log, stderr=log)
    try:
        def processed() -> int:
            ops = open_ops(settings)
            try:
                return sum(b.processed for b in heartbeats.read_all(ops.conn, "worker"))
            finally:
                ops.close()

        # The counters reach the row through the timer: the 3 turns' messages ran (one a
        # turn: its follow-ups run inline, ``memory_core.jobs``).
        wait_for(lambda: processed() >= 3, 60, interval=0.2)
        code, report = wait_for(lambda: (r := _health(env))[0] == 0 and r, 30, interval=0.2)
        checks = _by_name(report)
        assert report["status"] == "ok"
        assert checks["workers"]["reason"] == "1 live worker process(es)"
        assert checks["scheduler_lease"]["status"] == "ok"
        assert checks["state_db"]["reason"].startswith("quick_check ok")
        assert _health(env, "--worker")[0] == 0
        code, sched = _health(env, "--scheduler")
        assert code == 0 and sched["checks"][0]["detail"]["detail"]["leader"] is True
        worker_pid = checks["workers"]["detail"]["fresh"][0].split(":")[-1]
        assert _health(env, "--worker", "--pid", worker_pid)[0] == 0
        assert "turns" in _health(env, "--worker")[1]["checks"][0]["detail"]["queues"]
        up.send_signal(signal.SIGTERM)
        assert up.wait(60) == 0, (tmp_path / "up.log").read_text()[-3000:]
    finally:
        if up.poll() is None:
            up.kill()
        log.close()
    # A clean stop marks both heartbeats stopped: the probes fail at once, saying so.
    for role in ("--worker", "--scheduler"):
        code, report = _health(env, role)
        assert code == 2 and " stopped at " in report["checks"][0]["reason"], report


def test_a_killed_worker_goes_stale(tmp_path: Path, migrated: Settings) -> None:
    env = _env(tmp_path)
    proc = start_worker_process(env, tmp_path / "marker")
    try:
        def beat() -> heartbeats.Heartbeat | None:
            ops = open_ops(migrated)
            try:
                return next(iter(heartbeats.read_all(ops.conn, "worker")), None)
            finally:
                ops.close()

        first = wait_for(beat, 30, interval=0.1)
        assert first.pid == proc.pid and first.queues == ("contract",)
        # Renewed on the timer (every second here), not only at start.
        wait_for(lambda: (b := beat()) is not None and b.last_seen_at > first.last_seen_at, 10)
        stop_process(proc, signal.SIGKILL)
        last = beat()
        assert last is not None and last.stopped_at is None
        stale_s = migrated.health_stale_s
        just_in_time = last.last_seen_at + timedelta(seconds=stale_s)
        late = just_in_time + timedelta(seconds=1)

        fresh = {c.name: c for c in health_report(migrated, just_in_time)}["workers"]
        assert fresh.status == "ok", fresh
        checks = health_report(migrated, late)
        workers = {c.name: c for c in checks}["workers"]
        assert workers.status == "unhealthy" and EXIT_CODES[overall(checks)] == 2
        assert "no live worker" in workers.reason and f":{proc.pid}" in workers.reason
        env_late = HealthEnv(migrated, late)
        try:
            dead = probe(env_late, "worker", pid=proc.pid)
        finally:
            env_late.close()
        assert dead.status == "unhealthy" and "last heartbeat 31 s old" in dead.reason

        # Another worker alive: the stale one makes the report degraded, by name.
        ops = open_ops(migrated)
        try:
            heartbeats.Heartbeater(ops, "worker", interval_s=1, keep_s=3600,
                                   clock=lambda: late).beat()
        finally:
            ops.close()
        workers = {c.name: c for c in health_report(migrated, late)}["workers"]
        assert workers.status == "degraded" and f":{proc.pid} (31 s)" in workers.reason
    finally:
        stop_process(proc, signal.SIGKILL)


def test_dead_letters_make_it_degraded(tmp_path: Path, migrated: Settings) -> None:
    env = _env(tmp_path)
    _alive(migrated)
    code, report = _health(env)
    assert code == 0, report
    _dead_letter(migrated)
    code, report = _health(env)
    dead = _by_name(report)["dead_letters"]
    assert code == 1 and report["status"] == "degraded"
    assert dead["status"] == "degraded" and dead["reason"].startswith("1 dead letter(s) (mirrors")
    code, _ = _health({**env, "MNEMO_HEALTH_DEAD_LETTERS": "1"})
    assert code == 0  # the threshold is a setting


def test_redis_without_persistence_is_reported_and_can_be_refused(
        tmp_path: Path, redis_url: str, own_redis: RedisServer) -> None:
    # The machine's Redis runs with appendonly no; the test-owned one with appendonly yes.
    env = _env(tmp_path, MNEMO_BROKER_URL=redis_url)
    migrate_stores(Settings.from_env(env))
    _, report = _health(env)
    persistence = _by_name(report)["broker_persistence"]
    assert persistence["status"] == "degraded"
    assert "appendonly no" in persistence["reason"]
    assert persistence["detail"] == {"persistence": "off"}

    required = {**env, "MNEMO_REDIS_REQUIRE_PERSISTENCE": "1"}
    code, report = _health(required)
    assert code == 2 and _by_name(report)["broker_persistence"]["status"] == "unhealthy"
    with pytest.raises(ConfigurationError, match="MNEMO_REDIS_REQUIRE_PERSISTENCE is on"):
        build_worker_broker(Settings.from_env(required), declare=lambda broker: None)

    durable = {**required, "MNEMO_BROKER_URL": own_redis.url}
    _, report = _health(durable)
    assert _by_name(report)["broker_persistence"] == {
        "name": "broker_persistence", "status": "ok", "reason": "appendonly yes",
        "detail": {"persistence": "on"}}
    build_worker_broker(Settings.from_env(durable), declare=lambda broker: None).close()


@pytest.fixture
def redis_without_config(tmp_path: Path) -> Iterator[str]:
    """A test-owned redis-server that refuses CONFIG (as many managed services do)."""
    for server in started_redis(tmp_path, persistent=False,
                                extra_args=("--rename-command", "CONFIG", "")):
        yield server.url


def test_redis_that_hides_config_is_unknown(tmp_path: Path, redis_without_config: str) -> None:
    env = _env(tmp_path, MNEMO_BROKER_URL=redis_without_config,
               MNEMO_REDIS_REQUIRE_PERSISTENCE="1")
    migrate_stores(Settings.from_env(env))
    _, report = _health(env)
    persistence = _by_name(report)["broker_persistence"]
    assert persistence["detail"] == {"persistence": "unknown"}
    assert persistence["reason"].startswith("persistence unknown: the server refused CONFIG")
    # Unknown warns but never refuses (managed services hide CONFIG and do persist).
    build_worker_broker(Settings.from_env(env), declare=lambda broker: None).close()


def _garble(path: Path, offset: int, size: int = 2048) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(os.urandom(size))


@pytest.mark.parametrize("kind", ["ops", "state"])
def test_a_damaged_database_is_unhealthy(tmp_path: Path, migrated: Settings, kind: str) -> None:
    _alive(migrated)
    copy = tmp_path / "copy"
    shutil.copytree(migrated.data_dir, copy)
    target = copy / f"memory_{kind}.db"
    assert not (copy / f"memory_{kind}.db-wal").exists()  # closed cleanly: all in the file
    _garble(target, 4096 * 2)  # page 3 onwards: a table's b-tree, not the header
    env = _env(tmp_path, MNEMO_DATA_DIR=str(copy))
    code, report = _health(env)
    checks = _by_name(report)
    assert code == 2, report
    check = checks[f"{kind}_db"]
    assert check["status"] == "unhealthy"
    assert str(target) in check["reason"] and "mnemo restore" in check["reason"]
    assert ("quick_check" in check["reason"]) or ("is damaged" in check["reason"])
    other = "state" if kind == "ops" else "ops"
    assert checks[f"{other}_db"]["status"] == "ok"


def test_an_embedder_mismatch_is_unhealthy(tmp_path: Path, migrated: Settings) -> None:
    _alive(migrated)
    state = open_state(migrated)
    VectorIndex(HashEmbedder(dim=384)).ensure(state.conn)
    state.close()
    env = _env(tmp_path)
    code, report = _health(env)
    assert code == 0 and _by_name(report)["embedder"]["reason"].endswith("matches the data")
    code, report = _health({**env, "MNEMO_HASH_DIM": "256"})
    embedder = _by_name(report)["embedder"]
    assert code == 2 and embedder["status"] == "unhealthy"
    assert "dim=384" in embedder["detail"]["recorded"]
    assert "dim=256" in embedder["detail"]["configured"]
    # The refusing worker's own wording (memory_core.embedders.identity), not a second one.
    assert embedder["reason"] == "a worker with these settings would refuse: " + mismatch_message(
        "hash:v1:dim=384", "hash:v1:dim=256", f"the data in {migrated.state_db_path}")
    assert "mnemo memory reindex" in embedder["reason"]


def test_missing_vectors_are_degraded_with_the_reindex_fix(tmp_path: Path,
                                                            migrated: Settings) -> None:
    _alive(migrated)
    index = VectorIndex(HashEmbedder(dim=384))
    state = open_state(migrated)
    try:
        index.ensure(state.conn)
        seed(state.conn, "t1", 4, 2, index)
        state.conn.execute(f"DELETE FROM {vec_table('episodes', 1)} WHERE rowid IN "
                           "(SELECT id FROM episodes ORDER BY id LIMIT 3)")
    finally:
        state.close()
    env = _env(tmp_path)
    code, report = _health(env)
    embedder = _by_name(report)["embedder"]
    assert code == 1 and embedder["status"] == "degraded", report
    assert embedder["reason"] == ("3 row(s) have no vector (episodes 3): dense search does not "
                                  "find them; run `mnemo memory reindex` to fill them")
    assert embedder["detail"]["missing"] == {"episodes": 3}
    done = CliRunner().invoke(main, ["memory", "reindex"], env=env)
    assert done.exit_code == 0, done.output
    code, report = _health(env)
    assert code == 0 and _by_name(report)["embedder"]["reason"].endswith("matches the data")


def test_heartbeats_are_pruned_after_the_keep_time(migrated: Settings) -> None:
    ops = open_ops(migrated)
    t0 = utcnow()
    try:
        old = heartbeats.Heartbeater(ops, "worker", interval_s=1, keep_s=60, clock=lambda: t0)
        old.beat()
        new = heartbeats.Heartbeater(ops, "worker", interval_s=1, keep_s=60,
                                     clock=lambda: t0 + timedelta(seconds=61))
        new.beat()
        assert [b.process_id for b in heartbeats.read_all(ops.conn)] == [new.process_id]
    finally:
        ops.close()


def test_probe_needs_a_role_for_pid(tmp_path: Path, migrated: Settings) -> None:
    result = CliRunner().invoke(main, ["health", "--pid", "1"], env=_env(tmp_path))
    assert result.exit_code == 2 and "--pid goes with --worker or --scheduler" in result.output


def test_a_beat_written_after_the_probe_read_its_clock_is_zero_seconds_old() -> None:
    """The probe reads its clock, then the row: a beat in between is not "-0.0 s old"."""
    from datetime import UTC, datetime

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    beat = heartbeats.Heartbeater(None, heartbeats.WORKER, interval_s=5, keep_s=60,  # type: ignore[arg-type]
                       clock=lambda: now + timedelta(milliseconds=3)).current()
    assert beat.age_s(now) == 0.0 and f"{beat.age_s(now):.1f}" == "0.0"
    assert beat.age_s(now + timedelta(seconds=2)) == pytest.approx(1.997)
