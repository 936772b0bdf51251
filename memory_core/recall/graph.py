"""The local ego graph a recall walks: entities, the beliefs joining them, their episodes.

Nodes are ``("entity", entity_id)``, ``("belief", row_id)`` and ``("episode", row_id)``. A
belief links its subject and its object entity; an episode links the beliefs drawn from its
turns. The graph grows breadth-first from the seeds (the query's entities and the entities of
the best direct hits; the hub ``user`` is seeded weakly but not expanded), at most
``edges_per_entity`` beliefs per entity, until ``max_nodes`` is reached, so its cost is
bounded whatever the size of memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memory_core.db.sqlite import Connection
from memory_core.model.tenants import HUB
from memory_core.recall.candidates import (
    Candidate,
    Scope,
    belief_filter,
    beliefs_touching_each,
    episode_filter,
    param_marks,
)
from memory_core.recall.ppr import Graph, Node, personalized_pagerank
from memory_core.recall.strategy import RecallStrategy

MAX_HOPS = 2
# The walk reads the beliefs of this many frontier entities per statement: fewer round trips
# than one per entity, without reading a whole frontier when the graph fills early.
ENTITIES_PER_STATEMENT = 16
BELIEF_COLUMNS = "b.id, b.subject_id, b.object_entity_id, b.turn_uid"


def _add_belief(graph: Graph[Node], row_id: int, subject: str | None, obj: str | None) -> None:
    node = ("belief", row_id)
    if subject:
        graph.add_edge(("entity", subject), node)
    if obj:
        graph.add_edge(node, ("entity", obj))


def _expand(conn: Connection, graph: Graph[Node], scope: Scope, seeds: Iterable[str],
            per_entity: int) -> dict[str, int]:
    """Breadth-first over entities, a statement per few entities, until the graph is full;
    returns ``turn_uid -> belief row id`` for linking."""
    frontier = list(dict.fromkeys(seeds))
    seen = set(frontier)
    turn_of: dict[str, int] = {}
    for _hop in range(MAX_HOPS):
        nxt: list[str] = []
        found: dict[str, list[tuple[Any, ...]]] = {}
        for i, entity_id in enumerate(frontier):
            if graph.full:
                return turn_of
            if i % ENTITIES_PER_STATEMENT == 0:  # the next few entities' beliefs at once
                found = beliefs_touching_each(
                    conn, scope, frontier[i:i + ENTITIES_PER_STATEMENT], per_entity)
            for row_id, subject, obj, turn_uid in found.get(entity_id, ()):
                _add_belief(graph, row_id, subject, obj)
                if turn_uid:
                    turn_of.setdefault(turn_uid, row_id)
                for ent in (subject, obj):
                    if ent and ent not in seen and ent != HUB:
                        seen.add(ent)
                        nxt.append(ent)
        frontier = nxt
    return turn_of


def _link_episodes(conn: Connection, graph: Graph[Node], scope: Scope,
                   turn_of: dict[str, int]) -> None:
    """Connect beliefs to the visible episodes holding the turns they came from."""
    uids = list(turn_of)[: graph.max_nodes]
    if not uids:
        return
    if scope.held is not None:
        for episode_id, turn_uid in scope.held.episodes_of_turns(scope, uids):
            graph.add_edge(("belief", turn_of[turn_uid]), ("episode", episode_id))
        return
    cond, params = episode_filter(scope)
    for episode_id, turn_uid in conn.execute(
            "SELECT e.id, t.turn_uid FROM turns t CROSS JOIN episode_turns et ON et.turn_id = "
            f"t.id CROSS JOIN episodes e ON e.id = et.episode_id WHERE t.tenant = ? AND "
            f"t.turn_uid IN ({param_marks(len(uids))}) AND {cond} ORDER BY t.turn_uid, e.id",
            [scope.tenant, *uids, *params]):
        graph.add_edge(("belief", turn_of[turn_uid]), ("episode", episode_id))


def _link_candidates(conn: Connection, graph: Graph[Node], scope: Scope,
                     pool: Sequence[Candidate]) -> None:
    """Put direct hits in the graph: beliefs by their entities, episodes by their beliefs."""
    episode_of: dict[str, int] = {}
    for cand in pool:
        if cand.kind == "belief":
            _add_belief(graph, cand.row_id, cand.subject_id, cand.object_entity_id)
        elif cand.kind == "episode":
            for uid in cand.turn_uids:
                episode_of.setdefault(uid, cand.row_id)
    uids = list(episode_of)[: graph.max_nodes]
    if not uids:
        return
    cond, params = belief_filter(scope)
    rows = scope.held.beliefs_of_turns(scope, uids) if scope.held is not None else (
        conn.execute(f"SELECT {BELIEF_COLUMNS} FROM beliefs b "
                     f"WHERE {cond} AND b.turn_uid IN ({param_marks(len(uids))}) "
                     "ORDER BY b.turn_uid, b.id", [*params, *uids]))
    for row_id, subject, obj, turn_uid in rows:
        _add_belief(graph, row_id, subject, obj)
        graph.add_edge(("belief", row_id), ("episode", episode_of[turn_uid]))


def ego_pagerank(conn: Connection, scope: Scope, strategy: RecallStrategy,
                 query_entities: Sequence[str], top: Sequence[Candidate]) -> dict[Node, float]:
    """PPR scores of belief and episode nodes around the seeds (empty when there are none)."""
    graph: Graph[Node] = Graph(strategy.ppr_max_nodes)
    seeds: dict[Node, float] = {("entity", e): 1.0 for e in query_entities}
    for cand in top:
        for ent in (cand.subject_id, cand.object_entity_id):
            if ent and ent != HUB:
                seeds.setdefault(("entity", ent), 0.5)
    seeds[("entity", HUB)] = strategy.ppr_hub_weight
    entity_seeds = [n[1] for n in seeds if n[1] != HUB]
    _link_candidates(conn, graph, scope, top)
    # The hub is a seed but is not expanded: it touches every subject (ego anchors), so its
    # neighbourhood is all of memory, not the local graph of this query.
    turn_of = _expand(conn, graph, scope, entity_seeds, strategy.ppr_edges_per_entity)
    _link_episodes(conn, graph, scope, turn_of)
    for cand in top:  # a direct hit seeds the walk too, weakly
        seeds.setdefault(cand.key, 0.3)
    if len(graph) == 0:
        return {}
    scores = personalized_pagerank(graph.adj, seeds, damping=strategy.ppr_damping,
                                   iterations=strategy.ppr_iterations)
    return {n: s for n, s in scores.items() if n[0] in ("belief", "episode") and s > 0}
