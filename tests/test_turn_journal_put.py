"""The turn journal on the chat side: a turn ``after_turn`` returned for is in the journal
even if the chat process dies at once (SIGKILL, no close); while Redis is down the journal
and the spool keep the same bytes (one encoding)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from dramatiq import Message

from memory_core import Memory
from memory_core.db import open_ops
from memory_core.settings import Settings
from tests.conftest import REPO
from tests.helpers.post_turn import seed_tenants, turn
from tests.helpers.queue_env import free_port

pytest_plugins = ("tests.helpers.queue_fixtures",)

_CHAT = """
import os, signal, sys
from memory_core import Memory
from memory_core.settings import Settings
from tests.helpers.post_turn import turn
mem = Memory.open(Settings.from_env())
ids = [mem.after_turn(turn(i)) for i in range(5)]
print(" ".join(ids), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # a crash: no close, no checkpoint, no atexit
"""


def _journal(settings: Settings) -> list[tuple[str, bytes]]:
    ops = open_ops(settings, migrate=False)
    try:
        return [(r[0], bytes(r[1])) for r in ops.conn.execute(
            "SELECT message_id, body FROM turn_journal ORDER BY id")]
    finally:
        ops.close()


def test_a_sent_turn_is_in_the_journal_when_the_chat_process_is_killed(
        tmp_path: Path, redis_url: str) -> None:
    env = {**os.environ, "MNEMO_DATA_DIR": str(tmp_path / "data"),
           "MNEMO_BROKER_URL": redis_url, "MNEMO_LOG_LEVEL": "warning",
           "MNEMO_TURN_JOURNAL": "1"}
    settings = Settings.from_env(env)
    seed_tenants(settings)
    done = subprocess.run([sys.executable, "-c", _CHAT], cwd=REPO, env=env,
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    sent = done.stdout.decode().splitlines()[-1].split()  # (log lines come first)
    assert len(sent) == 5
    assert [mid for mid, _ in _journal(settings)] == sent


def test_while_redis_is_down_journal_and_spool_keep_the_same_bytes(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings = Settings.from_env({}, data_dir=tmp_path / "data", broker_url=url,
                                 turn_journal=True, log_level="warning")
    seed_tenants(settings)
    with Memory.open(settings) as mem:
        first = mem.after_turn(turn(0))  # tries Redis, fails: journal, then spool
        second = mem.after_turn(turn(1))  # known down (the cooldown): straight to the spool
        again = mem.after_turn(turn(1))  # the same turn again: kept once in each
    assert again == second
    journal = _journal(settings)
    ops = open_ops(settings, migrate=False)
    try:
        spool = [(r[0], bytes(r[1])) for r in ops.conn.execute(
            "SELECT message_id, body FROM spool ORDER BY id")]
    finally:
        ops.close()
    assert [mid for mid, _ in journal] == [first, second]
    assert spool == journal
    decoded = Message.decode(journal[1][1])
    assert decoded.message_id == second and decoded.kwargs["turn"]["turn_uid"] == "u0001"
