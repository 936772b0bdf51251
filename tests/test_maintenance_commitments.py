"""commitment_gc on real files: exactly the commitments and reviews past their time to live
expire; expired ones are never current again but stay for as_of; idempotent per window."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memory_core.clock import to_db
from memory_core.db.schema_state import OPEN_COMMITMENTS_SQL
from memory_core.maintenance.commitments import commitment_gc
from memory_core.model import counts
from memory_core.model.belief_rules import STICKY
from memory_core.model.predicates import COMMITMENT_PREDICATES
from memory_core.vocabulary import EXPIRED, STATUSES
from tests.helpers.maintenance import World, make_world, snapshot

DAY = timedelta(days=1)


@pytest.fixture
def world(tmp_path: Path):
    w = make_world(tmp_path / "data", commitment_grace_s=86_400, commitment_ttl_s=30 * 86_400,
                   pending_review_ttl_s=7 * 86_400)
    yield w
    w.close()


def _now(world: World) -> datetime:
    return world.start + 8 * DAY  # the pending reviews were recorded at start


def _seed(world: World) -> dict[str, int]:
    now = _now(world)
    b = world.belief
    ids = {
        "dated_past": b("t1", "I", "plans_to", "fly to Lisbon", now - 10 * DAY,
                        valid_to=now - 2 * DAY),
        "dated_grace": b("t1", "I", "plans_to", "see the dentist", now - 10 * DAY,
                         valid_to=now - 12 * timedelta(hours=1)),
        "undated_old": b("t1", "I", "committed_to", "call the plumber", now - 40 * DAY),
        "undated_young": b("t1", "I", "committed_to", "water the ferns", now - 10 * DAY),
        "not_a_commitment": b("t1", "I", "likes", "jazz", now - 400 * DAY),
        "rome_older": b("t1", "I", "plans_to", "visit Rome", now - 50 * DAY),
        "rome_newer": b("t1", "I", "plans_to", "visit Rome", now - 45 * DAY),
        "review_old": b("t1", "I", "likes", "opera", now - 3 * DAY, pending_review=True),
        "review_young": b("t1", "I", "likes", "ballet", now - 3 * DAY, pending_review=True),
        "other_tenant": b("t2", "I", "reminder", "renew the passport", now - 10 * DAY,
                          valid_to=now - 3 * DAY),
        "other_young": b("t2", "I", "reminder", "book the vet", now - 1 * DAY),
    }
    world.conn.execute("UPDATE beliefs SET recorded_at = ? WHERE id = ?",
                       (to_db(now - DAY), ids["review_young"]))
    return ids


def _statuses(world: World, ids: dict[str, int]) -> dict[str, str]:
    rows = dict(world.conn.execute("SELECT id, status FROM beliefs").fetchall())
    return {name: rows[i] for name, i in ids.items()}


def _uid(world: World, belief_id: int) -> str:
    return "belief:" + world.conn.execute("SELECT belief_uid FROM beliefs WHERE id = ?",
                                          (belief_id,)).fetchone()[0]


def test_exactly_the_ones_past_their_time_to_live_expire(world: World) -> None:
    ids = _seed(world)
    assert _statuses(world, ids)["rome_older"] == "superseded"
    report = commitment_gc(world.env(_now(world)))
    assert _statuses(world, ids) == {
        "dated_past": "expired", "dated_grace": "active", "undated_old": "expired",
        "undated_young": "active", "not_a_commitment": "active",
        "rome_older": "expired", "rome_newer": "expired",
        "review_old": "expired", "review_young": "pending_review",
        "other_tenant": "expired", "other_young": "active",
    }
    assert report.counts["commitments_expired"] == 4  # the older Rome went with its newer copy
    assert report.counts["reviews_expired"] == 1
    for tenant in ("t1", "t2"):
        assert counts.count_drift(world.conn, tenant) == {}
    # An undated commitment is closed at its expiry; a dated one keeps its own date; an
    # expired review never held.
    valid = dict(world.conn.execute("SELECT id, valid_to FROM beliefs").fetchall())
    assert valid[ids["undated_old"]] == to_db(_now(world) - 10 * DAY)
    assert valid[ids["dated_past"]] == to_db(_now(world) - 2 * DAY)
    start = world.conn.execute("SELECT valid_from FROM beliefs WHERE id = ?",
                               (ids["review_old"],)).fetchone()[0]
    assert valid[ids["review_old"]] == start


def test_recall_stops_returning_an_expired_commitment_but_as_of_still_finds_it(
        world: World) -> None:
    ids = _seed(world)
    now = _now(world)
    plumber = _uid(world, ids["undated_old"])
    assert plumber in world.recall("t1", "call the plumber", now=now)
    commitment_gc(world.env(now))
    assert plumber not in world.recall("t1", "call the plumber", now=now)
    assert plumber in world.recall("t1", "call the plumber", now=now, as_of=now - 35 * DAY)
    review = _uid(world, ids["review_old"])
    for as_of in (None, now - 3 * DAY, now - DAY):
        assert review not in world.recall("t1", "opera", now=now, as_of=as_of)


def test_a_later_write_in_the_slot_never_revives_an_expired_commitment(world: World) -> None:
    ids = _seed(world)
    now = _now(world)
    commitment_gc(world.env(now))
    again = world.belief("t1", "I", "plans_to", "visit Rome", now - DAY)  # said once more
    statuses = _statuses(world, {**ids, "again": again})
    assert statuses["rome_older"] == statuses["rome_newer"] == "expired"
    assert statuses["again"] == "active"


def test_running_twice_in_a_window_equals_running_once(world: World) -> None:
    _seed(world)
    env = world.env(_now(world))
    commitment_gc(env)
    once = snapshot(world)
    report = commitment_gc(env)
    assert snapshot(world) == once
    assert report.counts["commitments_expired"] == report.counts["reviews_expired"] == 0


def test_expired_is_a_status_and_a_decision() -> None:
    assert EXPIRED in STATUSES and EXPIRED in STICKY


def test_the_open_commitments_index_matches_the_vocabulary(world: World) -> None:
    for name in COMMITMENT_PREDICATES:
        assert f"'{name}'" in OPEN_COMMITMENTS_SQL
    plan = world.conn.execute(
        f"EXPLAIN QUERY PLAN SELECT id FROM beliefs WHERE tenant = ? AND {OPEN_COMMITMENTS_SQL}"
        " AND id > ? ORDER BY id LIMIT 10", ("t1", 0)).fetchall()
    assert any("ix_beliefs_open_commitments" in str(row) for row in plan), plan
