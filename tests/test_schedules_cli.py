"""``mnemo schedules list|history|fire`` on both brokers, and ``mnemo up`` running the worker
pool and the scheduler together as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_core.brokers import make_broker
from memory_core.db import migrate_stores, open_ops
from memory_core.db.leases import SqliteLeases
from memory_core.maintenance import firings
from memory_core.settings import Settings
from schedules.leader import LEADER_LEASE
from schedules.table import SCHEDULES, fire_times, get_schedule, window_at
from scripts.cli import main
from tests.conftest import REPO
from tests.helpers.queue_env import cli_env, wait_for
from tests.helpers.schedule_env import SchedTarget, ledger

pytest_plugins = ("tests.helpers.queue_fixtures",)


@pytest.fixture(params=["embedded", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    yield cli_env(request, tmp_path)


def _cli(env: dict[str, str], *args: str) -> object:
    return CliRunner().invoke(main, list(args), env=env)


def test_schedules_list_history_and_fire(env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    migrate_stores(settings)  # `schedules list` only reads: it refuses a missing data dir
    result = _cli(env, "schedules", "list", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == [s.id for s in SCHEDULES]
    now = datetime.now(UTC)
    for row in rows:
        schedule = get_schedule(row["id"])
        nxt = [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in row["next"]]
        assert len(nxt) == 3 and nxt == sorted(nxt) and nxt[0] > now - timedelta(seconds=5)
        assert nxt[1:] == fire_times(schedule, nxt[0], 2)
        assert (row["last_window"], row["outcome"], row["misses_7d"]) == (None, None, 0)

    fired = _cli(env, "schedules", "fire", "backup", "--json")
    assert fired.exit_code == 0, fired.output
    out = json.loads(fired.stdout)
    assert out["window"].startswith("manual:") and out["job"] == "backup"
    assert out["message_id"] == firings.message_id_for(out["window"])
    broker = make_broker(settings)
    try:
        broker.declare_queue("maintenance")
        (stats,) = [s for s in broker.queue_stats(("maintenance",)) if s.queue == "maintenance"]
        assert stats.ready == 1
    finally:
        broker.close()

    history = json.loads(_cli(env, "schedules", "history", "backup", "--json").stdout)
    assert [(h["window_key"], h["kind"], h["status"]) for h in history] == [
        (out["window"], "manual", "enqueued")]
    listed = {r["id"]: r for r in json.loads(_cli(env, "schedules", "list", "--json").stdout)}
    assert (listed["backup"]["last_window"], listed["backup"]["outcome"]) == (
        out["window"], "enqueued")

    table = _cli(env, "schedules", "list")
    assert table.exit_code == 0
    assert table.output.splitlines()[0].split()[:3] == ["schedule", "cadence", "next"]
    assert "every 6 h from 03:00 UTC" in table.output
    text = _cli(env, "schedules", "history", "backup")
    assert out["window"] in text.output and "manual" in text.output


def test_an_unknown_schedule_is_refused_with_the_list(tmp_path: Path) -> None:
    env = {"MNEMO_DATA_DIR": str(tmp_path / "data")}
    for args in (("history", "nightly"), ("fire", "nightly")):
        result = _cli(env, "schedules", *args)
        assert result.exit_code == 1
        assert "unknown schedule 'nightly': the schedules are macro_sleep" in result.output


def test_a_manual_firing_redis_refuses_is_an_error_and_leaves_no_row(tmp_path: Path) -> None:
    from tests.helpers.queue_env import free_port

    env = {"MNEMO_DATA_DIR": str(tmp_path / "data"),
           "MNEMO_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"}
    result = _cli(env, "schedules", "fire", "backup")
    assert result.exit_code == 1
    assert "did not take the message" in result.output and "MNEMO_BROKER_URL" in result.output
    ops = open_ops(Settings.from_env(env))
    try:
        assert ledger(ops) == []
    finally:
        ops.close()


@pytest.mark.slow
def test_mnemo_up_runs_the_pool_and_the_scheduler_together(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")},
           "MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "warning",
           "MNEMO_SCHEDULER_LEASE_SECONDS": "3"}
    # The firing ledger ran eight days ago, and nothing since: the scheduler of `mnemo up`
    # catches its current window up, and the pool runs the (real) body.
    target = SchedTarget("embedded", tmp_path, None)
    report = get_schedule("firing_ledger")
    now = datetime.now(UTC)
    assert target.firer().fire_current(report, now - timedelta(days=8))
    target.close()
    settings = Settings.from_env(env)
    ops = open_ops(settings)
    log = open(tmp_path / "up.log", "wb")  # noqa: SIM115
    up = subprocess.Popen(
        [sys.executable, "-c", "from scripts.cli import main; main()", "up",
         "--processes", "1", "--threads", "2", "--grace", "5"],
        cwd=REPO, env=env, stdout=log, stderr=log)
    current = window_at(report, now).key
    try:
        wait_for(lambda: any(r[1] == current and r[3] == "done"
                             for r in ledger(ops, "firing_ledger")), 60)
        assert SqliteLeases(ops).holder_of(LEADER_LEASE) is not None
        up.send_signal(signal.SIGTERM)
        assert up.wait(30) == 0, (tmp_path / "up.log").read_text()[-3000:]
    finally:
        if up.poll() is None:
            up.kill()
        log.close()
    (row,) = [r for r in firings.history(ops.conn, "firing_ledger") if r.window_key == current]
    assert row.kind == "catch_up" and row.counts["schedules"] == 8
    assert SqliteLeases(ops).holder_of(LEADER_LEASE) is None  # given up on SIGTERM
    ops.close()
