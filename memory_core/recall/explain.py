"""The recall log in ``memory_ops.db``: why each candidate was kept or dropped.

A row holds the query's sha256 digest (never the query), the strategy, and JSON of ids,
ranks, components and decisions (never memory text), one compact row per candidate that
``candidates`` turns back into dicts. It is written and trimmed to the last ``keep`` rows of
the tenant in one transaction (by ``log_writer``, off the chat path). The ids of recalled
episodes are what a worker later uses to reinforce them: the chat process never writes
the state db.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import Connection, atomic, inserted_id
from memory_core.recall.candidates import Candidate

# A recall logs ~130 candidates. Each is a row [id, handle, {list: rank}, components,
# decision, turn_uids] in one JSON array, encoded in C; the numbers of every row (its score,
# then its components' values) are float32s in one base64 string ("values"), and a row's
# ``components`` is the index of its component names in "components" (a recall has two or
# three such lists). Writing the numbers as JSON text took most of the log's CPU: 0.55 ms a
# recall at 100k memories against 0.23 ms now, which the recall pays on its own thread
# (``Memory.recall``; see ``log_writer``). ``candidates`` reads every format back into the
# dicts readers see (format 1: a dict per candidate; 2: rows with the components as JSON
# numbers).
LOG_FORMAT = 3
# Format 2's component order (its rows hold the values in this order, null where missing).
COMPONENTS = ("rrf", "ppr", "recency", "confidence", "tier", "session", "time", "speaker",
              "diversity", "subject", "predicate", "joint", "entity", "keyword", "dense",
              "graph", "object", "direct_cap")
COMPONENT_DIGITS, SCORE_DIGITS = 4, 6  # as shown (and as format 2 wrote them)
_DECISIONS = {"over the item budget": "items", "over the token budget": "tokens",
              "over the fact budget": "facts", "not about the query": "unrelated",
              "the same fact ranks higher": "duplicate"}
_REASONS = {"items": "dropped: over the item budget", "tokens": "dropped: over the token budget",
            "facts": "dropped: over the fact budget", "unrelated": "dropped: not about the query",
            "duplicate": "dropped: the same fact ranks higher", "dropped": "dropped"}
_JSON = json.JSONEncoder(separators=(",", ":"), check_circular=False)


def _decision(reason: str) -> str:
    verdict, _, why = reason.partition(": ")
    return "kept" if verdict == "kept" else _DECISIONS.get(why, "dropped")


def _float32s(values: list[float | None]) -> str:
    """``values`` as base64 of little-endian float32s; a None (no value) becomes NaN, which
    the reader leaves out as it leaves out any value that is not finite."""
    try:
        packed = np.array(values, dtype="<f4")
    except TypeError:
        packed = np.array([math.nan if v is None else v for v in values], dtype="<f4")
    return base64.b64encode(packed.tobytes()).decode("ascii")


def build_explanation(ranked: Sequence[Candidate], reasons: dict[tuple[str, int], str],
                      kept: Sequence[Candidate], **facts: Any) -> str:
    """The JSON text of a recall_log row: ``facts``, the recalled ids, and one row per
    candidate (see the comment above ``LOG_FORMAT``; ``candidates`` reads it)."""
    handles = {c.key: i for i, c in enumerate(kept, start=1)}
    names: dict[tuple[str, ...], int] = {}
    decisions: dict[str, str] = {}
    values: list[float | None] = []
    rows: list[tuple[Any, ...]] = []
    for c in ranked:
        comps = c.components
        sig = names.setdefault(tuple(comps), len(names))
        values.append(c.score)
        values.extend(comps.values())
        handle = handles.get(c.key)
        if handle is not None:
            rows.append((c.item_id, handle, c.ranks, sig, "kept", c.turn_uids))
            continue
        reason = reasons.get(c.key, "dropped")
        decision = decisions.get(reason)
        if decision is None:
            decision = decisions[reason] = _decision(reason)
        rows.append((c.item_id, None, c.ranks, sig, decision, ()))
    return _JSON.encode({**facts, "format": LOG_FORMAT, "recalled": [c.item_id for c in kept],
                         "components": list(names), "values": _float32s(values),
                         "candidates": rows})


def _entry(item_id: str, handle: int | None, lists: dict[str, int], score: float | None,
           components: dict[str, float], decision: str, turn_uids: list[str]
           ) -> dict[str, Any]:
    return {
        "id": item_id, "kind": item_id.split(":", 1)[0], "handle": handle, "lists": lists,
        "score": score, "components": components,
        "decision": "kept" if decision == "kept" else "dropped",
        "reason": f"kept: rank {handle}" if decision == "kept" else _REASONS.get(decision,
                                                                                   "dropped"),
        "turn_uids": turn_uids,
    }


def _rounded(value: float, digits: int) -> float | None:
    return round(value, digits) if math.isfinite(value) else None


def candidates(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A logged recall's candidates (``body``: its parsed JSON, any format) as dicts:
    id, kind, handle, lists, score, components, decision, reason, turn_uids."""
    rows = body.get("candidates", [])
    if body.get("format") != LOG_FORMAT:
        return [_expand_old(row) for row in rows]
    names = body["components"]
    values = np.frombuffer(base64.b64decode(body["values"]), dtype="<f4").tolist()
    out, at = [], 0
    for item_id, handle, lists, sig, decision, turn_uids in rows:
        comp_names = names[sig]
        score = _rounded(values[at], SCORE_DIGITS)
        comps = {n: round(v, COMPONENT_DIGITS)
                 for n, v in zip(comp_names, values[at + 1:at + 1 + len(comp_names)],
                                 strict=True) if math.isfinite(v)}
        at += 1 + len(comp_names)
        out.append(_entry(item_id, handle, lists, score, comps, decision, turn_uids))
    return out


