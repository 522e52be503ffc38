"""ember.utils._pytree against torch.utils._pytree: leaves, specs, printing, maps, key paths,
registration, errors; and traced whole under ember.compile."""
from __future__ import annotations

import collections
import dataclasses
from collections import OrderedDict, defaultdict, deque, namedtuple

import pytest

import ember
import ember.utils._pytree as P
from oracle import needs_torch

Pt = namedtuple("Pt", "x y")


def _trees():
    return [
        1, None, "s", [], (), {}, [1, 2], (3,), {"b": 1, "a": [2, (3, 4)]},
        {"a": [1, (2, 3)], "b": Pt(4, [5]), "c": OrderedDict(z=6, y=(7,)),
         "d": defaultdict(list, {"k": 7}), "e": deque([8, 9]), "f": None},
        [Pt(1, 2), (Pt(3, (4, 5)),)], deque([1, [2]], maxlen=3),
    ]


@needs_torch
@pytest.mark.parametrize("i", range(12))
def test_flatten_spec_and_printing_match_torch(i):
    import torch.utils._pytree as T
    tree = _trees()[i]
    el, es = P.tree_flatten(tree)
    tl, ts = T.tree_flatten(tree)
    assert el == tl
    assert repr(es) == repr(ts)
    assert P.treespec_pprint(es) == T.treespec_pprint(ts)
    assert (es.num_leaves, es.num_nodes, es.num_children, es.is_leaf()) == \
        (ts.num_leaves, ts.num_nodes, ts.num_children, ts.is_leaf())
    rebuilt = P.tree_unflatten(el, es)
    assert rebuilt == tree and type(rebuilt) is type(tree)
    ep, _ = P.tree_flatten_with_path(tree)
    tp, _ = T.tree_flatten_with_path(tree)
    assert [P.keystr(k) for k, _ in ep] == [T.keystr(k) for k, _ in tp]
    assert [v for _, v in ep] == [v for _, v in tp]
    assert P.tree_structure(tree) == es and P.tree_leaves(tree) == el


@needs_torch
def test_maps_match_torch():
    import torch.utils._pytree as T
    a = {"p": [1, (2, 3)], "q": Pt(4, 5)}
    b = {"q": Pt(40, [50, 51]), "p": [10, (20, 30)]}      # same keys, other order; deeper at a leaf
    for lib in (P, T):
        assert lib.tree_map(lambda x, y: (x, y), a, b) == {"p": [(1, 10), ((2, 20), (3, 30))],
                                                           "q": Pt((4, 40), (5, [50, 51]))}
    assert P.tree_map_only(int, lambda x: x + 1, (1, 2.0, "s")) == T.tree_map_only(int, lambda x: x + 1,
                                                                                    (1, 2.0, "s"))
    assert P.tree_map_only((int, float), lambda x: -x, [1, 2.5, "t"]) == [-1, -2.5, "t"]
    assert P.tree_all(lambda x: x > 0, a) and not P.tree_any(lambda x: x > 5, a)
    assert P.tree_any_only(str, lambda s: s == "t", [1, "t"]) and P.tree_all_only(str, len, [1, "t"])
    seen = []
    assert P.tree_map_(seen.append, a) is a and seen == P.tree_leaves(a)
    assert P.tree_map_with_path(lambda kp, x: P.keystr(kp), a) == \
        T.tree_map_with_path(lambda kp, x: T.keystr(kp), a)
    assert P.tree_leaves([1, [2, 3], 4], is_leaf=lambda x: isinstance(x, list) and len(x) == 2) == [1, [2, 3], 4]
    assert P.key_get(a, P.tree_flatten_with_path(a)[0][2][0]) == 3


@needs_torch
def test_errors_match_torch():
    import torch.utils._pytree as T
    for lib in (P, T):
        spec = lib.tree_structure([1, 2])
        cases = [(lambda: spec.unflatten([1, 2, 3]), "has length 3 but the spec refers to a pytree that holds 2"),
                 (lambda: lib.tree_map(lambda a, b: a, [1, 2], (1, 2)), "Node type mismatch; expected <class 'list'>"),
                 (lambda: lib.register_pytree_node(list, None, None), "is already registered as pytree node"),
                 (lambda: lib.tree_map(lambda a, b: a, {"a": 1}, {"b": 1}),
                  r"Node keys mismatch; missing key\(s\): \{'a'\}; extra key\(s\): \{'b'\}")]
        for fn, msg in cases:
            with pytest.raises(ValueError, match=msg):
                fn()
    with pytest.raises(ValueError, match="Node arity mismatch"):
        P.tree_map(lambda a, b: a, [1, 2], [1])


