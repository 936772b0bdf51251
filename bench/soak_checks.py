"""The soak's verdict: what was lost, doubled or leaked, and a single-process replay to compare.

- ``completeness_check`` — the one place that calls the completeness check
  (``mnemo queue verify --repair``, issue 11 item 1);
- ``measure`` — turns lost, follow-ups missing (``check_completeness``, read only; and the
  bench's own count of turns without their extraction key), turns recorded twice in effect,
  rows visible across tenants (every turn uid starts with its tenant, so a row of tenant A
  that names a turn of tenant B is a leak);
- ``replay`` — the same turns in one process through ``memory_core.write.pipeline`` (what the
  four post-turn actors call), in sending order;
- ``reconsolidate`` — ``global_reconsolidation`` over a data dir, so that episodes no longer
  depend on arrival order;
- ``snapshot`` / ``differences`` — beliefs, entities and episodes without row ids and wall
  clock times, compared row for row.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from soak_env import MNEMO, REPO_ROOT

from memory_core import Memory
from memory_core.clock import to_db, utcnow
from memory_core.db import open_ops, open_state
from memory_core.extraction.api import default_extractor, extractor_name
from memory_core.maintenance.base import JobEnv
from memory_core.maintenance.bodies import BODIES
from memory_core.model.tenants import create_tenant
from memory_core.settings import Settings
from memory_core.write import pipeline
from memory_core.write.completeness import check_completeness
from workers.context import WorkerContext


def completeness_check(env: dict[str, str], timeout_s: float = 300) -> str:
    """Run the completeness check with ``--repair``; its output, or why it could not run.

    The one switch point: were ``mnemo queue verify`` absent (before branch i11-complete),
    the check is reported as not available and the soak counts what it finds without it.
    ``--grace 0``: the soak calls it once the queue is drained, so no turn is too young.
    """
    try:
        done = subprocess.run([MNEMO, "queue", "verify", "--repair", "--grace", "0",
                               "--max-turns", "1000000000"], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return f"not finished within {timeout_s:.0f} s"
    if done.returncode == 2 and "No such command" in done.stderr:
        return "not available (`mnemo queue verify` is not on this branch yet)"
    lines = (done.stdout + done.stderr).strip().splitlines()
    return f"exit {done.returncode}: " + " | ".join(lines[-6:])


def _one(conn: Any, sql: str, args: Iterable[Any] = ()) -> int:
    return int(conn.execute(sql, tuple(args)).fetchone()[0])


def _twice(state: Any, ops: Any) -> int:
    """Turns whose effect exists twice: duplicate turn rows, a turn in two episodes, or two
    different messages that each created it."""
    dup_rows = _one(state, "SELECT count(*) FROM (SELECT 1 FROM turns GROUP BY tenant, "
                    "turn_uid HAVING count(*) > 1)")
    two_episodes = _one(state, "SELECT count(*) FROM (SELECT 1 FROM episode_turns GROUP BY "
                        "turn_id HAVING count(*) > 1)")
    created_twice = _one(ops, "SELECT count(*) FROM (SELECT 1 FROM audit_log WHERE action = "
                         "'turn_recorded' AND json_extract(detail, '$.created') IN (1, 'true') "
                         "GROUP BY tenant, object_id HAVING count(*) > 1)")
    return dup_rows + two_episodes + created_twice


def _cross_rows(state: Any) -> int:
    """Rows of one tenant that point at another tenant's turn or entity."""
    episodes = _one(state, "SELECT count(*) FROM episode_turns et JOIN episodes e ON e.id = "
                    "et.episode_id JOIN turns t ON t.id = et.turn_id WHERE e.tenant != t.tenant")
    beliefs = _one(state, "SELECT count(*) FROM beliefs WHERE turn_uid IS NOT NULL AND "
                   "substr(turn_uid, 1, length(tenant) + 1) != tenant || ':'")
    turns = _one(state, "SELECT count(*) FROM turns WHERE "
                 "substr(turn_uid, 1, length(tenant) + 1) != tenant || ':'")
    subjects = _one(state, "SELECT count(*) FROM beliefs b WHERE NOT EXISTS (SELECT 1 FROM "
                    "entities n WHERE n.tenant = b.tenant AND n.entity_id = b.subject_id)")
    return episodes + beliefs + turns + subjects


def _cross_recall(settings: Settings, turns: list[dict], tenants: list[str]) -> int:
    """Recall in each tenant with words of another tenant's turns: facts and items of
    another tenant."""
    leaked = 0
    with Memory.open(settings) as mem:
        for i, tenant in enumerate(tenants):
            others = [t for t in turns if t["tenant"] != tenant and len(t["text"]) > 30][i::97]
            for t in others[:3]:
                result = mem.recall(t["text"][:200], tenant=tenant)
                leaked += sum(1 for item in result.entries() for uid in item.turn_uids
                              if not uid.startswith(f"{tenant}:"))
    return leaked


