"""CapabilityBasedPartitioner, fuse_by_partitions, operator_support,
tools_common and source_matcher_utils against torch.fx's on the same models."""

import operator
import random

import pytest

import ember
from ember.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from ember.fx.passes.operator_support import OperatorSupport, OpSupports, any_chain, chain, create_op_support
from ember.fx.passes.tools_common import CALLABLE_NODE_OPS, get_node_target, legalize_graph, stable_topological_sort
from ember.fx.passes.utils.fuser_utils import fuse_by_partitions, topo_sort, validate_partition
from ember.fx.passes.utils.source_matcher_utils import check_subgraphs_connected, get_source_partitions

from ._torch_pairs import close, code, pair, passes_mod, to_ember

torch = pytest.importorskip("torch")
import importlib  # noqa: E402


def _infra(T):
    return importlib.import_module(f"{T.__name__}.fx.passes.infra.partitioner")


def _model(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = T.nn.Linear(4, 4)

        def forward(self, x, y):
            a = x + y
            b = a * 2
            c = self.l1(b)
            d = T.relu(c) + a
            e = T.sin(d) * b
            f = e - 1
            g = T.relu(f) * d
            h = T.cos(g) + f
            return g, f.mul(3), h

    return M()


NAMES = ["_operator.add", "_operator.mul", "_operator.sub", "relu", "sin", "cos"]


def _support(T, allowed):
    tc = passes_mod(T, "tools_common")
    full = {n if n.startswith("_") else f"{T.__name__}.{n}" for n in allowed}
    return passes_mod(T, "operator_support").create_op_support(
        lambda sm, n: n.op == "call_function" and tc.get_node_target(sm, n) in full
    )


def _inputs():
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    return (x, y), (to_ember(x), to_ember(y))


def _run(allowed, **kw):
    out = []
    for T, m in zip((torch, ember), pair(_model)):
        gm = T.fx.symbolic_trace(m)
        p = _infra(T).CapabilityBasedPartitioner(gm, _support(T, allowed), **kw)
        parts = p.propose_partitions()
        desc = [(q.id, [n.name for n in q.nodes]) for q in parts]
        fused = p.fuse_partitions(parts)
        out.append((desc, fused))
    return out


@pytest.mark.parametrize("kw", [{}, {"allows_single_node_partition": True}, {"skip_horizontal_fusion": True},
                                {"allows_single_node_partition": True, "skip_horizontal_fusion": True}],
                         ids=lambda k: ",".join(k) or "default")
def test_partitions_and_fusion_match_torch(kw):
    (td, tf), (ed, ef) = _run(NAMES, **kw)
    assert ed == td
    assert code(ef) == code(tf)
    for name, sub in tf.named_children():
        if name.startswith("fused_"):
            assert code(getattr(ef, name)) == code(sub)
    ti, ei = _inputs()
    close(tf(*ti), ef(*ei), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(10))
def test_random_support_sets_match_torch(seed):
    rng = random.Random(seed)
    allowed = [n for n in NAMES if rng.random() < 0.6]
    single = rng.random() < 0.5
    (td, tf), (ed, ef) = _run(allowed, allows_single_node_partition=single)
    assert ed == td
    assert code(ef) == code(tf)
    ti, ei = _inputs()
    close(tf(*ti), ef(*ei), rtol=1e-5, atol=1e-5)


def test_partitioner_rejects_non_operator_support():
    gm = ember.fx.symbolic_trace(pair(_model)[1])
    with pytest.raises(TypeError, match="operator_support must be an OperatorSupportBase"):
        CapabilityBasedPartitioner(gm, lambda sm, n: True)


def test_partition_object():
    g = ember.fx.Graph()
    x = g.placeholder("x")
    p = Partition(id=3, nodes=[x], node_orders=[0])
    assert p.size() == 1 and p.nodes == {x: 0} and p.id == 3
    p.remove_node(x)
    assert p.size() == 0
    with pytest.raises(AssertionError, match="same length"):
        Partition(nodes=[x], node_orders=[0, 1])


def test_get_node_target_and_operator_support_table():
    tm, em = pair(_model)
    for T, m in ((torch, tm), (ember, em)):
        gm = T.fx.symbolic_trace(m)
        tc = passes_mod(T, "tools_common")
        mods = dict(gm.named_modules())
        got = [tc.get_node_target(mods, n).replace("torch", "ember") for n in gm.graph.nodes if n.op in tc.CALLABLE_NODE_OPS]
        if T is torch:
            expected = got
        else:
            assert got == expected
    assert CALLABLE_NODE_OPS == {"call_module", "call_function", "call_method"}
    gm = ember.fx.symbolic_trace(em)
    (ti, _), (ei, ey) = _inputs()
    from ember.fx.passes.shape_prop import ShapeProp

    ShapeProp(gm).propagate(ei, ey)
    mods = dict(gm.named_modules())
    sup = OperatorSupport({"_operator.add": None, "_operator.mul": (([ember.float32], None), {})})
    verdict = {n.name: sup.is_node_supported(mods, n) for n in gm.graph.nodes}
    assert verdict["x"] and verdict["output"]  # nothing to run
    assert verdict["add"] and verdict["mul"] and not verdict["sub"] and not verdict["l1"]
    sup64 = OperatorSupport({"_operator.mul": (([ember.float64], None), {})})
    assert not sup64.is_node_supported(mods, gm.graph.find_nodes(op="call_function", target=operator.mul)[0])
    no_f32 = OpSupports.decline_if_input_dtype(ember.float32)
    assert not no_f32.is_node_supported(mods, gm.graph.find_nodes(op="call_function", target=operator.add)[0])
    not_add = OpSupports.decline_if_node_in_names({"add"})
    both = chain(sup, not_add)
    either = any_chain(not_add, sup)
    add = gm.graph.find_nodes(op="call_function", target=operator.add)[0]
    assert not both.is_node_supported(mods, add)
    assert either.is_node_supported(mods, add)
    with pytest.raises(TypeError, match="must be callable"):
        create_op_support(3)
    with pytest.raises(AssertionError, match="Expect op types"):
        get_node_target(mods, gm.graph.find_nodes(op="placeholder")[0])


def _shuffled(T):
    g = T.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.add, (x, 1))
    b = g.call_function(operator.mul, (a, 2))
    c = g.call_function(operator.sub, (x, 3))
    d = g.call_function(operator.add, (b, c))
    g.output(d)
    gm = T.fx.GraphModule(T.nn.Module(), g)
    # move d and b to the front: out of topological order
    x.append(d)
    x.append(b)
    return gm


