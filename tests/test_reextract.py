"""Re-running the extractor over recorded turns (``memory_core.write.reextract``), on real
SQLite files with sqlite-vec, turns written through the workers' pipeline.

The store is first written by an *older release* of the heuristic extractor (same name, so
its turns count as extracted): it read the assistant's words as the user's and knew no job
titles. Re-extraction must leave the store believing what a store written by today's
extractor believes, keep history, and touch nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memory_core import Memory, heartbeats
from memory_core.brokers import make_broker
from memory_core.clock import utcnow
from memory_core.db import open_ops, open_state
from memory_core.db.stores import Database
from memory_core.embedders.factory import make_embedder
from memory_core.extraction.heuristic import TurnText, extract_heuristic
from memory_core.extraction.version import HEARTBEAT_RULES, RULES_VERSION
from memory_core.model.beliefs import BeliefInput, invalidate_belief, mutate_belief
from memory_core.settings import Settings
from memory_core.vectors import VectorIndex
from memory_core.write import pipeline
from memory_core.write import reextract as reextract_module
from memory_core.write.reextract import note_rules, reextract, rules_drift
from tests.helpers import post_turn
from tests.helpers.facts_chat import store, write_like_a_worker
from tests.helpers.queue_env import wait_for
from workers.context import WorkerContext
from workers.pool import WorkerPool

SAID = [  # speaker, text, day of March 2024
    ("user", "I live in Boston and I work at Harbor Labs.", 1),
    ("user", "I love spicy food.", 2),
    ("assistant", "Ha, I live in Austin too.", 2),
    ("user", "I like mild food now.", 10),
    ("user", "I am a data analyst.", 11),
    ("assistant", "These days I prefer sweet food.", 12),
]


def turns(tenant: str, said: Sequence[tuple[str, str, int]] = SAID) -> list[dict[str, Any]]:
    return [{"tenant": tenant, "session_id": "s1", "turn_uid": f"{tenant}-{i}",
             "speaker": speaker, "text": text, "index": i,
             "occurred_at": f"2024-03-{day:02d}T10:{i:02d}:00Z"}
            for i, (speaker, text, day) in enumerate(said)]


def older_rules(turn: TurnText) -> list[Any]:
    """The extractor as an older release ran: the assistant's turns read as the user's, and
    no job titles."""
    found = extract_heuristic(dataclasses.replace(turn, speaker="user"))
    if turn.speaker == "assistant":
        found = [dataclasses.replace(c, subject="user") for c in found]
    return [c for c in found if c.predicate != "job_title_is"]


older_rules.name = "extract_heuristic"  # type: ignore[attr-defined]  # the same extractor


Rows = set[tuple[Any, ...]]


def beliefs(db: Database, tenant: str, *, invalidated: bool = False) -> Rows:
    """The tenant's extracted beliefs, without ids: who, what, when, status."""
    op = "=" if invalidated else "!="
    return set(db.conn.execute(
        "SELECT e.name, b.predicate, b.object_text, b.negated, b.valid_from, b.status, "
        "b.valid_to, b.turn_uid FROM beliefs b JOIN entities e ON e.tenant = b.tenant AND "
        f"e.entity_id = b.subject_id WHERE b.tenant = ? AND b.source = 'heuristic' AND "
        f"b.status {op} 'invalidated'", (tenant,)).fetchall())


def everything(db: Database) -> tuple[Rows, int]:
    """Every belief row of every tenant, and the outbox's length."""
    rows = set(db.conn.execute("SELECT * FROM beliefs").fetchall())
    return rows, db.conn.execute("SELECT count(*) FROM outbox").fetchone()[0]


@pytest.fixture
def old(tmp_path: Path) -> Settings:
    settings = store(tmp_path / "old")
    write_like_a_worker(settings, "t1", turns("t1"), extractor=older_rules)
    write_like_a_worker(settings, "t2", turns("t2"), extractor=older_rules)
    return settings


@pytest.fixture
def fresh(tmp_path: Path) -> Settings:
    settings = store(tmp_path / "fresh")
    write_like_a_worker(settings, "t1", turns("t1"))
    return settings


