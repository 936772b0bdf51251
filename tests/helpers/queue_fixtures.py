"""Fixtures of the queue tests, loaded with ``pytest_plugins = ("tests.helpers.queue_fixtures",)``.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import service_unavailable
from tests.helpers.queue_env import RedisServer


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A started test-owned redis-server; stopped at teardown whatever happened."""
    if shutil.which("redis-server") is None:
        service_unavailable("redis-server (the binary, to start a test-owned server)")
    server = RedisServer(tmp_path / f"redis-{uuid.uuid4().hex[:6]}")
    server.start()
    try:
        yield server
    finally:
        server.stop()
