"""The graph walk's power iteration runs every step, then finds where it converged: the
scores must be those of the plain loop that tests after each step, to the bit (fusion ranks
the graph list by them, and ties in PageRank are common)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memory_core.recall.ppr import Graph, personalized_pagerank


def _stepwise(adj: dict[int, dict[int, float]], seeds: dict[int, float], damping: float,
              iterations: int, tolerance: float) -> dict[int, float]:
    """The plain loop: one step, then the L1 test, stop when below ``tolerance``; a node
    without edges hands its mass back to the seeds."""
    nodes = list(adj)
    pos = {n: i for i, n in enumerate(nodes)}
    restart = np.zeros(len(nodes))
    for n, w in seeds.items():
        if n in pos and w > 0:
            restart[pos[n]] += float(w)
    restart /= restart.sum()
    trans = np.zeros((len(nodes), len(nodes)))
    for node, nbrs in adj.items():
        for nbr, w in nbrs.items():
            trans[pos[nbr], pos[node]] = w
    out_weight = trans.sum(axis=0)
    dangling = out_weight <= 0
    trans[:, ~dangling] /= out_weight[~dangling]
    scores = restart.copy()
    for _ in range(iterations):
        nxt = damping * (trans @ scores)
        nxt += ((1.0 - damping) + damping * scores[dangling].sum()) * restart
        delta = float(np.abs(nxt - scores).sum())
        scores = nxt
        if delta < tolerance:
            break
    return dict(zip(nodes, scores.tolist(), strict=True))


def _graph(rng: random.Random, nodes: int, edges: int) -> dict[int, dict[int, float]]:
    graph: Graph[int] = Graph(nodes)
    for i in range(1, nodes):  # connected: no node without edges
        graph.add_edge(i, rng.randrange(i))
    for _ in range(edges):
        graph.add_edge(rng.randrange(nodes), rng.randrange(nodes), rng.choice((1.0, 2.0)))
    return graph.adj


@pytest.mark.parametrize("tolerance", [1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 0.0])
@pytest.mark.parametrize("iterations", [0, 1, 7, 30])
def test_the_walk_stops_where_the_stepwise_loop_stops(tolerance: float,
                                                      iterations: int) -> None:
    rng = random.Random(f"{tolerance}-{iterations}")
    for size in (2, 5, 48, 120):
        adj = _graph(rng, size, size * 2)
        seeds = {n: rng.choice((1.0, 0.5, 0.3)) for n in rng.sample(list(adj), min(4, size))}
        got = personalized_pagerank(adj, seeds, damping=0.85, iterations=iterations,
                                    tolerance=tolerance)
        assert got == _stepwise(adj, seeds, 0.85, iterations, tolerance)  # bit for bit


def test_a_node_left_without_edges_hands_its_mass_back_to_the_seeds() -> None:
    # The node budget ran out mid-edge: node 3 was added, its neighbour was not.
    graph: Graph[int] = Graph(4)
    graph.add_edge(0, 1)
    graph.add_edge(1, 2)
    graph.add_node(3)
    assert not graph.add_edge(3, 4)
    seeds = {0: 1.0, 3: 0.5}
    got = personalized_pagerank(graph.adj, seeds)
    assert got == _stepwise(graph.adj, seeds, 0.85, 30, 1e-6)
    assert got[3] > 0 and abs(sum(got.values()) - 1.0) < 1e-9


def test_a_walk_already_at_rest_stops_after_one_step() -> None:
    # Two nodes seeded equally: the first step changes nothing, so the walk is the restart.
    adj = {"a": {"b": 1.0}, "b": {"a": 1.0}}
    assert personalized_pagerank(adj, {"a": 1.0, "b": 1.0}) == {"a": 0.5, "b": 0.5}
