"""``mnemo queue`` on both brokers, and ``mnemo worker`` as a real process pool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from memory_core.brokers import make_broker
from memory_core.db import open_state
from memory_core.jobs import build_message
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from scripts.cli import main
from tests.conftest import REPO
from tests.helpers.post_turn import record_messages, turn
from tests.helpers.queue_env import cli_env, wait_for
from tests.helpers.timing import wait_progressing

pytest_plugins = ("tests.helpers.queue_fixtures",)


@pytest.fixture(params=["embedded", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    yield cli_env(request, tmp_path)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str] | object:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def _dead_letter(settings: Settings) -> str:
    """Enqueue a ship_changes message, consume it and dead-letter it by hand."""
    broker = make_broker(settings)
    broker.declare_queue("mirrors")
    msg = broker.enqueue(build_message("ship_changes", tenant="acme"))
    consumer = broker.consume("mirrors", prefetch=1, timeout=100)
    delivery = None
    deadline = time.monotonic() + 5
    while delivery is None and time.monotonic() < deadline:
        delivery = next(consumer)
    assert delivery is not None
    consumer.nack(delivery)
    consumer.close()
    broker.close()
    return str(msg.message_id)


def test_queue_commands(env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    message_id = _dead_letter(settings)
    stats = json.loads(_cli(env, "queue", "stats", "--json").stdout)
    by_queue = {q["queue"]: q for q in stats["queues"]}
    assert set(by_queue) >= {"turns", "consolidate", "mirrors"}
    assert by_queue["mirrors"]["dead"] == 1 and by_queue["mirrors"]["ready"] == 0
    assert stats["spool"] == (0 if "MNEMO_BROKER_URL" in env else None)
    assert "mirrors" in _cli(env, "queue", "stats").output

    dead = json.loads(_cli(env, "queue", "dead", "--json").stdout)
    assert [(d["message_id"], d["actor"]) for d in dead] == [(message_id, "ship_changes")]
    assert "acme" not in json.dumps(dead)  # ids only, never the payload

    refused = _cli(env, "queue", "purge")
    assert refused.exit_code == 1 and "--yes" in refused.output
    dry = json.loads(_cli(env, "queue", "purge", "--dry-run", "--json").stdout)
    assert dry == {"purged": 0, "would_purge": 1}

    assert json.loads(_cli(env, "queue", "requeue", "--json").stdout) == {"requeued": 1}
    stats = json.loads(_cli(env, "queue", "stats", "--json").stdout)
    mirrors = next(q for q in stats["queues"] if q["queue"] == "mirrors")
    assert (mirrors["ready"], mirrors["dead"]) == (1, 0)
    purged = json.loads(_cli(env, "queue", "purge", "--all", "--yes", "--json").stdout)
    assert purged == {"purged": 1, "would_purge": 0}
    assert "no dead letters" in _cli(env, "queue", "dead").output


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@pytest.mark.timeout(900)  # three interpreters at load 20: 375 s seen (15 s idle)
def test_mnemo_worker_runs_a_pool_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")},
           "MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "warning"}
    settings = Settings.from_env(env)
    state = open_state(settings)
    create_tenant(state.conn, "t1")
    broker = make_broker(settings)
    for message in record_messages(settings, [turn(i) for i in range(20)]):
        broker.enqueue(message)
    log = open(tmp_path / "pool.log", "wb")  # noqa: SIM115
    pool = subprocess.Popen(
        [sys.executable, "-c", "from scripts.cli import main; main()", "worker",
         "--processes", "2", "--threads", "2", "--grace", "5"],
        cwd=REPO, env=env, stdout=log, stderr=log)

    def stats() -> list[tuple[int, int, int, int]]:
        return sorted((s.ready, s.delayed, s.in_flight, s.dead) for s in broker.queue_stats())

    # The pool's pace is the machine's: at load 20 on 2 cores, starting the pool (over
    # 120 s seen before its preflight) and its two spawned interpreters (a minute or more
    # of imports before a child's first message) and draining the chains takes up to 25
    # times its idle 15 s. A hang shows as no queue count moving; the caps only end a
    # crawl. Polls are slow (pgrep reads all of /proc): the test must not starve the pool.
    try:
        wait_for(lambda: len(_children(pool.pid)) >= 2, 240, interval=0.25)
        wait_progressing(lambda: all(s.ready == s.delayed == s.in_flight == 0
                                     for s in broker.queue_stats()),
                         stats, stall_s=150, timeout_s=360, interval=0.25)
        # The messages were recorded, not just taken off the queue.
        assert state.conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 20
        assert state.conn.execute("SELECT count(*) FROM beliefs").fetchone()[0] > 0
        assert all(s.dead == 0 for s in broker.queue_stats())
        children = _children(pool.pid)  # now: every worker started (and the tracker)
        assert len(children) >= 2
        pool.send_signal(signal.SIGTERM)
        # Its own bound: grace 5 s + 10 s, then SIGKILL (logged); the cap is for a machine
        # too busy to run it.
        assert pool.wait(90) == 0, (tmp_path / "pool.log").read_text()[-3000:]
    finally:
        if pool.poll() is None:
            pool.kill()
        log.close()
        broker.close()
        state.close()
    # Every child (the workers, and multiprocessing's resource tracker) is gone too.
    wait_for(lambda: not any(Path(f"/proc/{c}").exists() for c in children), 40, interval=0.25)