def _expand_old(row: Any) -> dict[str, Any]:
    """One candidate of a format 1 (a dict already) or format 2 row (components as JSON
    numbers in ``COMPONENTS`` order, null where missing)."""
    if isinstance(row, dict):
        return row
    item_id, handle, score, lists, comps, decision, turn_uids = row
    return _entry(item_id, handle, lists, score,
                  {c: v for c, v in zip(COMPONENTS, comps, strict=False) if v is not None},
                  decision, turn_uids)


def write_recall_log(conn: Connection, tenant: str, query_digest: str, strategy: str, body: str,
                     keep: int, *, log_id: int | None = None) -> int:
    """Append one explanation (``body``, from ``build_explanation``; with id ``log_id``,
    default the next) and keep only the tenant's newest ``keep``; returns its id."""
    with atomic(conn, tenants=(tenant,)):
        cur = conn.execute(
            "INSERT INTO recall_log (id, tenant, query_digest, at, strategy, explanation) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (log_id, tenant, query_digest, to_db(utcnow()), strategy, body))
        log_id = inserted_id(cur)
        conn.execute(
            "DELETE FROM recall_log WHERE tenant = ? AND id <= (SELECT id FROM recall_log "
            "WHERE tenant = ? ORDER BY id DESC LIMIT 1 OFFSET ?)", (tenant, tenant, int(keep)))
    return log_id


def recalls_of(conn: Connection, tenant: str, item_id: str,
               limit: int = 10) -> list[dict[str, Any]]:
    """The tenant's latest logged recalls that considered ``item_id``, newest first."""
    # Any format: a dict entry ("id":"belief:...") or a row (["belief:...").
    escaped = item_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    pattern = f'%"{escaped}"%'
    out = []
    for log_id, at, digest, body in conn.execute(
            "SELECT id, at, query_digest, explanation FROM recall_log WHERE tenant = ? AND "
            "explanation LIKE ? ESCAPE '\\' ORDER BY id DESC LIMIT ?",
            (tenant, pattern, int(limit))):
        entry = next((e for e in candidates(json.loads(body)) if e["id"] == item_id), None)
        if entry is not None:
            out.append({"log_id": log_id, "at": at, "query_digest": digest, **entry})
    return out


def last_log(conn: Connection, tenant: str, log_id: int | None = None) -> dict[str, Any] | None:
    """One logged recall (the newest by default) as a dict."""
    sql = "SELECT id, at, query_digest, strategy, explanation FROM recall_log WHERE tenant = ?"
    params: list[Any] = [tenant]
    if log_id is not None:
        sql += " AND id = ?"
        params.append(int(log_id))
    row = conn.execute(sql + " ORDER BY id DESC LIMIT 1", params).fetchone()
    if row is None:
        return None
    body = json.loads(row[4])
    body["candidates"] = candidates(body)
    for key in ("format", "components", "values"):
        body.pop(key, None)
    return {"log_id": row[0], "at": row[1], "query_digest": row[2], "strategy": row[3], **body}
