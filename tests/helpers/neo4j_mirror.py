"""The Neo4j mirror's test side: sinks on the Bolt test server, and the graph read back with
the driver itself (not through the sink), in the record representation."""

from __future__ import annotations

from typing import Any

import neo4j

from memory_core.backends import BackendURL, parse_backend_url
from memory_core.mirrors.neo4j import BELIEF_FIELDS, ENTITY_FIELDS, Neo4jSink
from tests.helpers.bolt_server import BoltServer, free_port

FIELDS = {"entity": ENTITY_FIELDS, "belief": BELIEF_FIELDS}


def bolt_url(server: BoltServer) -> BackendURL:
    return parse_backend_url("neo4j", "MNEMO_NEO4J_URL", server.url)


def make_sink(server: BoltServer, database: str | None = None, **kw: Any) -> Neo4jSink:
    return Neo4jSink(bolt_url(server), server.user, server.password,
                     database or server.database, **kw)


def make_down_sink(server: BoltServer) -> Neo4jSink:
    """A sink whose server is not there (a closed port); it gives up within a second."""
    url = parse_backend_url("neo4j", "MNEMO_NEO4J_URL", f"bolt://127.0.0.1:{free_port()}")
    return Neo4jSink(url, server.user, server.password, server.database,
                     connect_timeout_s=1, retry_s=0.5)


def query(server: BoltServer, cypher: str, database: str | None = None,
          **params: Any) -> list[dict[str, Any]]:
    with neo4j.GraphDatabase.driver(server.url, auth=(server.user, server.password)) as d, \
            d.session(database=database or server.database) as session:
        return session.run(cypher, **params).data()


def read_back(server: BoltServer, tenant: str,
              database: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Entities sent as records (nodes with a name) and belief edges, with their fields."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in query(server, "MATCH (n:Entity {tenant: $t}) WHERE n.name IS NOT NULL "
                   "RETURN properties(n) AS p", database, t=tenant):
        out[("entity", r["p"]["entity_id"])] = {f: r["p"].get(f) for f in ENTITY_FIELDS}
    for r in query(server, "MATCH (s {tenant: $t})-[e:BELIEF {tenant: $t}]->(o {tenant: $t}) "
                   "RETURN properties(e) AS p", database, t=tenant):
        out[("belief", r["p"]["belief_uid"])] = {f: r["p"].get(f) for f in BELIEF_FIELDS}
    return out


def graph_counts(server: BoltServer, tenant: str) -> dict[str, int]:
    """Nodes by label and edges of ``tenant`` (implicit nodes included)."""
    counts = {label: query(server, f"MATCH (n:{label} {{tenant: $t}}) RETURN count(n) AS n",
                           t=tenant)[0]["n"] for label in ("Entity", "Value")}
    counts["BELIEF"] = query(server, "MATCH ()-[e:BELIEF {tenant: $t}]->() "
                             "RETURN count(e) AS n", t=tenant)[0]["n"]
    return counts
