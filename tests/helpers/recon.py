"""Helpers for the reconsolidation tests: turns with duplicates, the three ways of feeding
them, the partition chain, and table snapshots."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_core.db.sqlite import atomic
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.reconsolidation import JOB, global_reconsolidation
from memory_core.model.belief_rules import content_key
from memory_core.model.entities import lookup
from memory_core.write.pipeline import process_turns
from tests.helpers.post_turn import TABLES, Driver, record_messages, replay_twice_shuffled
from workers.context import WorkerContext

T0 = datetime(2024, 5, 1, 8, tzinfo=UTC)
NOW = datetime(2024, 6, 1, 3, tzinfo=UTC)
# Said again and again, in different chat sessions of one day, with case and spacing changes.
SMALL_TALK = ("Good morning!", "ok, thanks!", "OK,  thanks!", "I have a dog named Rex.")
FACTS = ("My name is Sam.", "I live in {place} now.", "My sister Ana works at Acme.",
         "I really love jazz.", "Ana lives in {place}.", "Can you suggest a quick dinner?")
PLACES = ("Lisbon", "Berlin", "Osaka")


def dup_turns(tenant: str = "t1", days: int = 3) -> list[dict[str, Any]]:
    """Two chat sessions a day, each mixing facts with small talk repeated across them; on
    the last day the morning session resumes after the evening one (interleaved sessions)."""
    plan = [(day, half, hour, idx) for day in range(days)
            for half, hour in (("a", 0), ("b", 9)) for idx in range(6)]
    plan += [(days - 1, "a", 10, idx) for idx in range(6, 9)]
    out: list[dict[str, Any]] = []
    for n, (day, half, hour, idx) in enumerate(plan):
        if idx % 2 == 0:
            text = SMALL_TALK[(idx // 2 + day) % len(SMALL_TALK)]
        else:
            text = FACTS[(n // 2) % len(FACTS)].format(place=PLACES[(n // 12) % len(PLACES)])
        when = T0 + timedelta(days=day, hours=hour, minutes=idx)
        out.append({"tenant": tenant, "session_id": f"d{day}{half}",
                    "turn_uid": f"{tenant}-u{n:04d}", "speaker": "user", "text": text,
                    "occurred_at": when.isoformat(), "index": idx})
    return out


def feed_in_order(ctx: WorkerContext, turns: list[dict[str, Any]]) -> list[Any]:
    """Each turn's whole chain before the next turn; returns every message delivered."""
    driver = Driver(ctx)
    seen: list[Any] = []
    for root in record_messages(ctx.settings, turns):
        seen.extend(driver.run_fifo([root]))
    return seen


def feed_shuffled(ctx: WorkerContext, messages: list[Any], seed: int) -> None:
    """Every message of a clean run delivered twice, in random order."""
    replay_twice_shuffled(Driver(ctx), messages, random.Random(seed))


def feed_bulk(ctx: WorkerContext, turns: list[dict[str, Any]], seed: int,
              batch: int = 7) -> None:
    """Bulk ingest: shuffled batches straight through ``process_turns`` (no consolidation)."""
    shuffled = list(turns)
    random.Random(seed).shuffle(shuffled)
    for start in range(0, len(shuffled), batch):
        process_turns(ctx.state, ctx.index, shuffled[start:start + batch])


def job_env(ctx: WorkerContext, now: datetime = NOW, window: str = "w") -> JobEnv:
    return JobEnv(ctx.settings, ctx.state, ctx.ops, ctx.index, now, window)


def run_chain(env: JobEnv, run_id: str, partitions: int | None = None,
              start: int = 0) -> list[JobReport]:
    """Run the partitions as the chained tasks would, from ``start`` to the last."""
    total = partitions or env.settings.recon_partitions
    kwargs: dict[str, Any] = {"run_id": run_id, "partition": start, "partitions": total}
    reports = []
    while True:
        report = global_reconsolidation(env, **kwargs)
        reports.append(report)
        if report.done:
            assert report.follow_ups == []
            return reports
        [(job, kwargs)] = report.follow_ups
        assert job == JOB


EPISODES = ("SELECT e.tenant, e.episode_uid, e.session_id, e.tier, e.text, e.occurred_at, "
            "e.importance, e.access_count, (SELECT group_concat(turn_uid) FROM (SELECT "
            "t.turn_uid FROM episode_turns et JOIN turns t ON t.id = et.turn_id WHERE "
            "et.episode_id = e.id ORDER BY t.turn_uid)) FROM episodes e")


