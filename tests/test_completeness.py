"""End-to-end completeness against real processes: every turn sent through after_turn is
recorded and has every follow-up applied, after a Redis server killed (SIGKILL) and
restarted without its data, and after a worker SIGKILLed mid-run (both brokers).

The Redis tests start their own redis-server, without persistence, on a free port; the
workers are real processes (``tests.helpers.pipeline_worker``) with the real actors.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memory_core import Memory
from memory_core.clock import to_db, utcnow
from memory_core.db import open_state
from memory_core.settings import Settings
from memory_core.write.completeness import check_completeness
from scripts.cli import main
from tests.conftest import REPO
from tests.helpers.post_turn import seed_tenants, turn
from tests.helpers.queue_env import RedisServer, started_redis, stop_process, wait_for

pytest_plugins = ("tests.helpers.queue_fixtures",)

N = 60


@pytest.fixture
def volatile_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A test-owned redis-server without persistence: a restart starts empty."""
    yield from started_redis(tmp_path, persistent=False)


def _env(tmp_path: Path, broker_url: str | None) -> dict[str, str]:
    env = {**os.environ, "MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_HASH_DIM": "32",
           "MNEMO_LOG_LEVEL": "warning", "MNEMO_TURN_JOURNAL_RESEND_S": "1",
           "MNEMO_COMPLETENESS_GRACE_S": "0", "MNEMO_QUEUE_LEASE_SECONDS": "5"}
    env.pop("MNEMO_BROKER_URL", None)
    if broker_url:
        env["MNEMO_BROKER_URL"] = broker_url
    seed_tenants(Settings.from_env(env))
    return env


def _worker(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - closed with the process by the OS
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.pipeline_worker", *args],
                            cwd=REPO, env=env, stdout=out, stderr=out)


def _turns() -> list[dict[str, Any]]:
    return [turn(i, session=f"s{i // 10}") for i in range(N)]


def _count(settings: Settings, sql: str) -> int:
    state = open_state(settings, migrate=False, readonly=True)
    try:
        return int(state.conn.execute(sql).fetchone()[0])
    finally:
        state.close()


def _complete(settings: Settings) -> bool:
    """Every turn recorded and every follow-up it owes applied (nothing to re-send)."""
    state = open_state(settings, migrate=False, readonly=True)
    try:
        recorded = state.conn.execute("SELECT count(*) FROM turns").fetchone()[0]
        extracted = state.conn.execute("SELECT count(*) FROM applied_jobs WHERE key LIKE "
                                       "'extract:%'").fetchone()[0]
        found = check_completeness(state.conn, before=to_db(utcnow()), max_turns=10 * N)
        return recorded == N and extracted == N and found.missing_total == 0
    finally:
        state.close()


def _verify(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(main, ["queue", "verify", "--json", *args], env=env)


@pytest.mark.slow
@pytest.mark.redis
def test_redis_killed_and_restarted_empty_loses_nothing_after_the_repair(
        tmp_path: Path, volatile_redis: RedisServer) -> None:
    env = _env(tmp_path, volatile_redis.url)
    settings = Settings.from_env(env)
    turns = _turns()
    # Phase 1: a worker on the turns queue only: the consolidations wait in Redis.
    first = _worker(env, tmp_path / "w1.log", "--queues", "turns")
    mem = Memory.open(settings)
    try:
        for t in turns[:N // 2]:
            mem.after_turn(t)
        wait_for(lambda: _count(settings, "SELECT count(*) FROM applied_jobs WHERE key LIKE "
                                "'extract:%'") == N // 2, timeout=60, interval=0.2)
        stop_process(first, signal.SIGKILL)  # mid-run: no worker while the rest is sent
        for t in turns[N // 2:]:
            mem.after_turn(t)
        volatile_redis.kill()  # everything Redis held is gone: 30 turns, 30 consolidations
        volatile_redis.start()
        assert _count(settings, "SELECT count(*) FROM turns") == N // 2
        second = _worker(env, tmp_path / "w2.log")
        try:
            # The worker's relay re-sends the journal's unrecorded turns (their follow-ups
            # chain); `mnemo queue verify --repair` re-sends the lost consolidations.
            wait_for(lambda: _count(settings, "SELECT count(*) FROM turns") == N,
                     timeout=60, interval=0.2)
            result = _verify(env)
            assert result.exit_code == 1, result.output  # the lost consolidations show
            assert '"micro_consolidate": ' in result.output
            result = _verify(env, "--repair")
            assert result.exit_code == 0, result.output
            wait_for(lambda: _complete(settings), timeout=60, interval=0.2)
            result = _verify(env)
            assert result.exit_code == 0, result.output
            assert '"overdue": 0' in result.output
        finally:
            stop_process(second)
    finally:
        mem.close()
    assert _count(settings, "SELECT count(*) FROM beliefs") > 0
    assert _count(settings, "SELECT count(*) FROM applied_jobs WHERE key LIKE "
                  "'consolidate:%'") == N


@pytest.mark.slow
@pytest.mark.parametrize("broker", ["embedded", "redis"])
def test_a_worker_killed_mid_run_leaves_every_turn_complete(
        tmp_path: Path, broker: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("volatile_redis").url if broker == "redis" else None
    env = _env(tmp_path, url)
    settings = Settings.from_env(env)
    first = _worker(env, tmp_path / "w1.log", "--threads", "1")
    mem = Memory.open(settings)
    try:
        for t in _turns():
            mem.after_turn(t)
        wait_for(lambda: _count(settings, "SELECT count(*) FROM turns") >= 5,
                 timeout=60, interval=0.05)
        stop_process(first, signal.SIGKILL)  # mid-job: its leased messages come back
        assert not _complete(settings)
        second = _worker(env, tmp_path / "w2.log")
        try:
            wait_for(lambda: _complete(settings), timeout=90, interval=0.2)
            result = _verify(env)
            assert result.exit_code == 0, result.output
        finally:
            stop_process(second)
    finally:
        mem.close()