def opened(settings: Settings) -> tuple[Database, VectorIndex]:
    return open_state(settings, migrate=False), VectorIndex(make_embedder(settings))


def current(db: Database, tenant: str, predicate: str) -> set[str]:
    return {r[0] for r in db.conn.execute(
        "SELECT object_text FROM beliefs WHERE tenant = ? AND predicate = ? AND status = "
        "'active' AND negated = 0 AND valid_to IS NULL", (tenant, predicate))}


def test_a_store_drawn_by_older_rules_ends_as_a_fresh_store_would(old: Settings,
                                                                   fresh: Settings) -> None:
    db, index = opened(old)
    ref, _ = opened(fresh)
    try:
        assert current(db, "t1", "lives_in") == {"Austin"}  # the assistant's city, as the user's
        assert current(db, "t1", "prefers") == {"sweet food"}
        t2_before = beliefs(db, "t2"), beliefs(db, "t2", invalidated=True)

        report = reextract(db, index, "t1")

        assert beliefs(db, "t1") == beliefs(ref, "t1")
        assert current(db, "t1", "lives_in") == {"Boston"}
        assert current(db, "t1", "likes") == {"mild food"}  # ended "spicy food", still does
        assert current(db, "t1", "job_title_is") == {"data analyst"}
        # History keeps what was wrong: the assistant's city and taste, and the negation its
        # "these days" wrote of the user's "mild food".
        assert {(r[1], r[2], r[3], r[7]) for r in beliefs(db, "t1", invalidated=True)} == {
            ("lives_in", "Austin", 0, "t1-2"), ("prefers", "sweet food", 0, "t1-5"),
            ("likes", "mild food", 1, "t1-5")}
        assert {(c.predicate, c.object_text) for c in report.invalidated} == {
            ("lives_in", "Austin"), ("prefers", "sweet food"), ("likes", "mild food")}
        assert [(c.turn_uid, c.predicate, c.object_text) for c in report.added] == [
            ("t1-4", "job_title_is", "data analyst")]
        assert report.current_again >= 2  # Boston, mild food
        assert (report.turns, report.not_extracted) == (6, 0)
        # Nothing of the other tenant changed.
        assert (beliefs(db, "t2"), beliefs(db, "t2", invalidated=True)) == t2_before

        again = reextract(db, index, "t1")
        assert (again.added, again.invalidated, again.current_again) == ([], [], 0)
    finally:
        db.close()
        ref.close()


def test_the_mirrors_get_every_change(old: Settings) -> None:
    db, index = opened(old)
    try:
        last = db.conn.execute("SELECT max(id) FROM outbox").fetchone()[0]
        report = reextract(db, index, "t1")
        shipped = {r[0] for r in db.conn.execute(
            "SELECT object_id FROM outbox WHERE id > ? AND kind = 'belief' AND tenant = 't1'",
            (last,))}
        changed = {c.belief_uid for c in report.invalidated + report.added}
        assert changed and changed <= shipped
    finally:
        db.close()


def test_a_dry_run_writes_nothing_and_says_what_the_run_does(old: Settings) -> None:
    db, index = opened(old)
    try:
        before = everything(db)
        plan = reextract(db, index, "t1", dry_run=True)
        assert everything(db) == before

        done = reextract(db, index, "t1")

        def said(changes: list[Any]) -> set[tuple[str, str, str, bool]]:
            return {(c.turn_uid, c.predicate, c.object_text, c.negated) for c in changes}

        assert said(plan.invalidated) == said(done.invalidated) != set()
        assert said(plan.added) == said(done.added) != set()
        assert all(c.belief_uid is None for c in plan.added)
    finally:
        db.close()


def test_what_others_stated_or_invalidated_is_left_alone(old: Settings) -> None:
    db, index = opened(old)
    try:
        # The user confirms the city the assistant named, from the same turn: theirs now.
        mutate_belief(db.conn, index, "t1", BeliefInput(
            "user", "visited", "Austin", "2024-03-02T10:02:00Z", turn_uid="t1-2"))
        # An operator invalidated the spicy food already; the extractor still draws it.
        (spicy,) = db.conn.execute("SELECT belief_uid FROM beliefs WHERE tenant = 't1' AND "
                                   "object_text = 'spicy food' AND negated = 0").fetchone()
        invalidate_belief(db.conn, index, "t1", spicy)

        report = reextract(db, index, "t1")

        assert current(db, "t1", "visited") == {"Austin"}
        status = db.conn.execute("SELECT status FROM beliefs WHERE belief_uid = ?",
                                 (spicy,)).fetchone()[0]
        assert status == "invalidated"
        assert all(c.object_text != "spicy food" for c in report.added)
    finally:
        db.close()