def memory(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The memory tables without row ids and system time; an episode's turns sorted. The
    keys of finished reconsolidation partitions are left out (they name the run)."""
    out = {name: sorted(conn.execute(sql).fetchall(), key=repr)
           for name, sql in TABLES.items() if name != "episodes"}
    out["episodes"] = sorted(conn.execute(EPISODES).fetchall(), key=repr)
    out["applied_jobs"] = [k for k in out.get("applied_jobs", [])
                           if not k[0].startswith(f"{JOB}:")]
    return out


def dump(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ordinary table (ids included), vectors by rowid, FTS by search."""
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' AND name NOT GLOB '*_vec_g*' "
        "AND name NOT GLOB '*_fts_*' ORDER BY name")]
    out = {n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall(), key=repr) for n in names}
    for (vec,) in conn.execute("SELECT name FROM sqlite_master WHERE name GLOB '*_vec_g*' AND "
                               "sql LIKE 'CREATE VIRTUAL TABLE%'").fetchall():
        out[vec] = sorted(conn.execute(f"SELECT rowid, tenant, embedding FROM {vec}").fetchall())
    for fts in ("episodes_fts", "beliefs_fts", "turns_fts"):  # every token of every row
        out[fts] = sorted(conn.execute(f"SELECT term, doc, offset FROM {fts}_i").fetchall())
    return out


def add_defects(ctx: WorkerContext, tenant: str = "t1") -> None:
    """What the write path never leaves but older versions, imports or crashes can: a stale
    belief key, a stale copy of a belief (and an invalidated one), an entity whose name
    names another, missing vectors, wrong counts. Written with SQL on purpose."""
    conn = ctx.state.conn
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM beliefs WHERE tenant = ? AND source != 'system_tool' ORDER BY "
        "belief_uid", (tenant,))]
    with atomic(conn):
        conn.execute("UPDATE beliefs SET belief_uid = 'b_legacy_' || id WHERE id = ?", (ids[0],))
        for row_id, status in ((ids[1], None), (ids[2], "invalidated")):
            conn.execute(
                f"INSERT INTO beliefs ({_COPY}) SELECT tenant, 'b_copy_' || id, subject_id, "
                "predicate, object_text, object_norm, object_entity_id, negated, text, "
                "valid_from, valid_to, stated_valid_to, recorded_at, retired_at, "
                "coalesce(?, status), source, 0.25, NULL, expires_at FROM beliefs WHERE id = ?",
                (status, row_id))
        ana = lookup(conn, tenant, "Ana")
        assert ana is not None
        dup = "ent_legacy_ana"
        conn.execute("INSERT INTO entities (tenant, entity_id, name, kind, created_at, "
                     "updated_at) VALUES (?, ?, 'ANA', 'thing', ?, ?)", (tenant, dup, STAMP, STAMP))
        valid_from = "2024-05-02T10:00:00.000000Z"
        uid = content_key(tenant, dup, "likes", "tea", valid_from, "user_explicit")
        conn.execute(
            f"INSERT INTO beliefs ({_COPY}) VALUES (?, ?, ?, 'likes', 'tea', 'tea', NULL, 0, "
            "'ANA likes tea', ?, NULL, NULL, ?, NULL, 'active', 'user_explicit', 1.0, NULL, NULL)",
            (tenant, uid, dup, valid_from, STAMP))
        conn.execute("UPDATE entities SET belief_count = belief_count + 5 WHERE tenant = ? AND "
                     "entity_id = 'user'", (tenant,))
        for base in ("beliefs", "episodes"):
            gone = [r[0] for r in conn.execute(f"SELECT id FROM {base} WHERE tenant = ? ORDER "
                                               "BY id LIMIT 3", (tenant,))]
            ctx.index.delete(conn, base, gone)


STAMP = "2024-05-02T00:00:00.000000Z"
_COPY = ("tenant, belief_uid, subject_id, predicate, object_text, object_norm, "
         "object_entity_id, negated, text, valid_from, valid_to, stated_valid_to, recorded_at, "
         "retired_at, status, source, confidence, turn_uid, expires_at")
