"""Personalised PageRank over a small weighted undirected graph (pure, no database).

The random walk restarts at the seeds with probability ``1 - damping``; a node with no edges
hands its mass back to the seeds. Power iteration stops after ``iterations`` or when the L1
change falls below ``tolerance``. Node count is bounded by whoever builds the graph.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Generic, TypeVar

import numpy as np

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
        adj = self.adj
        if a == b or ((a not in adj or b not in adj)
                      and not (self.add_node(a) and self.add_node(b))):
            return False
        to_b, to_a = adj[a], adj[b]
        to_b[b] = to_b.get(b, 0.0) + weight
        to_a[a] = to_a.get(a, 0.0) + weight
        return True


def personalized_pagerank(adj: Mapping[N, Mapping[N, float]],
                          seeds: Mapping[N, float], *, damping: float = 0.85,
                          iterations: int = 30, tolerance: float = 1e-6) -> dict[N, float]:
    """Stationary scores (summing to 1) of a walk restarting at ``seeds`` (weights > 0).

    Seeds absent from the graph are ignored; with no usable seed every score is 0. Power
    iteration on a dense transition matrix (numpy): recall's graphs have at most a few
    hundred nodes, where the matrix is cheap and a dict-based walk cost ~10 ms.
    """
    nodes = list(adj)
    pos = {n: i for i, n in enumerate(nodes)}
    restart = np.zeros(len(nodes))
    for n, w in seeds.items():
        if n in pos and w > 0:
            restart[pos[n]] += float(w)
    total = restart.sum()
    if total <= 0:
        return dict.fromkeys(adj, 0.0)
    restart /= total
    # trans[j, i]: the share of i's mass that moves to j in one step (one assignment: an
    # edge appears once per direction in ``adj``).
    trans = np.zeros((len(nodes), len(nodes)))
    for node, nbrs in adj.items():
        i = pos[node]
        for nbr, w in nbrs.items():
            trans[pos[nbr], i] = w
    out_weight = trans.sum(axis=0)
    dangling = out_weight <= 0
    if dangling.any():
        trans[:, ~dangling] /= out_weight[~dangling]
        scores = _walk_with_dangling(trans, restart, dangling, damping, iterations, tolerance)
    else:
        trans /= out_weight
        scores = _walk(trans, restart, damping, iterations, tolerance)
    return dict(zip(nodes, scores.tolist(), strict=True))


def _walk_with_dangling(trans: np.ndarray, restart: np.ndarray, dangling: np.ndarray,
                        damping: float, iterations: int, tolerance: float) -> np.ndarray:
    """Power iteration, tested after each step. A node without edges only appears when the
    node budget ran out mid-edge: it hands its mass back to the seeds, so the restart term
    changes every step."""
    scores = restart.copy()
    for _ in range(iterations):
        nxt = damping * (trans @ scores)
        nxt += ((1.0 - damping) + damping * scores[dangling].sum()) * restart
        delta = float(np.abs(nxt - scores).sum())
        scores = nxt
        if delta < tolerance:
            break
    return scores


def _walk(trans: np.ndarray, restart: np.ndarray, damping: float, iterations: int,
          tolerance: float) -> np.ndarray:
    """Power iteration without dangling nodes: the restart term is the same every step, and
    the steps do not depend on the convergence test, so all of them go into the rows of
    one array, then one vectorised test over every step finds where the stepwise loop
    (``_walk_with_dangling``) would have stopped.

    The numpy calls per step are most of the cost on recall's small graphs: three, each the
    cheapest form of the same arithmetic (``dot`` is the BLAS product ``@`` calls, with less
    dispatch; a vector of the damping multiplies faster than a float), so the scores are
    those of the stepwise loop to the bit (``tests/test_recall_ppr.py``).
    """
    base = (1.0 - damping) * restart
    damp = np.full(len(restart), damping)
    walk = np.empty((iterations + 1, len(restart)))
    walk[0] = restart
    for i in range(iterations):
        step = walk[i + 1]
        trans.dot(walk[i], out=step)
        np.multiply(step, damp, out=step)
        np.add(step, base, out=step)
    deltas = np.add.reduce(np.abs(np.diff(walk, axis=0)), axis=1)
    converged = np.flatnonzero(deltas < tolerance)
    return walk[int(converged[0]) + 1 if converged.size else iterations]