def test_turns_not_extracted_yet_are_left_to_the_workers(old: Settings) -> None:
    db, index = opened(old)
    try:
        late = turns("t1", [("user", "I am a pilot.", 20)])[0] | {"turn_uid": "t1-late",
                                                                  "index": 99}
        pipeline.record_turn_and_episode(db, index, late)  # recorded; its extraction queued

        report = reextract(db, index, "t1")

        assert (report.turns, report.not_extracted) == (7, 1)
        assert "pilot" not in current(db, "t1", "job_title_is")
    finally:
        db.close()


def test_a_belief_a_turn_not_extracted_yet_draws_is_kept_for_it(old: Settings) -> None:
    """The older rules read the assistant's "I live in Austin too" as the user's; the user
    said it too, at the same moment, in a turn whose extraction has not run. Invalidated
    now, the belief would stay invalidated when the worker draws it from that turn."""
    db, index = opened(old)
    try:
        said = turns("t1")[2]  # the assistant's Austin
        late = said | {"turn_uid": "t1-late", "index": 99, "speaker": "user",
                       "text": "I live in Austin."}
        pipeline.record_turn_and_episode(db, index, late)  # recorded; its extraction queued

        report = reextract(db, index, "t1")

        assert report.not_extracted == 1
        assert ("lives_in", "Austin") not in {(c.predicate, c.object_text)
                                              for c in report.invalidated}
        pipeline.extract_and_apply(db, index, "t1", "t1-late")  # the worker's turn
        assert current(db, "t1", "lives_in") == {"Austin"}
        again = reextract(db, index, "t1")
        assert (again.added, again.invalidated) == ([], [])
    finally:
        db.close()


def test_a_run_killed_part_way_is_finished_by_the_next(old: Settings, fresh: Settings) -> None:
    db, index = opened(old)
    ref, _ = opened(fresh)

    class Killed(Exception):
        pass

    def kill_after_first_invalidation(phase: str, done: int, total: int) -> None:
        if phase == "invalidate" and done >= 1:
            raise Killed

    try:
        with pytest.raises(Killed):
            reextract(db, index, "t1", on_progress=kill_after_first_invalidation)
        assert beliefs(db, "t1") != beliefs(ref, "t1")  # part-way

        reextract(db, index, "t1")

        assert beliefs(db, "t1") == beliefs(ref, "t1")
    finally:
        db.close()
        ref.close()