@pytest.mark.parametrize("fn", ["legalize_graph", "stable_topological_sort"])
def test_topological_sorts_match_torch(fn):
    outs = []
    for T in (torch, ember):
        gm = _shuffled(T)
        getattr(passes_mod(T, "tools_common"), fn)(gm)
        gm.graph.lint()
        outs.append([n.name for n in gm.graph.nodes])
        outs.append(gm(T.tensor([1.0, 2.0])).tolist())
    assert outs[2:] == outs[:2]


def test_fuse_by_partitions_and_validate():
    em = pair(_model)[1]
    gm = ember.fx.symbolic_trace(em)
    nodes = {n.name: n for n in gm.graph.nodes}
    assert not validate_partition([nodes["add"], nodes["add_1"]])  # add -> mul -> l1 -> relu -> add_1
    assert validate_partition([nodes["add"], nodes["mul"]])
    assert [n.name for n in topo_sort([nodes["mul"], nodes["add"]])] == ["add", "mul"]
    (ti, _), (ei, ey) = _inputs()
    ref = gm(ei, ey)
    fuse_by_partitions(gm, [{nodes["add"]: None, nodes["mul"]: None}], prefix="blk_")
    assert "blk_0" in dict(gm.named_children())
    close(tuple(r for r in ref), gm(ei, ey))
    with pytest.raises(AssertionError, match="dependency cycles"):
        nodes = {n.name: n for n in gm.graph.nodes}
        fuse_by_partitions(gm, [[nodes["l1"], nodes["add_1"], nodes["blk_0"]]])


