"""The recall log in ``memory_ops.db``: why each candidate was kept or dropped.

A row holds the query's sha256 digest (never the query), the strategy, and JSON of ids,
ranks, components and decisions (never memory text), one compact row per candidate that
``expand`` turns back into a dict. It is written and trimmed to the last ``keep`` rows of
the tenant in one transaction (by ``log_writer``, off the chat path). The ids of recalled
episodes are what a worker later uses to reinforce them: the chat process never writes
the state db.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from memory_core.clock import to_db, utcnow
from memory_core.db.sqlite import Connection, atomic, inserted_id
from memory_core.recall.candidates import Candidate

# Compact rows: a recall weighs about 10 KB in the log, not 40 (and builds ~4x faster).
# Each candidate is [id, handle, score, lists, components (in COMPONENTS order), decision,
# turn_uids]; ``expand`` turns a row back into the dict readers see.
# Facts (recall/facts.py) log their own components after the evidence's; a row written
# before they existed has fewer values.
LOG_FORMAT = 2
COMPONENTS = ("rrf", "ppr", "recency", "confidence", "tier", "session", "time", "speaker",
              "diversity", "subject", "predicate", "joint", "entity", "keyword", "dense",
              "graph", "object", "direct_cap")
_DECISIONS = {"over the item budget": "items", "over the token budget": "tokens",
              "over the fact budget": "facts", "not about the query": "unrelated",
              "the same fact ranks higher": "duplicate"}
_REASONS = {"items": "dropped: over the item budget", "tokens": "dropped: over the token budget",
            "facts": "dropped: over the fact budget", "unrelated": "dropped: not about the query",
            "duplicate": "dropped: the same fact ranks higher", "dropped": "dropped"}


def _decision(reason: str) -> str:
    verdict, _, why = reason.partition(": ")
    return "kept" if verdict == "kept" else _DECISIONS.get(why, "dropped")


def _json_str(text: str) -> str:
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text)


def _json_num(value: float | None, digits: int) -> str:
    if value is None or not math.isfinite(value):
        return "null"
    return f"{value:.{digits}f}" if value else "0"


_COMPONENT_AT = {name: i for i, name in enumerate(COMPONENTS)}


def candidate_row(cand: Candidate, reason: str, handle: int | None) -> str:
    """One candidate's row as JSON text, written directly: a recall logs about 130 of them,
    and building lists for ``json.dumps`` cost twice as much. Components are written in
    ``COMPONENTS`` order, a missing one as null, up to the last one present (an evidence row
    has no fact components): ``_json_num``'s text, inlined (this runs ~2,000 times a
    recall)."""
    ranks = ",".join(f'"{name}":{int(rank)}' for name, rank in cand.ranks.items())
    values = ["null"] * len(COMPONENTS)
    last = -1
    for name, value in cand.components.items():
        at = _COMPONENT_AT.get(name)
        if at is not None and value is not None and math.isfinite(value):
            values[at] = f"{value:.4f}" if value else "0"
            if at > last:
                last = at
    comps = ",".join(values[:last + 1])
    turns = ",".join(map(_json_str, cand.turn_uids)) if handle is not None else ""
    return (f"[{_json_str(cand.item_id)},{'null' if handle is None else int(handle)},"
            f"{_json_num(cand.score, 6)},{{{ranks}}},[{comps}],\"{_decision(reason)}\","
            f"[{turns}]]")


def expand(row: Any) -> dict[str, Any]:
    """One logged candidate as a dict (either format)."""
    if isinstance(row, dict):  # format 1: already a dict
        return row
    item_id, handle, score, lists, comps, decision, turn_uids = row
    return {
        "id": item_id, "kind": item_id.split(":", 1)[0], "handle": handle, "lists": lists,
        "score": score, "components": {c: v for c, v in zip(COMPONENTS, comps, strict=False)
                                       if v is not None},
        "decision": "kept" if decision == "kept" else "dropped",
        "reason": f"kept: rank {handle}" if decision == "kept" else _REASONS.get(decision,
                                                                                   "dropped"),
        "turn_uids": turn_uids,
    }


def build_explanation(ranked: Sequence[Candidate], reasons: dict[tuple[str, int], str],
                      kept: Sequence[Candidate], **facts: Any) -> str:
    """The JSON text of a recall_log row: ``facts``, the recalled ids, and one compact row
    per candidate (see ``expand``)."""
    handles = {c.key: i for i, c in enumerate(kept, start=1)}
    head = json.dumps({**facts, "format": LOG_FORMAT, "recalled": [c.item_id for c in kept]},
                      separators=(",", ":"))
    rows = ",".join(candidate_row(c, reasons.get(c.key, "dropped"), handles.get(c.key))
                    for c in ranked)
    return f'{head[:-1]},"candidates":[{rows}]}}'


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
    # Either format: a dict entry ("id":"belief:...") or a row (["belief:...").
    escaped = item_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    pattern = f'%"{escaped}"%'
    out = []
    for log_id, at, digest, body in conn.execute(
            "SELECT id, at, query_digest, explanation FROM recall_log WHERE tenant = ? AND "
            "explanation LIKE ? ESCAPE '\\' ORDER BY id DESC LIMIT ?",
            (tenant, pattern, int(limit))):
        entry = next((e for e in map(expand, json.loads(body)["candidates"])
                      if e["id"] == item_id), None)
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
    body["candidates"] = [expand(c) for c in body["candidates"]]
    body.pop("format", None)
    return {"log_id": row[0], "at": row[1], "query_digest": row[2], "strategy": row[3], **body}
