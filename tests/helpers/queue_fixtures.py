"""Fixtures of the queue tests, loaded with ``pytest_plugins = ("tests.helpers.queue_fixtures",)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.queue_env import RedisServer, started_redis


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A test-owned redis-server with appendonly on."""
    yield from started_redis(tmp_path)