def _src_model(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = T.nn.Linear(3, 4)
            self.b = T.nn.Linear(4, 2)
            self.r = T.nn.ReLU()

        def forward(self, x):
            return self.b(self.r(self.a(x))) * 2

    return M()


def test_source_partitions_from_export():
    """ember.export records nn_module_stack; the partitions group the same module instances as torch's."""
    outs = []
    for T, m in zip((torch, ember), pair(_src_model)):
        ep = T.export.export(m, (T.randn(2, 3),))
        smu = importlib.import_module(f"{T.__name__}.fx.passes.utils.source_matcher_utils")
        parts = smu.get_source_partitions(ep.graph_module.graph, [T.nn.Linear, T.nn.ReLU])
        summary = {}
        for k, v in parts.items():
            summary[k.__name__] = [
                (sorted(n.name for n in p.input_nodes if n.op == "placeholder"), len(p.output_nodes)) for p in v
            ]
        outs.append(summary)
        if T is ember:
            lin = parts[ember.nn.Linear]
            assert check_subgraphs_connected(parts[ember.nn.ReLU][0], lin[1])
            assert not check_subgraphs_connected(lin[1], lin[0])
            only_small = get_source_partitions(ep.graph_module.graph, [ember.nn.Linear], lambda n: n.name != "linear")
            assert len(only_small[ember.nn.Linear]) == 1
    assert outs[1] == outs[0]


def test_source_partitions_from_source_fn_stack_meta():
    g = ember.fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("w")
    a = g.call_function(ember.matmul, (x, w))
    b = g.call_function(ember.relu, (a,))
    g.output(b)
    a.meta["source_fn_stack"] = [("linear_1", ember.nn.functional.linear)]
    w.meta["source_fn_stack"] = [("linear_1", ember.nn.functional.linear)]
    b.meta["source_fn_stack"] = [("relu", ember.relu)]
    parts = get_source_partitions(g, [ember.nn.functional.linear])
    (p,) = parts[ember.nn.functional.linear]
    assert p.nodes == [w, a] and p.input_nodes == [x] and p.output_nodes == [a] and p.params == [w]
    with pytest.raises(TypeError, match="must be an ember.fx.Graph"):
        get_source_partitions(None, [])


def test_compare_graphs_like_torch():
    from ember.fx.passes.utils import compare_graphs

    tc = importlib.import_module("torch.fx.passes.utils").compare_graphs
    fns = [lambda T: (lambda x: x.relu() + 1), lambda T: (lambda y: y.relu() + 1),
           lambda T: (lambda y: y.relu() * 1), lambda T: (lambda x: (x + 1).relu())]
    for i, a in enumerate(fns):
        for b in fns[i:]:
            t = tc(torch.fx.symbolic_trace(a(torch)).graph, torch.fx.symbolic_trace(b(torch)).graph)
            e = compare_graphs(ember.fx.symbolic_trace(a(ember)).graph, ember.fx.symbolic_trace(b(ember)).graph)
            assert e == t


def test_graph_drawer_like_torch():
    from ember.fx.passes import graph_drawer as egd

    tgd = importlib.import_module("torch.fx.passes.graph_drawer")
    tm, em = pair(_model)
    tgm, egm = torch.fx.symbolic_trace(tm), ember.fx.symbolic_trace(em)
    if not tgd.HAS_PYDOT:
        with pytest.raises(RuntimeError) as te:
            tgd.FxGraphDrawer(tgm, "m")
        with pytest.raises(RuntimeError) as ee:
            egd.FxGraphDrawer(egm, "m")
        assert str(ee.value) == str(te.value)
        return
    for kw in ({}, {"ignore_parameters_and_buffers": True}):
        t = tgd.FxGraphDrawer(tgm, "m", **kw).get_main_dot_graph()
        e = egd.FxGraphDrawer(egm, "m", **kw).get_main_dot_graph()
        assert sorted(n.get_name() for n in e.get_nodes()) == sorted(n.get_name() for n in t.get_nodes())
        assert sorted((x.get_source(), x.get_destination()) for x in e.get_edges()) == sorted(
            (x.get_source(), x.get_destination()) for x in t.get_edges())