def measure(settings: Settings, turns: list[dict], tenants: list[str]) -> dict[str, Any]:
    """The soak's counts over the data dir (after the workers stopped)."""
    expected = {(t["tenant"], t["turn_uid"]) for t in turns}
    name = extractor_name(default_extractor())
    state, ops = open_state(settings, migrate=False), open_ops(settings, migrate=False)
    try:
        recorded = set(state.conn.execute("SELECT tenant, turn_uid FROM turns").fetchall())
        applied = {r[0] for r in state.conn.execute(
            "SELECT key FROM applied_jobs WHERE key LIKE 'extract:%'")}
        unextracted = sum(1 for tenant, uid in recorded
                          if f"extract:{tenant}:{uid}:{name}" not in applied)
        found = check_completeness(state.conn, before=to_db(utcnow()), max_turns=10**9)
        out = {"turns_sent": len(expected), "turns_recorded": len(recorded & expected),
               "turns_lost": len(expected - recorded),
               "followups_missing": found.missing_total, "unextracted": unextracted,
               "recorded_twice": _twice(state.conn, ops.conn),
               "cross_tenant_rows": _cross_rows(state.conn)}
    finally:
        state.close()
        ops.close()
    out["cross_tenant_rows"] += _cross_recall(settings, turns, tenants)
    return out


def replay(settings: Settings, turns: list[dict], tenants: list[str]) -> None:
    """Every turn in one process, in sending order, through the steps the actors call:
    record, extract, anchor (when beliefs were drawn), consolidate the session."""
    ctx = WorkerContext.open(settings)
    try:
        for tenant in tenants:
            create_tenant(ctx.state.conn, tenant)
        for t in turns:
            pipeline.record_turn_and_episode(ctx.state, ctx.index, t)
            ids = pipeline.extract_and_apply(ctx.state, ctx.index, t["tenant"], t["turn_uid"])
            if ids:
                pipeline.anchor_turn(ctx.state, ctx.index, t["tenant"], t["turn_uid"])
            pipeline.micro_consolidate(ctx.state, ctx.index, t["tenant"], t["session_id"],
                                       turn_uid=t["turn_uid"])
    finally:
        ctx.close()


def reconsolidate(settings: Settings, max_partitions: int = 10_000) -> None:
    """Run every partition of ``global_reconsolidation`` in this process."""
    body = BODIES["global_reconsolidation"]
    ctx = WorkerContext.open(settings)
    kwargs: dict[str, Any] = {"run_id": "soak", "partition": 0,
                              "partitions": settings.recon_partitions}
    try:
        for _ in range(max_partitions):
            env = JobEnv(settings, ctx.state, ctx.ops, ctx.index, utcnow(), "manual:soak")
            report = body(env, **kwargs)
            if report.done or not report.follow_ups:
                return
            kwargs = {k: v for k, v in report.follow_ups[0][1].items() if k != "window"}
    finally:
        ctx.close()
    raise RuntimeError(f"global_reconsolidation did not finish within {max_partitions} "
                       "partitions")


_BELIEFS = ("SELECT tenant, belief_uid, subject_id, predicate, object_norm, object_text, "
            "object_entity_id, negated, valid_from, valid_to, stated_valid_to, status, source, "
            "round(confidence, 6), turn_uid, retired_at IS NOT NULL FROM beliefs")
_ENTITIES = "SELECT tenant, entity_id, name, kind, belief_count, graph_degree FROM entities"
_EPISODES = ("SELECT e.tenant, e.episode_uid, e.session_id, e.tier, e.text, e.occurred_at, "
             "round(e.importance, 6), (SELECT group_concat(uid, ' ') FROM (SELECT t.turn_uid "
             "AS uid FROM episode_turns et JOIN turns t ON t.id = et.turn_id WHERE "
             "et.episode_id = e.id ORDER BY 1)) FROM episodes e")
# What does not depend on arrival order even without reconsolidation: the turn each episode
# row covers and the (normalised) words of that episode. Tiers and which duplicates were
# folded depend on the order turns and consolidations ran in.
_TURN_EPISODES = ("SELECT t.tenant, t.turn_uid, e.tenant, lower(trim(e.text)) FROM turns t "
                  "JOIN episode_turns et ON et.turn_id = t.id JOIN episodes e ON "
                  "e.id = et.episode_id")


def snapshot(settings: Settings) -> dict[str, set[tuple[Any, ...]]]:
    state = open_state(settings, migrate=False)
    try:
        return {name: set(state.conn.execute(sql).fetchall()) for name, sql in (
            ("beliefs", _BELIEFS), ("entities", _ENTITIES), ("episodes", _EPISODES),
            ("turn_episodes", _TURN_EPISODES))}
    finally:
        state.close()


def differences(a: dict[str, set[tuple[Any, ...]]],
                b: dict[str, set[tuple[Any, ...]]]) -> dict[str, int]:
    """Rows in one snapshot and not the other, per table (0 everywhere: equal)."""
    return {name: len(a[name] ^ b[name]) for name in a}


def settings_for(data_dir: Path, broker_url: str | None, lease_s: int,
                 resend_s: int = 60, embedder_env: dict[str, str] | None = None) -> Settings:
    """``embedder_env``: the MNEMO_EMBED* variables the workers get (default: hash)."""
    return Settings.from_env(embedder_env or {}, data_dir=data_dir, log_level="error",
                             broker_url=broker_url, queue_lease_seconds=lease_s,
                             turn_journal_resend_s=resend_s)
