"""``mnemo queue stats``: the spool per queue (also while Redis does not answer), and
``--watch`` with drain rates and ETA, on both brokers."""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memory_core.brokers import make_broker
from memory_core.chat.post_turn import TurnSender, checked_message, checked_turn
from memory_core.db import migrate_stores
from memory_core.jobs import build_message
from memory_core.settings import Settings
from scripts.cli import main
from tests.conftest import REPO
from tests.helpers.post_turn import turn
from tests.helpers.pty_run import run_in_pty
from tests.helpers.queue_env import cli_env, free_port

pytest_plugins = ("tests.helpers.queue_fixtures",)

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


@pytest.fixture(params=["embedded", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**cli_env(request, tmp_path), "MNEMO_LOG_LEVEL": "error"}
    migrate_stores(Settings.from_env(env))  # `queue stats` only reads: it needs the data dir
    yield env


def _cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


class Consumer(threading.Thread):
    """Acks messages of one queue at a steady pace, as a slow worker would."""

    def __init__(self, settings: Settings, queue: str, pause_s: float) -> None:
        super().__init__(daemon=True)
        self.broker = make_broker(settings)
        self.broker.declare_queue(queue)
        self.queue, self.pause_s = queue, pause_s
        self.stopped = threading.Event()
        self.acked = 0

    def run(self) -> None:
        consumer = self.broker.consume(self.queue, prefetch=1, timeout=50)
        try:
            while not self.stopped.is_set():
                message = next(consumer)
                if message is None:
                    continue
                consumer.ack(message)
                self.acked += 1
                time.sleep(self.pause_s)
        finally:
            consumer.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)
        self.broker.close()


def _fill(settings: Settings, n: int) -> None:
    broker = make_broker(settings)
    broker.declare_queue("mirrors")
    for _ in range(n):
        broker.enqueue(build_message("ship_changes", tenant="acme"))
    broker.close()


def test_watch_shows_the_drain_rate_and_eta_while_a_worker_consumes(
        env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    _fill(settings, 400)
    consumer = Consumer(settings, "mirrors", pause_s=0.01)
    consumer.start()
    try:
        result = _cli(env, "queue", "stats", "--watch", "--interval", "0.4", "--count", "4",
                      "--json")
        plain = _cli(env, "queue", "stats", "--watch", "--interval", "0.4", "--count", "3")
    finally:
        consumer.stop()
    assert result.exit_code == 0, result.output
    refreshes = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(refreshes) == 4
    mirrors = [next(q for q in r["queues"] if q["queue"] == "mirrors") for r in refreshes]
    assert mirrors[0]["drain_per_s"] is None  # one look cannot tell a rate
    assert mirrors[-1]["backlog"] < mirrors[0]["backlog"] <= 400
    # A rate, not a speed: how fast the consumer thread gets to run is the machine's.
    assert mirrors[-1]["drain_per_s"] > 0 and refreshes[-1]["drain_per_s"] > 0
    assert mirrors[-1]["eta_s"] > 0 or mirrors[-1]["backlog"] == 0
    assert consumer.acked >= 400 - mirrors[-1]["backlog"] - 1  # the rate is the real drain
    assert plain.exit_code == 0, plain.output
    last = [line for line in plain.stdout.splitlines() if "queue=mirrors" in line][-1]
    assert re.fullmatch(STAMP + r" queue=mirrors ready=\d+ delayed=0 in_flight=[01] dead=0 "
                        r"spooled=(-|0) backlog=\d+ drain=\d+(\.\d)?/s eta=(\d+:\d\d|empty)",
                        last), last
    assert any(line.split(" ")[1] == "queue=total" for line in plain.stdout.splitlines())


def _unreachable(tmp_path: Path) -> dict[str, str]:
    """Redis at a port nothing listens on."""
    return {"MNEMO_DATA_DIR": str(tmp_path / "data"), "MNEMO_LOG_LEVEL": "error",
            "MNEMO_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"}


def _spool_turns(settings: Settings, n: int) -> None:
    """After-turn sends while Redis is down: they go to the spool."""
    sender = TurnSender(settings)
    try:
        for i in range(n):
            assert sender.offer(checked_message(checked_turn(turn(i, tenant="acme"))))
    finally:
        sender.close()


def test_the_spool_shows_while_redis_is_unreachable(tmp_path: Path) -> None:
    env = _unreachable(tmp_path)
    _spool_turns(Settings.from_env(env), 3)
    found = _cli(env, "queue", "stats", "--json")
    assert found.exit_code == 1
    assert "did not answer" in found.stderr and "MNEMO_BROKER_URL" in found.stderr
    data = json.loads(found.stdout)
    assert (data["broker"], data["reachable"], data["spool"]) == ("redis", False, 3)
    turns = next(q for q in data["queues"] if q["queue"] == "turns")
    assert (turns["spooled"], turns["ready"]) == (3, None)
    table = _cli(env, "queue", "stats")
    assert table.exit_code == 1
    assert re.search(r"^turns +- +- +- +- +3 ", table.stdout, re.M), table.stdout
    assert "spool: 3 message(s) waiting for Redis" in table.stdout
    watched = _cli(env, "queue", "stats", "--watch", "--interval", "0.1", "--count", "2")
    assert watched.exit_code == 0, watched.output
    lines = watched.stdout.splitlines()
    assert sum("queue=turns ready=- delayed=- in_flight=- dead=- spooled=3 backlog=-" in line
               for line in lines) == 2
    assert any("error=" in line and "did not answer" in line for line in lines)


def test_a_watch_on_a_terminal_redraws_the_table(env: dict[str, str]) -> None:
    screen, _, code = run_in_pty(
        [sys.executable, "-c", "from scripts.cli import main; main()", "queue", "stats",
         "--watch", "--interval", "0.2", "--count", "3"],
        cwd=REPO, env={**os.environ, **env}, stdout_too=True, timeout=60)
    assert code == 0, screen[-2000:]
    assert screen.count("\x1b[H\x1b[2J") == 3 and screen.count("(Ctrl-C to stop)") == 3
    assert re.search(r"queue +ready +delayed +in flight +dead +spooled +oldest +backlog "
                     r"+drain +ETA", screen)
