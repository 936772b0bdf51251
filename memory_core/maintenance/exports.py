"""Per-tenant exports of a backup: JSONL and a GraphML belief graph, streamed.

They are read from the backup's own copies of the databases (a consistent snapshot that no
one else writes), a page of rows at a time, and written line by line, so memory stays flat
whatever the corpus size. Every query names its tenant: no row of another tenant can reach
a tenant's files. Files per tenant (``exports/<tenant>/``):

- ``beliefs.jsonl``: every belief, active or not (superseded, invalidated, conflict,
  pending review), with all bi-temporal fields;
- ``belief_graph.graphml``: entities as nodes, beliefs as directed edges carrying their
  validity and status (a literal object becomes a node of its own, ``literal=true``);
- ``episodes.jsonl`` (with the turn uids each covers), ``entity_merges.jsonl`` (the live
  ledger and its archive), ``audit_log.jsonl`` (from memory_ops.db).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from xml.sax.saxutils import escape, quoteattr

from memory_core.db.sqlite import Connection

PAGE = 1_000
FILES = ("beliefs.jsonl", "belief_graph.graphml", "episodes.jsonl", "entity_merges.jsonl",
         "audit_log.jsonl")

_BELIEFS = "SELECT * FROM beliefs WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?"
_EPISODES = (
    "SELECT e.*, (SELECT json_group_array(turn_uid) FROM (SELECT t.turn_uid FROM "
    "episode_turns et JOIN turns t ON t.id = et.turn_id WHERE et.episode_id = e.id "
    "ORDER BY t.id)) AS turn_uids FROM episodes e WHERE e.tenant = ? AND e.id > ? "
    "ORDER BY e.id LIMIT ?")
_MERGES = "SELECT * FROM {table} WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?"
_AUDIT = "SELECT * FROM audit_log WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?"
_ENTITIES = "SELECT * FROM entities WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?"
_EDGES = (
    "SELECT b.*, s.entity_id IS NOT NULL AS subject_known, "
    "o.entity_id IS NOT NULL AS object_known FROM beliefs b "
    "LEFT JOIN entities s ON s.tenant = b.tenant AND s.entity_id = b.subject_id "
    "LEFT JOIN entities o ON o.tenant = b.tenant AND o.entity_id = b.object_entity_id "
    "WHERE b.tenant = ? AND b.id > ? ORDER BY b.id LIMIT ?")


def pages(conn: Connection, sql: str, tenant: str) -> Iterator[dict[str, Any]]:
    """Rows of ``sql`` (``tenant = ? AND id > ? ... ORDER BY id LIMIT ?``), page by page."""
    last = 0
    while True:
        cur = conn.execute(sql, (tenant, last, PAGE))
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        if not rows:
            return
        for row in rows:
            yield dict(zip(names, row, strict=True))
        last = rows[-1][0]


def _jsonl(path: Path, rows: Iterator[dict[str, Any]]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True))
            f.write("\n")
            n += 1
    return n


def _episodes(conn: Connection, tenant: str) -> Iterator[dict[str, Any]]:
    for row in pages(conn, _EPISODES, tenant):
        row["turn_uids"] = json.loads(row["turn_uids"])
        yield row


def _merges(conn: Connection, tenant: str) -> Iterator[dict[str, Any]]:
    for ledger, table in (("live", "entity_merges"), ("archive", "entity_merges_archive")):
        for row in pages(conn, _MERGES.format(table=table), tenant):
            row["ledger"] = ledger
            yield row


def _audit(conn: Connection, tenant: str) -> Iterator[dict[str, Any]]:
    for row in pages(conn, _AUDIT, tenant):
        with contextlib.suppress(ValueError):  # not JSON: kept as stored
            row["detail"] = json.loads(row["detail"]) if row["detail"] else None
        yield row


def export_tenant(state: Connection, ops: Connection, tenant: str, folder: Path) -> dict[str, int]:
    """Write the tenant's export files into ``folder``; the row counts written."""
    folder.mkdir(parents=True, exist_ok=True)
    counts = {
        "beliefs": _jsonl(folder / "beliefs.jsonl", pages(state, _BELIEFS, tenant)),
        "episodes": _jsonl(folder / "episodes.jsonl", _episodes(state, tenant)),
        "entity_merges": _jsonl(folder / "entity_merges.jsonl", _merges(state, tenant)),
        "audit_log": _jsonl(folder / "audit_log.jsonl", _audit(ops, tenant)),
    }
    with open(folder / "belief_graph.graphml", "w", encoding="utf-8") as f:
        counts["graph_nodes"], counts["graph_edges"] = write_graphml(f, state, tenant)
    return counts


