"""``daily_digest`` (daily): per tenant, what memory learned, changed and dropped in a day.

The day is a UTC calendar day; the job digests the last complete one before its firing
(a firing at 00:05 on 2 May digests 1 May), so a stored digest never describes half a day.
It is computed from the system times in the state db:
- learned: turns, episodes, entities and beliefs recorded that day (ego anchors apart),
  per predicate;
- changed: beliefs superseded or invalidated that day, conflicts that arose, entity merges;
- dropped: tombstones of that day by reason and kind (``user_request``,
  ``retention_sweep``, ``session_purge``, ...), commitments and reviews that expired.

What it holds: counts, predicates (vocabulary names, not memory text), and up to
``SAMPLE`` ids per list (belief uids, entity ids). Never memory text and never entity
names: the ops db is not covered by verified deletion, so a name kept here would outlive
the deletion of its entity. ``mnemo digest`` shows the names, looked up live (an entity
deleted since shows as its id only). Stored once per (tenant, day) in the ops db's
``digests`` (``INSERT ... DO NOTHING``): a rerun of the window changes nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from memory_core.clock import to_db
from memory_core.db.sqlite import Connection, atomic
from memory_core.maintenance.base import JobEnv, JobReport
from memory_core.maintenance.common import tenants
from memory_core.model.ego_anchor import ANCHOR_PREDICATE, ANCHOR_SOURCE
from memory_core.model.entities import HUB

SAMPLE = 20


def _in_day(col: str) -> str:
    return f"{col} >= :lo AND {col} < :hi"


_ANCHOR = "source = :anchor_source AND predicate = :anchor_predicate"
_BELIEF_SUMS = {
    "learned": f"{_in_day('recorded_at')} AND NOT ({_ANCHOR})",
    "anchors": f"{_in_day('recorded_at')} AND {_ANCHOR}",
    "superseded": f"status = 'superseded' AND {_in_day('retired_at')}",
    "invalidated": f"status = 'invalidated' AND {_in_day('retired_at')}",
    "conflicts": f"status = 'conflict' AND {_in_day('recorded_at')}",
    # An expired review has an empty world time; an expired commitment keeps its own.
    "commitments_expired": f"status = 'expired' AND {_in_day('retired_at')} AND "
                           "valid_to IS NOT valid_from",
    "reviews_expired": f"status = 'expired' AND {_in_day('retired_at')} AND "
                       "valid_to IS valid_from",
}


def digest_day(now: datetime) -> date:
    """The last complete UTC day before ``now``."""
    return (now.astimezone(UTC) - timedelta(days=1)).date()


def _bounds(day: date) -> dict[str, str]:
    start = datetime.combine(day, time(), tzinfo=UTC)
    return {"lo": to_db(start), "hi": to_db(start + timedelta(days=1))}


def _count(conn: Connection, sql: str, params: dict[str, Any]) -> int:
    return int(conn.execute(sql, params).fetchone()[0])


def _beliefs(conn: Connection, params: dict[str, Any]) -> dict[str, dict[str, int]]:
    """``{sum name: {predicate: n}}`` in one pass over the tenant's beliefs."""
    sums = ", ".join(f"sum({cond})" for cond in _BELIEF_SUMS.values())
    out: dict[str, dict[str, int]] = {name: {} for name in _BELIEF_SUMS}
    for predicate, *values in conn.execute(
            f"SELECT predicate, {sums} FROM beliefs WHERE tenant = :tenant GROUP BY predicate",
            params):
        for name, value in zip(_BELIEF_SUMS, values, strict=True):
            if value:
                out[name][predicate] = int(value)
    return out


