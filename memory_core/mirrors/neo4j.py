"""The Neo4j mirror: current belief edges between entity nodes, tenant by tenant.

Graph shape (plain Neo4j 5 Cypher, no plugin; the official ``neo4j`` driver):
- ``(:Entity {tenant, entity_id, name, kind, aliases, created_at, updated_at})``; a node a
  belief needs before its entity record arrived has only ``tenant`` and ``entity_id``;
- ``(:Value {tenant, key})`` for a literal object (a belief's object that is no entity);
- ``(subject)-[:BELIEF {tenant, belief_uid, predicate, status, valid_from, valid_to,
  recorded_at, ...every belief field}]->(object)`` for each *live* belief (``is_live``:
  active or conflict, not ended). Invalidate and supersede arrive as upserts of a dead
  belief: its edge is deleted, and a literal node left without edges goes with it.
``tenant`` is in every node and relationship key and in every MATCH/MERGE, so nothing crosses
tenants; the uniqueness constraints are on (tenant, key).

A batch is one transaction (tenant clears first, a page per transaction): UNWIND lists sorted
by key, so concurrent workers take node locks in the same order and do not deadlock (the
driver's managed transactions retry a transient deadlock anyway); MERGE on keys and ``SET +=``
of every field, so applying a batch twice, or after a crash, ends in the same graph.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import neo4j
import structlog
from neo4j import exceptions as neo4j_errors

from memory_core.backends import BackendURL
from memory_core.errors import ConfigurationError
from memory_core.mirrors.sink import FIELDS, MirrorError, MirrorUnavailable, Record, is_live
from memory_core.settings import Settings

log = structlog.get_logger("mnemo.mirror")

NAME = "neo4j"
READ_PAGE = 2_000  # edges read back per query (reconcile)
CLEAR_PAGE = 5_000  # edges or nodes deleted per transaction by a tenant clear
CONSTRAINT_RETRIES = 5  # a batch that lost a MERGE race runs again (see _write)
ENTITY_FIELDS = FIELDS["entity"]
BELIEF_FIELDS = FIELDS["belief"]

# Composite uniqueness constraints and a relationship index: Neo4j 5 Community has both.
SCHEMA = (
    "CREATE CONSTRAINT mnemo_entity_key IF NOT EXISTS FOR (n:Entity) "
    "REQUIRE (n.tenant, n.entity_id) IS UNIQUE",
    "CREATE CONSTRAINT mnemo_value_key IF NOT EXISTS FOR (n:Value) "
    "REQUIRE (n.tenant, n.key) IS UNIQUE",
    "CREATE INDEX mnemo_belief_key IF NOT EXISTS FOR ()-[e:BELIEF]-() "
    "ON (e.tenant, e.belief_uid)",
)

# Tombstoned or dead beliefs, and live ones whose endpoints moved (a merge can rewire a
# belief and keep its uid): their edges go; the literal nodes they ended on are returned.
_DROP_EDGES = (
    "UNWIND $uids AS uid MATCH ()-[e:BELIEF {tenant: $tenant, belief_uid: uid}]->(o) "
    "DELETE e RETURN o.key AS key")
_DROP_MOVED = (
    "UNWIND $rows AS r MATCH (s)-[e:BELIEF {tenant: $tenant, belief_uid: r.uid}]->(o) "
    "WHERE coalesce(s.entity_id, '') <> r.subject OR coalesce(o.entity_id, '') <> r.entity "
    "OR coalesce(o.key, '') <> r.value DELETE e RETURN o.key AS key")
_DROP_ENTITIES = (
    "UNWIND $ids AS id MATCH (x:Entity {tenant: $tenant, entity_id: id}) DETACH DELETE x")
_MERGE_ENTITIES = (
    "UNWIND $nodes AS n MERGE (x:Entity {tenant: $tenant, entity_id: n.id}) SET x += n.props")
_MERGE_VALUES = "UNWIND $keys AS k MERGE (:Value {tenant: $tenant, key: k})"
_MERGE_TO_ENTITY = (
    "UNWIND $rows AS r "
    "MATCH (s:Entity {tenant: $tenant, entity_id: r.subject}) "
    "MATCH (o:Entity {tenant: $tenant, entity_id: r.entity}) "
    "MERGE (s)-[e:BELIEF {tenant: $tenant, belief_uid: r.uid}]->(o) SET e += r.props")
_MERGE_TO_VALUE = (
    "UNWIND $rows AS r "
    "MATCH (s:Entity {tenant: $tenant, entity_id: r.subject}) "
    "MATCH (o:Value {tenant: $tenant, key: r.value}) "
    "MERGE (s)-[e:BELIEF {tenant: $tenant, belief_uid: r.uid}]->(o) SET e += r.props")
_DROP_LONE_VALUES = (
    "UNWIND $keys AS k MATCH (v:Value {tenant: $tenant, key: k}) "
    "OPTIONAL MATCH (v)-[r]-() WITH v, count(r) AS n WHERE n = 0 DELETE v")
_CLEAR_EDGES = (
    "MATCH ()-[e:BELIEF {tenant: $tenant}]->() WITH e LIMIT $limit DELETE e "
    "RETURN count(*) AS n")
_CLEAR_NODES = (
    "MATCH (v:{label} {{tenant: $tenant}}) WITH v LIMIT $limit DETACH DELETE v "
    "RETURN count(*) AS n")
_READ_EDGES = (
    "MATCH ()-[e:BELIEF {tenant: $tenant}]->() WHERE e.belief_uid > $after "
    "RETURN properties(e) AS p ORDER BY e.belief_uid LIMIT $limit")
_TENANTS = "MATCH ()-[e:BELIEF]->() RETURN DISTINCT e.tenant AS tenant"


def neo4j_driver(url: BackendURL, user: str, password: str | None, *,
                 connect_timeout_s: float = 5.0, retry_s: float = 15.0) -> neo4j.Driver:
    """A driver built from the parsed URL's parts (never from text as entered). It connects
    lazily; ``retry_s`` bounds how long a managed transaction retries a transient error."""
    if url.kind != "neo4j":
        raise ConfigurationError(f"{url.canonical} is not a Neo4j URL")
    auth = (user, password) if password is not None else None
    return neo4j.GraphDatabase.driver(
        f"{url.scheme}://{url.host_for_url}:{url.port}", auth=auth,
        connection_timeout=connect_timeout_s, max_transaction_retry_time=retry_s)


def _edge_row(r: Record) -> dict[str, Any]:
    row = r.row
    assert row is not None
    entity = row["object_entity_id"]
    return {"uid": r.key, "subject": row["subject_id"], "entity": entity or "",
            "value": "" if entity else row["object_text"],
            "props": {f: row[f] for f in BELIEF_FIELDS}}


@dataclass
class _Batch:
    """What one batch does to one tenant's graph; every list sorted by key (lock order)."""

    tenant: str
    entities: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> props
    gone_entities: set[str] = field(default_factory=set)
    live: dict[str, Record] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)

    def add(self, r: Record) -> None:
        if r.kind == "entity":
            self.gone_entities.discard(r.key)
            self.entities.pop(r.key, None)
            if r.row is None:
                self.gone_entities.add(r.key)
            else:
                self.entities[r.key] = {f: r.row[f] for f in ENTITY_FIELDS}
        elif r.kind == "belief":
            self.live.pop(r.key, None)
            self.dead.discard(r.key)
            if r.row is not None and is_live(r.row):
                self.live[r.key] = r
            else:
                self.dead.add(r.key)

    def run(self, tx: neo4j.ManagedTransaction) -> None:
        t = self.tenant
        rows = sorted((_edge_row(r) for r in self.live.values()),
                      key=lambda e: (e["subject"], e["entity"], e["value"], e["uid"]))
        emptied: set[str] = set()
        if self.dead:
            emptied.update(_keys(tx.run(_DROP_EDGES, tenant=t, uids=sorted(self.dead))))
        if rows:
            emptied.update(_keys(tx.run(_DROP_MOVED, tenant=t, rows=rows)))
        if self.gone_entities:
            tx.run(_DROP_ENTITIES, tenant=t, ids=sorted(self.gone_entities)).consume()
        nodes = {e: {"entity_id": e} for r in rows for e in (r["subject"], r["entity"]) if e}
        nodes.update(self.entities)
        if nodes:
            tx.run(_MERGE_ENTITIES, tenant=t, nodes=[
                {"id": k, "props": v} for k, v in sorted(nodes.items())]).consume()
        values = sorted({r["value"] for r in rows if not r["entity"]})
        if values:
            tx.run(_MERGE_VALUES, tenant=t, keys=values).consume()
        for query, part in ((_MERGE_TO_ENTITY, [r for r in rows if r["entity"]]),
                            (_MERGE_TO_VALUE, [r for r in rows if not r["entity"]])):
            if part:
                tx.run(query, tenant=t, rows=part).consume()
        if emptied:
            tx.run(_DROP_LONE_VALUES, tenant=t, keys=sorted(emptied)).consume()


