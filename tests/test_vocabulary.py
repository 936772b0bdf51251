"""The stored words (sources, statuses, tiers) are written once, in memory_core.vocabulary:
the schema checks them, whatever is keyed by them covers them, and the stores never reach up
into the model for them."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest

from memory_core.db import Database, atomic, sqlite_module
from memory_core.extraction import heuristic
from memory_core.model.tenants import create_tenant
from memory_core.recall import inspect
from memory_core.recall.strategy import DEFAULT
from memory_core.vocabulary import SOURCES, STATUSES, TIERS, sql_list
from tests.helpers.imports import imported_modules

REPO = Path(__file__).resolve().parent.parent
# What memory_core/db may import from memory_core: itself and the shared base below it.
STORE_IMPORTS = {"memory_core.db", "memory_core.errors", "memory_core.clock",
                 "memory_core.settings", "memory_core.vocabulary",
                 "memory_core.backends"}  # the Postgres primary's URL (a base module)


def _insert_belief(conn: Any, uid: str, status: str, source: str) -> None:
    with atomic(conn):
        conn.execute(
            "INSERT INTO beliefs (tenant, belief_uid, subject_id, predicate, object_text, "
            "text, valid_from, recorded_at, status, source, confidence) "
            "VALUES ('t1', ?, 'user', 'likes', 'jazz', 'user likes jazz', "
            "'2024-05-01T00:00:00.000000Z', '2024-05-01T00:00:00.000000Z', ?, ?, 1.0)",
            (uid, status, source))


def _insert_episode(conn: Any, uid: str, tier: str) -> None:
    with atomic(conn):
        conn.execute(
            "INSERT INTO episodes (tenant, episode_uid, session_id, tier, text, occurred_at, "
            "importance, created_at, updated_at) VALUES ('t1', ?, 's1', ?, 'x', "
            "'2024-05-01T00:00:00.000000Z', 0.5, '2024-05-01T00:00:00.000000Z', "
            "'2024-05-01T00:00:00.000000Z')", (uid, tier))


def test_the_state_db_takes_every_word_and_refuses_any_other(state_db: Database) -> None:
    conn = state_db.conn
    create_tenant(conn, "t1")
    for i, (status, source) in enumerate(zip(STATUSES * 2, SOURCES, strict=False)):
        _insert_belief(conn, f"b{i}", status, source)
    for tier in TIERS:
        _insert_episode(conn, f"ep_{tier}", tier)
    for bad in (lambda: _insert_belief(conn, "bx", "retired", SOURCES[0]),
                lambda: _insert_belief(conn, "by", STATUSES[0], "guess"),
                lambda: _insert_episode(conn, "ep_x", "frozen")):
        with pytest.raises(sqlite_module().IntegrityError, match="CHECK constraint failed"):
            bad()


def test_what_is_keyed_by_the_words_covers_exactly_them() -> None:
    assert set(inspect._COUNTS_AS) == set(STATUSES)
    assert set(inspect._TIERS) == set(TIERS)
    assert set(DEFAULT.tier_values) == set(TIERS)
    assert set(typing.get_args(heuristic.Source)) <= set(SOURCES)


def test_sql_list_quotes_words_and_refuses_anything_else() -> None:
    assert sql_list(("active", "long_term")) == "'active', 'long_term'"
    for bad in ("x'); DROP TABLE beliefs; --", "Active", ""):
        with pytest.raises(ValueError, match="not a vocabulary word"):
            sql_list([bad])


def _memory_core_imports(path: Path) -> set[str]:
    return {n for n in imported_modules(path) if n.startswith("memory_core")}


def test_the_stores_take_the_words_from_below_never_from_the_model() -> None:
    offenders = [f"{path.relative_to(REPO)} imports {sorted(bad)}"
                 for path in sorted((REPO / "memory_core" / "db").rglob("*.py"))
                 if (bad := {n for n in _memory_core_imports(path)
                             if not any(n == ok or n.startswith(ok + ".")
                                        for ok in STORE_IMPORTS)})]
    assert not offenders, offenders
    assert _memory_core_imports(REPO / "memory_core" / "vocabulary.py") == set()