def test_registered_nodes_and_dataclasses():
    class Box:
        def __init__(self, a, b):
            self.a, self.b = a, b

    P.register_pytree_node(Box, lambda x: ([x.a, x.b], "box"), lambda v, c: Box(*v),
                           flatten_with_keys_fn=lambda x: ([(P.GetAttrKey("a"), x.a), (P.GetAttrKey("b"), x.b)],
                                                           "box"))
    try:
        leaves, spec = P.tree_flatten([Box(1, [2, 3])])
        assert leaves == [1, 2, 3] and repr(spec).startswith("TreeSpec(list, None, [TreeSpec(Box, box, [*,")
        back = P.tree_unflatten([10, 20, 30], spec)
        assert isinstance(back[0], Box) and back[0].b == [20, 30]
        assert [P.keystr(k) for k, _ in P.tree_leaves_with_path([Box(1, 2)])] == ["[0].a", "[0].b"]
    finally:
        del P.SUPPORTED_NODES[Box]
        P._CUSTOM_KINDS = tuple(k for k in P._CUSTOM_KINDS if k is not Box)

    @dataclasses.dataclass
    class D:
        a: int
        b: list
        c: str = "keep"

    P.register_dataclass(D, drop_field_names=["c"])
    try:
        leaves, spec = P.tree_flatten(D(1, [2], "dropped"))
        assert leaves == [1, 2]
        assert P.tree_unflatten([5, 6], spec) == D(5, [6])
    finally:
        del P.SUPPORTED_NODES[D]
        P._CUSTOM_KINDS = tuple(k for k in P._CUSTOM_KINDS if k is not D)
    with pytest.raises(ValueError, match="must be a dataclass"):
        P.register_dataclass(int)
    assert P.LeafSpec() == P.tree_structure(ember.ones(1)) and P.tree_is_leaf(ember.ones(1))
    assert P.is_namedtuple(Pt) and P.is_namedtuple(Pt(1, 2)) and not P.is_namedtuple((1, 2))


def test_func_transforms_still_flatten_through_it():
    x = ember.randn(3, dtype=ember.float64)
    g = ember.func.grad(lambda d: (d["w"] * d["v"][0]).sum())({"w": x, "v": Pt(x * 2, x)})
    assert set(g) == {"w", "v"} and ember.allclose(g["w"], x * 2)


def test_traced_whole_under_compile():
    def step(params, grads):
        new = P.tree_map(lambda p, g: p - 0.1 * g, params, grads)
        leaves, spec = P.tree_flatten(new)
        return P.tree_unflatten([leaf * 2 for leaf in leaves], spec), spec.num_leaves

    params = {"w": ember.randn(3), "layers": [Pt(ember.randn(2), ember.randn(1))]}
    grads = P.tree_map(lambda t: ember.randn(t.shape), params)
    explained = ember.dynamo.explain(step)(params, grads)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
    got, n = ember.compile(step)(params, grads)
    want, n2 = step(params, grads)
    assert n == n2 == 3 and P.tree_structure(got) == P.tree_structure(want)
    for a, b in zip(P.tree_leaves(got), P.tree_leaves(want)):
        assert ember.allclose(a, b)
    assert isinstance(got["layers"][0], Pt)


def test_defaultdict_and_deque_round_trip():
    d = defaultdict(int, {"x": 1})
    back = P.tree_map(lambda v: v + 1, d)
    assert isinstance(back, defaultdict) and back.default_factory is int and back["x"] == 2
    q = P.tree_map(lambda v: v * 3, deque([1, 2], maxlen=5))
    assert isinstance(q, deque) and q.maxlen == 5 and list(q) == [3, 6]
    assert isinstance(P.tree_unflatten([1], P.tree_structure(collections.OrderedDict(a=0))), OrderedDict)
