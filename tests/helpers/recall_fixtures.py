"""Fixtures of the recall tests (load with `pytest_plugins = ("tests.helpers.recall_fixtures",)`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memory_core import Memory
from memory_core.db import migrate_stores, open_state
from memory_core.db.stores import Database
from memory_core.embedders.factory import make_embedder
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from tests.helpers.recall_seed import Seeder


@pytest.fixture
def seeded(settings: Settings) -> Iterator[tuple[Seeder, Database]]:
    """Both databases migrated (as `mnemo db migrate` does: Memory.open only checks), and a
    seeder writing rows to tenant ``acme`` of the state db the way the write path does."""
    migrate_stores(settings)
    db = open_state(settings, migrate=False)
    seeder = Seeder(db.conn, VectorIndex(make_embedder(settings)))
    seeder.tenant("acme")
    yield seeder, db
    db.close()


@pytest.fixture
def mem(settings: Settings, seeded: tuple[Seeder, Database]) -> Iterator[Memory]:
    m = Memory.open(settings)
    yield m
    m.close()
