"""Personalised PageRank over a small weighted undirected graph (pure, no database).

The random walk restarts at the seeds with probability ``1 - damping``; a node with no edges
hands its mass back to the seeds. Power iteration stops after ``iterations`` or when the L1
change falls below ``tolerance``. Node count is bounded by whoever builds the graph.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Generic, TypeVar

N = TypeVar("N", bound=Hashable)
Node = tuple[str, Any]  # recall's nodes: ("entity", id), ("belief", row_id), ("episode", row_id)


class Graph(Generic[N]):
    """An undirected weighted graph with a node budget."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.adj: dict[N, dict[N, float]] = {}

    def __contains__(self, node: object) -> bool:
        return node in self.adj

    def __len__(self) -> int:
        return len(self.adj)

    @property
    def full(self) -> bool:
        return len(self.adj) >= self.max_nodes

    def add_node(self, node: N) -> bool:
        """Add ``node``; False when the budget is spent (the node is not added)."""
        if node in self.adj:
            return True
        if self.full:
            return False
        self.adj[node] = {}
        return True

    def add_edge(self, a: N, b: N, weight: float = 1.0) -> bool:
        """Add (or strengthen) the edge a-b; False when a node could not be added."""
        if a == b or not (self.add_node(a) and self.add_node(b)):
            return False
        self.adj[a][b] = self.adj[a].get(b, 0.0) + weight
        self.adj[b][a] = self.adj[b].get(a, 0.0) + weight
        return True


def personalized_pagerank(adj: Mapping[N, Mapping[N, float]],
                          seeds: Mapping[N, float], *, damping: float = 0.85,
                          iterations: int = 30, tolerance: float = 1e-6) -> dict[N, float]:
    """Stationary scores (summing to 1) of a walk restarting at ``seeds`` (weights > 0).

    Seeds absent from the graph are ignored; with no usable seed every score is 0.
    """
    restart = {n: float(w) for n, w in seeds.items() if n in adj and w > 0}
    total = sum(restart.values())
    if total <= 0:
        return dict.fromkeys(adj, 0.0)
    restart = {n: w / total for n, w in restart.items()}
    out_weight = {n: sum(nbrs.values()) for n, nbrs in adj.items()}
    scores = dict(restart)
    for _ in range(iterations):
        nxt: dict[N, float] = dict.fromkeys(restart, 0.0)
        dangling = 0.0
        for node, mass in scores.items():
            if mass == 0.0:
                continue
            weight = out_weight[node]
            if weight <= 0:
                dangling += mass
                continue
            share = damping * mass / weight
            for nbr, w in adj[node].items():
                nxt[nbr] = nxt.get(nbr, 0.0) + share * w
        back = (1.0 - damping) + damping * dangling
        for node, r in restart.items():
            nxt[node] += back * r
        delta = sum(abs(nxt.get(n, 0.0) - scores.get(n, 0.0)) for n in set(nxt) | set(scores))
        scores = nxt
        if delta < tolerance:
            break
    return {n: scores.get(n, 0.0) for n in adj}
