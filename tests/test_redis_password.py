"""A Redis that requires a password: the broker and the settings-built client send
``MNEMO_REDIS_PASSWORD``, and no error text carries it. A real ``redis-server`` with
``requirepass`` on a free port, started by the test."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from dramatiq import Message

from memory_core.brokers.redis import MnemoRedisBroker, redis_client
from memory_core.settings import Settings

PASSWORD = "s3cr3t-red1s-pw"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[int]:
    server = shutil.which("redis-server")
    if server is None:
        pytest.fail("redis-server is not installed (it is on this machine's kind: see DESIGN.md)")
    port = _free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path), "--requirepass", PASSWORD],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(host="127.0.0.1", port=port, password=PASSWORD).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def test_broker_from_url_sends_the_password(locked_redis: int) -> None:
    url = f"redis://127.0.0.1:{locked_redis}/0"
    broker = MnemoRedisBroker(url=url, password=PASSWORD, namespace="pwtest", middleware=[])
    try:
        broker.declare_queue("q")
        broker.enqueue(Message(queue_name="q", actor_name="probe", args=(), kwargs={},
                               options={}))
        assert broker.client.llen("pwtest:q") == 1
    finally:
        broker.close()


def test_broker_without_the_password_is_refused_and_the_error_has_no_secret(
        locked_redis: int) -> None:
    url = f"redis://127.0.0.1:{locked_redis}/0"
    broker = MnemoRedisBroker(url=url, password="wrong-" + PASSWORD, namespace="pwtest",
                              middleware=[])
    try:
        with pytest.raises(redis.AuthenticationError) as err:
            broker.client.ping()
        assert PASSWORD not in str(err.value)
    finally:
        broker.close()


def test_settings_client_uses_mnemo_redis_password(locked_redis: int) -> None:
    env = {"MNEMO_BROKER_URL": f"redis://127.0.0.1:{locked_redis}/0",
           "MNEMO_REDIS_PASSWORD": PASSWORD}
    client = redis_client(Settings.from_env(env))
    assert client.ping() is True
