"""ember.fx.passes.split_module / split_utils / graph_manipulation against torch.fx's.

Each case traces the same model (same weights) with ember.fx and torch.fx,
splits both with the same callback, and compares the generated code of the
top-level module and of every submodule, the qualname maps, and the values
the split modules compute against the unsplit ones.
"""

import operator
import random

import numpy as np
import pytest

import ember
from ember.fx.passes.graph_manipulation import get_size_of_all_nodes, size_bytes
from ember.fx.passes.split_module import split_module
from ember.fx.passes.split_utils import split_by_tags

from ._torch_pairs import close, code, graph_str, pair, passes_mod, to_ember

torch = pytest.importorskip("torch")


def _model(T):
    class Sub(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = T.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x)

    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = T.nn.Linear(4, 4)
            self.sub = Sub()
            self.p = T.nn.Parameter(T.randn(4))

        def forward(self, x, y):
            a = x + y
            b = self.l1(a) * self.p
            c = self.sub(b).relu()
            d = c + a
            e = T.sin(d) * b
            return e, d.sum()

    return M()


_PARTS = {"add": 0, "l1": 0, "mul": 1, "sub_lin": 2, "relu": 2, "add_1": 2, "sin": 3, "mul_1": 3, "sum_1": 4}

KWARGS = [
    {},
    {"keep_original_order": True},
    {"keep_original_input_name": False, "keep_original_node_name": True},
    {"tuple_return": True, "partition_affix": "pp"},
]


def _both_split(callback, **kw):
    tm, em = pair(_model)
    out = []
    for T, m in ((torch, tm), (ember, em)):
        gm = T.fx.symbolic_trace(m)
        qm = {}
        split = passes_mod(T, "split_module").split_module(gm, m, callback, qm, **kw)
        out.append((gm, split, qm))
    return out


def _inputs():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    return (x, y), (to_ember(x), to_ember(y))


@pytest.mark.parametrize("kw", KWARGS, ids=lambda k: ",".join(k) or "default")
def test_split_module_matches_torch(kw):
    (tgm, tsplit, tqm), (egm, esplit, eqm) = _both_split(lambda n: _PARTS[n.name], **kw)
    assert eqm == tqm
    assert code(esplit) == code(tsplit)
    t_children = dict(tsplit.named_children())
    e_children = dict(esplit.named_children())
    assert list(e_children) == list(t_children)
    for name in t_children:
        assert code(e_children[name]) == code(t_children[name]), name
    assert esplit.meta["partition_names"] == tsplit.meta["partition_names"]
    ti, ei = _inputs()
    close(tsplit(*ti), esplit(*ei), rtol=1e-5, atol=1e-5)
    close(egm(*ei), esplit(*ei))


@pytest.mark.parametrize("seed", range(12))
def test_split_module_random_callbacks(seed):
    """Random partition ids: both raise the same cycle error or both split the same way."""
    rng = random.Random(seed)
    names = list(_PARTS)
    assign = {n: rng.randrange(3) for n in names}
    results = []
    for T, m in zip((torch, ember), pair(_model)):
        gm = T.fx.symbolic_trace(m)
        try:
            results.append(passes_mod(T, "split_module").split_module(gm, m, lambda n: assign[n.name]))
        except RuntimeError as e:
            results.append(str(e))
    t, e = results
    if isinstance(t, str):
        assert e == t == "cycle exists between partitions!"
        return
    assert code(e) == code(t)
    ti, ei = _inputs()
    close(t(*ti), e(*ei), rtol=1e-5, atol=1e-5)


def test_split_module_single_partition_and_get_attr_module():
    (tgm, tsplit, _), (egm, esplit, _) = _both_split(lambda n: 0)
    assert code(esplit) == code(tsplit)
    assert code(esplit.submod_0) == code(tsplit.submod_0)


def test_split_module_grad_mode_setter_replayed():
    from ember.dynamo.variables.ctx import _set_grad_enabled

    g = ember.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(ember.mul, (x, 2))
    s = g.call_function(_set_grad_enabled, (False,))
    b = g.call_function(ember.add, (a, 1))
    c = g.call_function(ember.mul, (b, b))
    s2 = g.call_function(_set_grad_enabled, (True,))
    g.output(c)
    parts = {a: 0, s: 1, b: 1, c: 2, s2: 2}
    gm = ember.fx.GraphModule(ember.nn.Module(), g)
    split = split_module(gm, None, lambda n: parts[n])
    targets = [[n.target for n in sub.graph.nodes if n.op == "call_function"] for _, sub in split.named_children()]
    assert targets == [[ember.mul], [_set_grad_enabled, ember.add], [_set_grad_enabled, ember.mul, _set_grad_enabled]]
    assert split.submod_2.graph.find_nodes(op="call_function", target=_set_grad_enabled)[0].args == (False,)
    xv = ember.randn(3, requires_grad=True)
    out = split(xv)
    assert not out.requires_grad
    ember.set_grad_enabled(True)
    np.testing.assert_allclose(out.numpy(), ((xv.detach().numpy() * 2 + 1) ** 2), rtol=1e-6)


