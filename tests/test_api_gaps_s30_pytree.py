"""ember.utils._pytree's remaining public names against torch.utils._pytree: treespec JSON
(dumps/loads both ways), constants, structseqs, spec builders, map_only, arg_tree_leaves."""
import collections
import dataclasses
import enum
import os
import random

import pytest

import ember.utils._pytree as ep

torch = pytest.importorskip("torch")
import torch.utils._pytree as tp  # noqa: E402


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def _random_tree(rng, depth=0):
    r = rng.random()
    if depth > 2 or r < 0.3:
        return rng.randint(0, 9)
    kids = [_random_tree(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    kind = rng.choice(["list", "tuple", "dict", "od", "dd", "deque", "enumdict"])
    if kind == "list":
        return kids
    if kind == "tuple":
        return tuple(kids)
    if kind == "deque":
        return collections.deque(kids, maxlen=rng.choice([None, 5]))
    keys = rng.sample(["a", "b", "c", "d"], len(kids))
    if kind == "enumdict":
        keys = [Color.RED, Color.BLUE, "x"][:len(kids)]
    if kind == "od":
        return collections.OrderedDict(zip(keys, kids))
    if kind == "dd":
        return collections.defaultdict(list, zip(keys, kids))
    return dict(zip(keys, kids))


def test_treespec_dumps_matches_torch_and_round_trips_both_ways():
    rng = random.Random(3)
    for _ in range(150):
        tree = _random_tree(rng)
        es, ts = ep.tree_structure(tree), tp.tree_structure(tree)
        dumped = ep.treespec_dumps(es)
        assert dumped == tp.treespec_dumps(ts)
        assert ep.treespec_loads(dumped) == es
        assert repr(ep.treespec_loads(tp.treespec_dumps(ts))) == repr(tp.treespec_loads(dumped))
        assert ep.tree_unflatten(ep.tree_leaves(tree), ep.treespec_loads(dumped)) == tree


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e).replace("torch.utils._pytree", "X").replace("ember.utils._pytree", "X")
    return None


def test_serialization_errors_match_torch():
    P = collections.namedtuple("P", "x y")

    class C:
        def __init__(self, v):
            self.v = v
    for mod in (ep, tp):
        mod.register_pytree_node(C, lambda c: ([c.v], None), lambda v, c: C(v[0]))
    for make in (lambda m: m.treespec_dumps(m.tree_structure(P(1, 2))),
                 lambda m: m.treespec_dumps(m.tree_structure(C(1))),
                 lambda m: m.treespec_dumps(m.tree_structure([1]), protocol=2),
                 lambda m: m.treespec_dumps(5),
                 lambda m: m.treespec_loads('[2, {}]'),
                 lambda m: m.treespec_loads('[1, {"type": "foo.Bar", "context": "null", "children_spec": []}]'),
                 lambda m: m.treespec_tuple([1]),
                 lambda m: m.treespec_dict({"a": 1}),
                 lambda m: m.map_only(5)):
        assert _err(lambda: make(ep)) == _err(lambda: make(tp))


def test_custom_node_serialization_matches_torch():
    class E:
        def __init__(self, v):
            self.v = v

    class G:
        def __init__(self, v):
            self.v = v
    Q = collections.namedtuple("Q", "a b")
    for m in (ep, tp):
        m.register_pytree_node(E, lambda c: ([c.v], "ctx"), lambda v, c: E(v[0]), serialized_type_name="s30.E")
        m.register_pytree_node(G, lambda c: ([c.v], {"k": 1}), lambda v, c: G(v[0]), serialized_type_name="s30.G",
                               to_dumpable_context=lambda c: list(c), from_dumpable_context=lambda c: {x: 1 for x in c})
        m._register_namedtuple(Q, serialized_type_name="s30.Q")
    for tree in (E(1), [G(2), E(3)], Q(1, G(4))):
        d = ep.treespec_dumps(ep.tree_structure(tree))
        assert d == tp.treespec_dumps(tp.tree_structure(tree))
        assert repr(ep.treespec_loads(d)) == repr(tp.treespec_loads(d))

    @dataclasses.dataclass
    class D:
        a: int
        b: int
    for m in (ep, tp):
        m.register_dataclass(D, serialized_type_name="s30.D")
    d = ep.treespec_dumps(ep.tree_structure(D(1, 2)))
    assert d == tp.treespec_dumps(tp.tree_structure(D(1, 2)))
    assert ep.tree_unflatten([5, 6], ep.treespec_loads(d)) == D(5, 6)


def test_register_constant_matches_torch():
    class K:
        def __init__(self, v):
            self.v = v

        def __eq__(self, o):
            return isinstance(o, K) and o.v == self.v

        def __hash__(self):
            return hash(self.v)

        def __repr__(self):
            return f"K({self.v})"

    class NoEq:
        pass

    class NoHash:
        def __eq__(self, o):
            return True
        __hash__ = None
    for m in (ep, tp):
        m.register_constant(K)
        assert m.is_constant_class(K) and not m.is_constant_class(NoEq) and not m.is_constant_class(5)
    tree = [K(1), 2, {"a": K(3), "b": 4}]
    (el, es), (tl, ts) = ep.tree_flatten(tree), tp.tree_flatten(tree)
    assert el == tl == [2, 4]
    assert repr(es) == repr(ts)
    assert ep.tree_unflatten([7, 8], es) == tp.tree_unflatten([7, 8], ts) == [K(1), 7, {"a": K(3), "b": 8}]
    assert [ep.keystr(p) for p, _ in ep.tree_flatten_with_path(tree)[0]] == \
        [tp.keystr(p) for p, _ in tp.tree_flatten_with_path(tree)[0]]
    for cls in (NoEq, NoHash):
        assert _err(lambda: ep.register_constant(cls)) == _err(lambda: tp.register_constant(cls))
    with pytest.warns(UserWarning, match="already registered as pytree node"):
        ep.register_constant(K)


def test_structseq_predicates_match_torch():
    P = collections.namedtuple("P", "x y")
    st = os.stat(".")
    for obj in (st, os.stat_result, P(1, 2), P, (1, 2), tuple, 5):
        for name in ("is_structseq", "is_structseq_instance"):
            assert getattr(ep, name)(obj) == getattr(tp, name)(obj)
    for cls in (os.stat_result, P, tuple, int):
        assert ep.is_structseq_class(cls) == tp.is_structseq_class(cls)
    with pytest.raises(TypeError, match="not an acceptable base type"):
        type("S", (ep.structseq,), {})


def test_builders_map_only_and_arg_leaves_match_torch():
    assert repr(ep.treespec_leaf()) == repr(tp.treespec_leaf())
    for m_e, m_t in ((ep, tp),):
        assert repr(m_e.treespec_tuple([m_e.treespec_leaf()] * 2)) == repr(m_t.treespec_tuple([m_t.treespec_leaf()] * 2))
        assert repr(m_e.treespec_dict({"a": m_e.treespec_leaf()}, b=m_e.treespec_tuple())) == \
            repr(m_t.treespec_dict({"a": m_t.treespec_leaf()}, b=m_t.treespec_tuple()))
    assert ep.treespec_tuple([ep.treespec_leaf()] * 2) == ep.tree_structure((1, 2))
    f_e, f_t = ep.map_only(int)(lambda x: x + 1), tp.map_only(int)(lambda x: x + 1)
    assert [f_e(v) for v in (1, "a", 2.5)] == [f_t(v) for v in (1, "a", 2.5)]
    g = ep.map_only(lambda x: x == "a")(str.upper)
    assert (g("a"), g("b")) == ("A", "b")
    args, kwargs = (1, [2, (3,)]), {"x": {"a": 4}, "y": 5}
    assert ep.arg_tree_leaves(*args, **kwargs) == tp.arg_tree_leaves(*args, **kwargs)


def test_deprecated_aliases_and_constants():
    spec = ep.tree_structure([1, {"a": 2}])
    with pytest.warns(FutureWarning, match="`pytree_to_str` is deprecated"):
        s = ep.pytree_to_str(spec)
    with pytest.warns(FutureWarning, match="`str_to_pytree` is deprecated"):
        assert ep.str_to_pytree(s) == spec
    assert ep.BUILTIN_TYPES == tp.BUILTIN_TYPES
    assert ep.STANDARD_DICT_TYPES == tp.STANDARD_DICT_TYPES
    assert ep.DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL == tp.DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL
    assert ep.NO_SERIALIZED_TYPE_NAME_FOUND == tp.NO_SERIALIZED_TYPE_NAME_FOUND
    assert ep.Py_TPFLAGS_BASETYPE == tp.Py_TPFLAGS_BASETYPE
    assert {k: v for k, v in tp.SERIALIZED_TYPE_TO_PYTHON_TYPE.items() if k.startswith(("builtins", "collections"))} \
        == {k: v for k, v in ep.SERIALIZED_TYPE_TO_PYTHON_TYPE.items() if k.startswith(("builtins", "collections"))}
    assert ep.PyTreeSpec is ep.TreeSpec
    assert ep.enum_object_hook({"__enum__": True, "fqn": f"{__name__}:Color", "name": "BLUE"}) is Color.BLUE
