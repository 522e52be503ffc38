"""The min-cut partitioner's own max-flow (``ember.aot.partition._FlowGraph``) cuts exactly
where ``networkx.minimum_cut`` does: same cut value, same source side."""
import random

import networkx as nx
import pytest

from ember.aot.partition import _FlowGraph


def _both(edges):
    G, F = nx.DiGraph(), _FlowGraph()
    for u, v, c in edges:
        if c is None:
            G.add_edge(u, v)
        else:
            G.add_edge(u, v, capacity=c)
        F.add_edge(u, v, c)
    return G, F


def _cut_value(edges, side):
    return sum(c for u, v, c in edges if u in side and v not in side)


@pytest.mark.parametrize("seed", range(40))
def test_random_networks_match_networkx(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 40)
    edges, seen = [], set()
    for _ in range(rng.randint(n, 4 * n)):
        u, v = rng.randrange(n), rng.randrange(n)
        if u == v or (u, v) in seen or (v, u) in seen:
            continue
        seen.add((u, v))
        edges.append((u, v, rng.choice([rng.randint(0, 50), rng.randint(1, 10) * 1024, 0])))
    # the partitioner's shape: unbounded edges out of the source and into the sink
    for u in rng.sample(range(n), max(1, n // 4)):
        edges.append(("source", u, None))
    for v in rng.sample(range(n), max(1, n // 4)):
        edges.append((v, "sink", None))
    G, F = _both(edges)
    try:
        value, (reach, _) = nx.minimum_cut(G, "source", "sink")
    except nx.NetworkXUnbounded:
        with pytest.raises(RuntimeError, match="unbounded"):
            F.min_cut_source_side("source", "sink")
        return
    mine = F.min_cut_source_side("source", "sink")
    assert mine == set(reach)
    assert _cut_value(edges, mine) == value


def test_partitioner_shaped_chain():
    # x -> a (cheap, 4 bytes) -> b (big, 400) -> c (cheap, 4) needed by the backward:
    # saving a (4 bytes) and recomputing b, c beats saving c
    edges = [("source", ("in", "x"), None), (("in", "x"), ("out", "x"), 400),
             (("out", "x"), ("in", "a"), None), (("in", "a"), ("out", "a"), 4),
             (("out", "a"), ("in", "b"), None), (("in", "b"), ("out", "b"), 400),
             (("out", "b"), ("in", "c"), None), (("in", "c"), ("out", "c"), 400),
             (("out", "c"), "sink", None), (("out", "b"), "sink", None)]
    G, F = _both(edges)
    _, (reach, _) = nx.minimum_cut(G, "source", "sink")
    mine = F.min_cut_source_side("source", "sink")
    assert mine == set(reach) == {"source", ("in", "x"), ("out", "x"), ("in", "a")}