def _learned(conn: Connection, p: dict[str, Any], by: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {
        "turns": _count(conn, "SELECT count(*) FROM turns WHERE tenant = :tenant AND "
                        + _in_day("recorded_at"), p),
        "episodes": _count(conn, "SELECT count(*) FROM episodes WHERE tenant = :tenant AND "
                           + _in_day("created_at"), p),
        "entities": _count(conn, "SELECT count(*) FROM entities WHERE tenant = :tenant AND "
                           "entity_id != :hub AND " + _in_day("created_at"), p),
        "beliefs": sum(by["learned"].values()),
        "anchors": sum(by["anchors"].values()),
        "by_predicate": by["learned"],
        "belief_uids": [r[0] for r in conn.execute(
            "SELECT belief_uid FROM beliefs WHERE tenant = :tenant AND "
            + _BELIEF_SUMS["learned"] + " ORDER BY id LIMIT :sample", p)],
        "entity_ids": [r[0] for r in conn.execute(
            "SELECT entity_id FROM entities WHERE tenant = :tenant AND entity_id != :hub AND "
            + _in_day("created_at") + " ORDER BY id LIMIT :sample", p)],
    }


def _changed(conn: Connection, p: dict[str, Any], by: dict[str, dict[str, int]]) -> dict[str, Any]:
    merges_sql = ("SELECT {cols} FROM entity_merges WHERE tenant = :tenant AND {day} UNION ALL "
                  "SELECT {cols} FROM entity_merges_archive WHERE tenant = :tenant AND {day}")
    day = _in_day("merged_at")
    merges = conn.execute(merges_sql.format(cols="from_entity_id, into_entity_id", day=day)
                          + " LIMIT :sample", p).fetchall()
    return {
        "superseded": sum(by["superseded"].values()),
        "invalidated": sum(by["invalidated"].values()),
        "conflicts": sum(by["conflicts"].values()),
        "entities_merged": _count(conn, "SELECT count(*) FROM (" + merges_sql.format(
            cols="id", day=day) + ")", p),
        "superseded_by_predicate": by["superseded"],
        "merges": [{"from": m[0], "into": m[1]} for m in merges],
    }


def _dropped(conn: Connection, p: dict[str, Any], by: dict[str, dict[str, int]]) -> dict[str, Any]:
    deleted: dict[str, dict[str, int]] = {}
    for reason, kind, n in conn.execute(
            "SELECT reason, kind, count(*) FROM tombstones WHERE tenant = :tenant AND "
            + _in_day("deleted_at") + " GROUP BY reason, kind", p):
        deleted.setdefault(reason, {})[kind] = int(n)
    return {
        "deleted": deleted,
        "purged": sum(deleted.get("session_purge", {}).values()),
        "swept": sum(deleted.get("retention_sweep", {}).values()),
        "commitments_expired": sum(by["commitments_expired"].values()),
        "reviews_expired": sum(by["reviews_expired"].values()),
        "expired_by_predicate": by["commitments_expired"],
    }


def compute_digest(conn: Connection, tenant: str, day: date) -> dict[str, Any]:
    """The digest of ``tenant`` for the UTC ``day`` (a read of the state db, nothing stored)."""
    params = {"tenant": tenant, "hub": HUB, "sample": SAMPLE, "anchor_source": ANCHOR_SOURCE,
              "anchor_predicate": ANCHOR_PREDICATE, **_bounds(day)}
    with atomic(conn, immediate=False):  # one snapshot for every count
        by = _beliefs(conn, params)
        return {"tenant": tenant, "day": day.isoformat(), "learned": _learned(conn, params, by),
                "changed": _changed(conn, params, by), "dropped": _dropped(conn, params, by)}


def read_digest(ops: Connection, tenant: str, day: date) -> dict[str, Any] | None:
    row = ops.execute("SELECT body FROM digests WHERE tenant = ? AND day = ?",
                      (tenant, day.isoformat())).fetchone()
    return json.loads(row[0]) if row else None


def store_digest(ops: Connection, body: dict[str, Any]) -> bool:
    """Store a digest unless one is stored for its (tenant, day); True when stored."""
    with atomic(ops):
        cur = ops.execute("INSERT INTO digests (tenant, day, body) VALUES (?, ?, ?) "
                          "ON CONFLICT (tenant, day) DO NOTHING",
                          (body["tenant"], body["day"], json.dumps(body, sort_keys=True)))
    return cur.rowcount == 1


def daily_digest(env: JobEnv) -> JobReport:
    """Digest the last complete UTC day for every tenant that has none stored for it."""
    report = JobReport("daily_digest")
    day = digest_day(env.now)
    report.counts["day"] = day.isoformat()
    for tenant in tenants(env.state.conn):
        if read_digest(env.ops.conn, tenant, day) is not None:
            report.add("already_stored")
            continue
        body = compute_digest(env.state.conn, tenant, day)
        body["generated_at"] = to_db(env.now)
        report.add("digests_stored" if store_digest(env.ops.conn, body) else "already_stored")
    return report
