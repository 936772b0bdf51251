"""Entity kinds from the beliefs' roles: written with the belief, backfilled by migration 5.

A new user saw `mnemo entities list` call Denver, Seattle, Elin and Jonas each a "thing":
the writer minted every entity as one and nothing ever said more.
"""

from __future__ import annotations

from pathlib import Path

from memory_core.db import open_state
from memory_core.db.entity_kinds import PERSON, THING, backfill_sql
from memory_core.db.migrations import STATE_MIGRATIONS
from memory_core.embedders.factory import make_embedder
from memory_core.model.entities import classify, lookup
from memory_core.model.merges import merge_entities
from memory_core.model.write_tx import write_tx
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from tests.helpers.facts_chat import write_like_a_worker
from tests.helpers.post_turn import turn

TEXTS = ["My sister Elin lives in Stockholm.", "I work at Summit Parks.",
         "I have a dog named Biscuit.", "My brother Jonas lives in Seattle."]
EXPECTED = {"Elin": "person", "Stockholm": "place", "Summit Parks": "organization",
            "Biscuit": "pet", "Jonas": "person", "Seattle": "place"}


def _written(tmp_path: Path) -> Settings:
    settings = Settings.from_env({}, data_dir=tmp_path / "data", log_level="error")
    write_like_a_worker(settings, "t1", [{**turn(i), "text": text}
                                         for i, text in enumerate(TEXTS)])
    return settings


def _kinds(conn, tenant: str = "t1") -> dict[str, str]:
    return {name: kind for name, kind in conn.execute(
        "SELECT name, kind FROM entities WHERE tenant = ?", (tenant,))}


def _entity_upserts(conn) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT object_id FROM outbox WHERE kind = 'entity' AND op = 'upsert' ORDER BY id")]


def test_a_belief_gives_its_entities_the_kind_its_role_says(tmp_path: Path) -> None:
    db = open_state(_written(tmp_path), migrate=False)
    try:
        kinds = _kinds(db.conn)
        assert {name: kinds.get(name) for name in EXPECTED} == EXPECTED
        assert kinds["user"] == PERSON  # the hub, as ever
        # Each classified entity went to the mirrors after its kind was set.
        stockholm = lookup(db.conn, "t1", "Stockholm")
        assert stockholm in _entity_upserts(db.conn)
        # A kind set before is kept, and keeping it writes nothing.
        before = len(_entity_upserts(db.conn))
        index = VectorIndex(make_embedder(Settings.from_env({}, log_level="error")))
        with write_tx(db.conn, index, "t1") as tx:
            classify(tx, stockholm, PERSON)
        assert _kinds(db.conn)["Stockholm"] == "place"
        assert len(_entity_upserts(db.conn)) == before
    finally:
        db.close()


def test_the_migration_gives_an_older_store_its_kinds_and_tells_the_mirrors(
        tmp_path: Path) -> None:
    db = open_state(_written(tmp_path), migrate=False)
    conn = db.conn
    try:
        # As a store written before kinds were read: every entity but the hub a thing, and
        # the mirrors told nothing since.
        conn.execute("UPDATE entities SET kind = ? WHERE entity_id != 'user'", (THING,))
        conn.execute("DELETE FROM outbox")
        migration = next(m for m in STATE_MIGRATIONS if m.version == 5)
        migration.apply(conn)
        kinds = _kinds(conn)
        assert {name: kinds.get(name) for name in EXPECTED} == EXPECTED
        changed = {lookup(conn, "t1", name) for name in EXPECTED}
        assert sorted(_entity_upserts(conn)) == sorted(changed)
        # A second run changes nothing and tells nothing.
        for statement in backfill_sql("2026-01-01T00:00:00.000000Z"):
            conn.execute(statement)
        assert _kinds(conn) == kinds and len(_entity_upserts(conn)) == len(changed)
    finally:
        db.close()


def test_a_merge_keeps_a_kind_the_survivor_lacked(tmp_path: Path) -> None:
    # "Jon" (a thing: only ever the subject of a taste) is the person "Jonas": merged into
    # Jon, the survivor is a person, not a thing.
    settings = Settings.from_env({}, data_dir=tmp_path / "data", log_level="error")
    write_like_a_worker(settings, "t1", [{**turn(i), "text": text} for i, text in enumerate(
        ["My brother Jonas lives in Seattle.", "Jon really loves chess."])])
    db = open_state(settings, migrate=False)
    try:
        jon, jonas = lookup(db.conn, "t1", "Jon"), lookup(db.conn, "t1", "Jonas")
        assert jon and jonas and _kinds(db.conn)["Jon"] == THING
        merge_entities(db.conn, VectorIndex(make_embedder(settings)), "t1", jonas, jon)
        assert _kinds(db.conn)["Jon"] == PERSON
        # A survivor with a kind of its own keeps it: Seattle (a place) stays one.
        seattle = lookup(db.conn, "t1", "Seattle")
        merge_entities(db.conn, VectorIndex(make_embedder(settings)), "t1", jon, seattle)
        assert _kinds(db.conn)["Seattle"] == "place"
    finally:
        db.close()