# GraphML: (key id, for, attr.name, attr.type)
_NODE_KEYS = (("n_name", "name", "string"), ("n_kind", "kind", "string"),
              ("n_literal", "literal", "boolean"), ("n_known", "known", "boolean"))
_EDGE_KEYS = (("e_belief_uid", "belief_uid", "string"), ("e_predicate", "predicate", "string"),
              ("e_object", "object_text", "string"), ("e_negated", "negated", "boolean"),
              ("e_status", "status", "string"), ("e_source", "source", "string"),
              ("e_confidence", "confidence", "double"),
              ("e_valid_from", "valid_from", "string"), ("e_valid_to", "valid_to", "string"),
              ("e_stated_valid_to", "stated_valid_to", "string"),
              ("e_recorded_at", "recorded_at", "string"),
              ("e_retired_at", "retired_at", "string"), ("e_turn_uid", "turn_uid", "string"),
              ("e_expires_at", "expires_at", "string"))
# Characters XML 1.0 cannot carry, even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(_NOT_XML.sub("\ufffd", str(value)))


def _attr(value: str) -> str:
    return quoteattr(_NOT_XML.sub("\ufffd", value))


def _data(f: IO[str], pairs: tuple[tuple[str, Any], ...]) -> None:
    for key, value in pairs:
        if value is not None:
            f.write(f'<data key="{key}">{_text(value)}</data>')


def _node(f: IO[str], node_id: str, name: Any, kind: Any, *, literal: bool = False,
          known: bool = True) -> None:
    f.write(f"    <node id={_attr(node_id)}>")
    _data(f, (("n_name", name), ("n_kind", kind), ("n_literal", literal), ("n_known", known)))
    f.write("</node>\n")


def write_graphml(f: IO[str], conn: Connection, tenant: str) -> tuple[int, int]:
    """The tenant's belief graph as GraphML; returns (nodes, edges)."""
    f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n')
    for key, name, kind in _NODE_KEYS:
        f.write(f'  <key id="{key}" for="node" attr.name="{name}" attr.type="{kind}"/>\n')
    for key, name, kind in _EDGE_KEYS:
        f.write(f'  <key id="{key}" for="edge" attr.name="{name}" attr.type="{kind}"/>\n')
    f.write(f'  <graph id={_attr(tenant)} edgedefault="directed">\n')
    nodes = edges = 0
    for row in pages(conn, _ENTITIES, tenant):
        _node(f, f"e:{row['entity_id']}", row["name"], row["kind"])
        nodes += 1
    unknown: set[str] = set()  # ids beliefs name but no entity row has (normally none)
    for row in pages(conn, _EDGES, tenant):
        nodes += _edge_nodes(f, row, unknown)
        target = (f"e:{row['object_entity_id']}" if row["object_entity_id"]
                  else f"v:{row['belief_uid']}")
        f.write(f"    <edge id={_attr('b:' + row['belief_uid'])} "
                f"source={_attr('e:' + row['subject_id'])} target={_attr(target)}>")
        _data(f, tuple((key, bool(row[name]) if name == "negated" else row[name])
                       for key, name, _ in _EDGE_KEYS))
        f.write("</edge>\n")
        edges += 1
    f.write("  </graph>\n</graphml>\n")
    return nodes, edges


def _edge_nodes(f: IO[str], row: dict[str, Any], unknown: set[str]) -> int:
    """The nodes an edge needs that the entity pass did not write; how many were written."""
    written = 0
    ends = [(row["subject_id"], row["subject_known"])]
    if row["object_entity_id"]:
        ends.append((row["object_entity_id"], row["object_known"]))
    for entity_id, known in ends:
        if not known and entity_id not in unknown:
            unknown.add(entity_id)
            _node(f, f"e:{entity_id}", entity_id, None, known=False)
            written += 1
    if not row["object_entity_id"]:
        _node(f, f"v:{row['belief_uid']}", row["object_text"], "literal", literal=True)
        written += 1
    return written