def test_split_module_bad_args():
    gm = ember.fx.symbolic_trace(pair(_model)[1])
    with pytest.raises(TypeError, match="split_callback must be callable"):
        split_module(gm, None, 3)
    with pytest.raises(TypeError, match="must be a GraphModule"):
        split_module(object(), None, lambda n: 0)


def _tag_model(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1 = T.nn.Linear(3, 3)
            self.linear2 = T.nn.Linear(3, 3)
            self.linear3 = T.nn.Linear(3, 3)

        def forward(self, in1, in2):
            r1 = self.linear1(in1)
            r2 = self.linear2(in2)
            return self.linear3(r1 + r2), r1.relu()

    return M()


@pytest.mark.parametrize("return_tuple", [False, True])
def test_split_by_tags_matches_torch(return_tuple):
    outs = []
    for T, m in zip((torch, ember), pair(_tag_model)):
        gm = T.fx.symbolic_trace(m)
        for n in gm.graph.nodes:
            n.tag = "ro" if n.name in ("linear1", "relu") else "main"
        split, fqn = passes_mod(T, "split_utils").split_by_tags(gm, ["ro", "main"], return_fqn_mapping=True,
                                                                 return_tuple=return_tuple)
        outs.append((gm, split, fqn))
    (tgm, t, tf), (egm, e, ef) = outs
    assert ef == tf
    assert code(e) == code(t)
    assert code(e.ro) == code(t.ro) and code(e.main) == code(t.main)
    ti, ei = _inputs()
    ti, ei = (ti[0][:, :3], ti[1][:, :3]), (ei[0][:, :3], ei[1][:, :3])
    close(t(*ti), e(*ei), rtol=1e-5, atol=1e-5)


def test_split_by_tags_order_violation():
    gm = ember.fx.symbolic_trace(pair(_tag_model)[1])
    for n in gm.graph.nodes:
        n.tag = "main" if n.name in ("linear1", "relu") else "ro"
    with pytest.raises(AssertionError, match="order must be >= max of its upstream"):
        split_by_tags(gm, ["ro", "main"])


def test_graph_manipulation_matches_torch():
    results = []
    ti, ei = _inputs()
    ti, ei = (ti[0][:, :3], ti[1][:, :3]), (ei[0][:, :3], ei[1][:, :3])
    for T, m, args in zip((torch, ember), pair(_tag_model), (ti, ei)):
        gm = T.fx.symbolic_trace(m)
        gmod = passes_mod(T, "graph_manipulation")
        gmod.get_size_of_all_nodes(gm, list(args))
        sizes = [(n.name, tuple(n.size_bytes)) for n in gm.graph.nodes if n.op != "output"]
        gmod.replace_target_nodes_with(gm, "call_function", operator.add, "call_function", operator.sub)
        results.append((sizes, graph_str(gm), gm(*args)))
    (ts, tg, tv), (es, eg, ev) = results
    assert es == ts
    assert eg == tg
    close(tv, ev, rtol=1e-5, atol=1e-5)
    assert isinstance(size_bytes(1, 2), tuple)


def test_get_size_of_node_needs_shape_prop():
    gm = ember.fx.symbolic_trace(pair(_tag_model)[1])
    with pytest.raises(RuntimeError, match="has no tensor metadata"):
        get_size_of_all_nodes(gm)


def test_split_dynamo_graph_with_dynamic_sizes():
    """A dynamic-shape dynamo graph reads sizes through sym_size nodes, so each
    partition gets what it needs as ordinary inputs and the split module runs
    on new sizes."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @ember.compile(backend=backend, dynamic=True)
    def f(x):
        y = x * 2
        return y.view(-1, 2).sum(0) + x.shape[0]

    f(ember.randn(6, 4))
    (gm,) = graphs
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    split = split_module(gm, None, lambda n: order[n])  # one node per partition
    assert len(list(split.named_children())) == 5
    for shape in [(6, 4), (10, 2), (3, 8)]:
        x = ember.randn(*shape)
        (got,) = split(x)
        np.testing.assert_allclose(got.numpy(), (x.numpy() * 2).reshape(-1, 2).sum(0) + shape[0], rtol=1e-5)