def _keys(result: neo4j.Result) -> set[str]:
    return {r["key"] for r in result if r["key"] is not None}


class Neo4jSink:
    """``MirrorSink`` over a Neo4j database (see the module)."""

    name = NAME
    kinds = frozenset({"tenant", "entity", "belief"})
    live_only = True  # holds current facts only (reconcile compares with is_live beliefs)

    def __init__(self, url: BackendURL, user: str, password: str | None, database: str, *,
                 connect_timeout_s: float = 5.0, retry_s: float = 15.0) -> None:
        self.url = url
        self.user = user
        self.database = database
        self.driver = neo4j_driver(url, user, password, connect_timeout_s=connect_timeout_s,
                                   retry_s=retry_s)
        self._schema_ready = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Neo4jSink:
        url = settings.neo4j_backend
        if url is None:
            raise ConfigurationError("the Neo4j mirror needs MNEMO_NEO4J_URL")
        return cls(url, settings.neo4j_user, settings.neo4j_password, settings.neo4j_database)

    @property
    def identity(self) -> str:
        """Canonical and password-free: ``bolt://host:port/database as user``."""
        return f"{self.url.canonical}/{self.database} as {self.user}"

    def __repr__(self) -> str:
        return f"Neo4jSink({self.identity})"

    # --- MirrorSink -------------------------------------------------------------------------

    def open(self) -> None:
        """Create the constraints and the index if missing (``IF NOT EXISTS``: idempotent)."""
        with self._errors("open its schema"), self.driver.session(
                database=self.database) as session:
            for statement in SCHEMA:
                session.run(statement).consume()
        self._schema_ready = True

    def apply(self, records: Sequence[Record]) -> None:
        """Tenant clears first (a page per transaction), then every other record in one
        transaction, tenant by tenant in name order."""
        if not records:
            return
        if not self._schema_ready:
            self.open()
        batches: dict[str, _Batch] = {}
        for r in records:
            if r.kind == "tenant":
                self.clear_tenant(r.tenant)
                batches.pop(r.tenant, None)  # records before the clear are cleared too
            elif r.kind in ("entity", "belief"):
                batches.setdefault(r.tenant, _Batch(r.tenant)).add(r)
        if batches:
            ordered = [batches[t] for t in sorted(batches)]

            def run(tx: neo4j.ManagedTransaction) -> None:
                for batch in ordered:
                    batch.run(tx)

            with self._errors(f"apply a batch of {len(records)} records"):
                self._write(run)

    def close(self) -> None:
        self.driver.close()
        self._schema_ready = False

    # --- tenant clears ----------------------------------------------------------------------

    def clear_tenant_edges(self, tenant: str) -> int:
        """Delete every belief edge of ``tenant`` and its literal nodes, a page per
        transaction; other tenants are untouched. Returns the edges deleted. Entity nodes
        stay (``clear_tenant`` removes them too)."""
        with self._errors(f"clear the edges of tenant {tenant!r}"):
            edges = self._drain(_CLEAR_EDGES, tenant)
            self._drain(_CLEAR_NODES.format(label="Value"), tenant)
        log.info("mirror_tenant_edges_cleared", sink=self.name, tenant=tenant, edges=edges)
        return edges

    def clear_tenant(self, tenant: str) -> None:
        """Everything of ``tenant``: its edges, then its nodes (a ``tenant`` record)."""
        self.clear_tenant_edges(tenant)
        with self._errors(f"clear tenant {tenant!r}"):
            self._drain(_CLEAR_NODES.format(label="Entity"), tenant)

    def _drain(self, query: str, tenant: str) -> int:
        total = 0
        while n := self._write(lambda tx: tx.run(query, tenant=tenant, limit=CLEAR_PAGE)
                               .single(strict=True)["n"]):
            total += int(n)
        return total

    # --- what reconcile reads (memory_core.mirrors.reconcile.MirrorReader) ----------------

    def held_beliefs(self, tenant: str) -> Iterator[list[Mapping[str, Any]]]:
        """The belief fields of every edge of ``tenant``, a page at a time in uid order."""
        after = ""
        with self._errors(f"read the edges of tenant {tenant!r}"):
            while page := [r["p"] for r in self._read(_READ_EDGES, tenant=tenant,
                                                         after=after, limit=READ_PAGE)]:
                yield [{f: p.get(f) for f in BELIEF_FIELDS} for p in page]
                after = page[-1]["belief_uid"]

    def held_tenants(self) -> set[str]:
        with self._errors("list its tenants"):
            records = self._read(_TENANTS)
        return {r["tenant"] for r in records}

    # --- internals --------------------------------------------------------------------------

    def _write(self, work: Callable[[neo4j.ManagedTransaction], Any]) -> Any:
        """``work`` in one managed transaction (the driver retries transient errors such as
        a deadlock). Two workers MERGEing the same new node at once: Neo4j serialises them on
        the constraint's lock, an engine with optimistic concurrency fails the loser with a
        constraint violation instead; the work is idempotent, so it runs again (the node
        exists by then)."""
        for attempt in range(CONSTRAINT_RETRIES + 1):
            try:
                with self.driver.session(database=self.database) as session:
                    return session.execute_write(work)
            except neo4j_errors.ConstraintError:
                if attempt == CONSTRAINT_RETRIES:
                    raise
                time.sleep(0.05 * (attempt + 1) * (1 + random.random()))
        raise AssertionError("unreachable")

    def _read(self, query: str, **params: Any) -> list[neo4j.Record]:
        """One read, not retried: reconcile is run by an operator (or the backup schedule's
        check), who had rather hear at once that the mirror is down."""
        with self.driver.session(database=self.database,
                                 default_access_mode=neo4j.READ_ACCESS) as session:
            return list(session.run(query, **params))

    def _errors(self, what: str) -> contextlib.AbstractContextManager[None]:
        return _wrapped(self.identity, what)


@contextlib.contextmanager
def _wrapped(identity: str, what: str) -> Iterator[None]:
    """Driver errors become MirrorUnavailable (retry) or MirrorError, naming the mirror by
    its canonical identity and the error's type and code, never the server's text."""
    try:
        yield
    except (neo4j_errors.Neo4jError, neo4j_errors.DriverError, OSError) as e:
        code = getattr(e, "code", None)
        detail = type(e).__name__ + (f", {code}" if code else "")
        if isinstance(e, neo4j_errors.AuthError):
            raise MirrorError(f"Neo4j mirror at {identity} refused to {what} ({detail}): "
                              "check MNEMO_NEO4J_USER and MNEMO_NEO4J_PASSWORD") from None
        if isinstance(e, neo4j_errors.ClientError):
            raise MirrorError(f"Neo4j mirror at {identity} refused to {what} ({detail}): "
                              "check the server log and MNEMO_NEO4J_DATABASE") from None
        raise MirrorUnavailable(f"Neo4j mirror at {identity} could not {what} ({detail}): "
                                "the shipping is retried; check that the server is up and "
                                "reachable") from None