def test_the_tenants_behind_the_rules_are_named_until_reextracted(
        old: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    db, index = opened(old)
    try:
        assert rules_drift(db.conn).since is None  # written without a worker: not known
        note_rules(db.conn)  # the first worker of this release starts
        drift = rules_drift(db.conn)
        assert drift.since is not None and drift.behind == {"t1": 6, "t2": 6}
        note_rules(db.conn)
        assert rules_drift(db.conn).since == drift.since  # recorded once

        reextract(db, index, "t1", dry_run=True)
        assert rules_drift(db.conn).behind == {"t1": 6, "t2": 6}  # a dry run changes nothing
        reextract(db, index, "t1")
        assert rules_drift(db.conn).behind == {"t2": 6}

        monkeypatch.setattr(reextract_module, "RULES_VERSION", "a later release")
        note_rules(db.conn)
        assert rules_drift(db.conn).behind == {"t1": 6, "t2": 6}  # t1's re-extraction is old
    finally:
        db.close()


def beat(rules: str | None, at: datetime, *, stopped: bool = False) -> heartbeats.Heartbeat:
    detail = {} if rules is None else {HEARTBEAT_RULES: rules}
    return heartbeats.Heartbeat(f"host:1:{rules}", heartbeats.WORKER, "host", 1, at, at,
                                stopped_at=at if stopped else None, detail=detail)


def test_a_rolling_upgrade_counts_what_the_older_workers_extract(old: Settings) -> None:
    """Workers of the older release go on extracting after the first new one started: the
    turns they take count until their last beat, and so does a tenant re-extracted before
    it."""
    db, index = opened(old)
    try:
        note_rules(db.conn)  # the first worker of this release starts
        reextract(db, index, "t1")
        late = turns("t1", [("user", "I am a pilot.", 20)])[0] | {"turn_uid": "t1-late",
                                                                  "index": 99}
        write_like_a_worker(old, "t1", [late], extractor=older_rules)  # an older worker's
        older = beat(None, utcnow())  # its heartbeat names no rules: an older release
        assert rules_drift(db.conn).behind == {"t2": 6}  # without the heartbeats: missed

        drift = rules_drift(db.conn, [older, beat(RULES_VERSION, utcnow())])

        assert drift.behind == {"t1": 7, "t2": 6}
        assert drift.upgrading and [w.rules for w in drift.older_workers] == [None]
        stopped = rules_drift(db.conn, [beat("2026-01-01", utcnow(), stopped=True)])
        assert not stopped.upgrading and stopped.behind == {"t1": 7, "t2": 6}
        reextract(db, index, "t1")  # once the older workers are gone
        assert rules_drift(db.conn, [older]).behind == {"t2": 6}
    finally:
        db.close()


def test_a_worker_records_the_rules_it_runs(tmp_path: Path) -> None:
    settings = store(tmp_path / "data")
    ctx = WorkerContext.open(settings)
    try:
        drift = rules_drift(ctx.state.conn)
        assert drift.since is not None and drift.behind == {}
        pipeline.process_turn(ctx.state, ctx.index, turns(settings.default_tenant)[0])
        assert rules_drift(ctx.state.conn).behind == {}  # extracted by these rules
    finally:
        ctx.close()


@pytest.mark.slow
def test_a_run_beside_a_working_pool_ends_as_a_fresh_store(tmp_path: Path) -> None:
    """The runbook says the workers may keep running: new turns arrive and are extracted
    by a real pool (the current rules) while the old ones are re-extracted here."""
    later = [post_turn.turn(i, "t1", session="later") for i in range(24)]
    old = store(tmp_path / "old")
    write_like_a_worker(old, "t1", turns("t1"), extractor=older_rules)
    fresh = store(tmp_path / "fresh")
    write_like_a_worker(fresh, "t1", turns("t1") + later)
    db, index = opened(old)
    ref, _ = opened(fresh)
    pool = WorkerPool(old, processes=1, threads=2, grace_s=5)
    pool.start()
    broker = make_broker(old)
    try:
        with Memory.open(old) as memory:
            for t in later:
                memory.after_turn(t)
        recorded = "SELECT count(*) FROM turns"
        wait_for(lambda: db.conn.execute(recorded).fetchone()[0] > 8, 60, 0.005)
        runs = []  # again and again while the pool records and extracts the rest

        def drained() -> bool:
            return db.conn.execute(recorded).fetchone()[0] == 30 and all(
                s.ready == s.delayed == s.in_flight == 0 for s in broker.queue_stats())

        while not drained():
            runs.append(reextract(db, index, "t1"))
        assert beliefs(db, "t1") == beliefs(ref, "t1")
        assert {(c.predicate, c.object_text) for c in runs[0].invalidated} == {
            ("lives_in", "Austin"), ("prefers", "sweet food"), ("likes", "mild food")}
        assert all(not r.invalidated for r in runs[1:])  # nothing the pool drew is undone
        # The pool's heartbeats name the rules it runs: none is an older release's.
        ops = open_ops(old, migrate=False)
        try:
            beats = heartbeats.read_all(ops.conn, heartbeats.WORKER)
        finally:
            ops.close()
        assert beats and {b.detail[HEARTBEAT_RULES] for b in beats} == {RULES_VERSION}
        assert rules_drift(db.conn, beats).older_workers == ()
    finally:
        pool.stop()
        broker.close()
        db.close()
        ref.close()
