"""A data directory for CLI tests: real SQLite files written the way the workers write them.

Tenant ``t1`` gets 24 turns of ``tests.helpers.post_turn.turn`` (Sam lives in Lisbon, then
Berlin, then Osaka, a day apart; his sister Ana likewise); tenant ``t2`` only the first 8
(Sam and Ana in Lisbon), so a listing that crossed tenants would show the wrong city. In
``t1`` Ana is then renamed "Ana Silva": "Ana" stays an alias.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.db import open_state
from memory_core.embedders.factory import make_embedder
from memory_core.model.entities import lookup, rename_entity
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from tests.helpers.facts_chat import write_like_a_worker
from tests.helpers.post_turn import turn

T1_TURNS = 24
T2_TURNS = 8


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    return {"MNEMO_DATA_DIR": str(data_dir), "MNEMO_TENANT": "t1", **extra}


def seed_data_dir(data_dir: Path) -> Settings:
    """Write both tenants' turns through the workers' pipeline into ``data_dir``."""
    settings = Settings.from_env({}, data_dir=data_dir, log_level="error")
    write_like_a_worker(settings, "t1", [turn(i) for i in range(T1_TURNS)])
    write_like_a_worker(settings, "t2", [turn(i, tenant="t2") for i in range(T2_TURNS)])
    db = open_state(settings, migrate=False)
    try:
        index = VectorIndex(make_embedder(settings))
        rename_entity(db.conn, index, "t1", lookup(db.conn, "t1", "Ana") or "", "Ana Silva")
    finally:
        db.close()
    return settings


def a_belief_id(settings: Settings, tenant: str = "t1") -> str:
    """``belief:<uid>`` of one of ``tenant``'s beliefs (for `mnemo memory explain`)."""
    db = open_state(settings, migrate=False, readonly=True)
    try:
        uid = db.conn.execute("SELECT belief_uid FROM beliefs WHERE tenant = ? ORDER BY id "
                              "LIMIT 1", (tenant,)).fetchone()[0]
    finally:
        db.close()
    return f"belief:{uid}"


@pytest.fixture
def local_zone_not_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone set to New York: "no zone means UTC" must not hold only
    because this machine's local time happens to be UTC."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
