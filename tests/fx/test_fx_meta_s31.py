"""Session 31 fx additions: source_fn_stack / nn_module_stack on dynamo and
export graphs, GraphModule subclass copies and pickling, graph edit hooks and
GraphTransformObserver, FakeTensorProp, annotate_getitem_nodes, runtime
asserts, and torch.fx's module-level names -- against torch where installed."""

import copy
import operator
import pickle
import typing

import pytest

import ember


def _torch():
    return pytest.importorskip("torch")


def _model(lib):
    class Block(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = lib.nn.Linear(3, 3)

        def forward(self, x):
            return lib.nn.functional.relu(self.l(x)) * 2 + x.cos()

    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.b = Block()
            self.seq = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.ReLU())

        def forward(self, x):
            return self.seq(self.b(x)).sin()

    return M()


def _cls_name(c):
    return c.__name__ if isinstance(c, type) else c


def _src_name(src):
    """A source_fn_stack entry's source, comparable between torch and ember."""
    if isinstance(src, str):
        return src
    if isinstance(src, type):
        return "class " + src.__name__
    return getattr(src, "__name__", str(src))


def _dynamo_meta(lib, x):
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    lib._dynamo.reset()
    lib.compile(_model(lib), backend=backend)(x)
    gm = seen[0]
    rows = []
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method"):
            continue
        sfs = n.meta.get("source_fn_stack")
        nms = n.meta.get("nn_module_stack")
        rows.append((
            [(_src_name(s)) for _, s in sfs] if sfs else None,
            [_cls_name(c) for _, c in nms.values()] if nms else None,
        ))
    return gm, rows


def test_dynamo_graph_records_source_fn_and_module_stacks_as_torch():
    torch = _torch()
    x = ember.randn(2, 3)
    gm, ours = _dynamo_meta(ember, x)
    _, theirs = _dynamo_meta(torch, torch.tensor(x.numpy()))
    assert ours == theirs
    # a builtin module's op is attributed to its class, a user module's op to its function
    assert ours[0] == (["class Linear"], ["Block", "Linear"])
    assert ours[1] == (["relu"], ["Block"])
    assert ours[-1] == (["sin"], None)
    names = [n.name for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    stacks = [n.meta["source_fn_stack"] for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    assert [s[-1][0] for s in stacks] == names


def _partitions(lib, graph, wanted):
    if lib is ember:
        from ember.fx.passes.utils.source_matcher_utils import get_source_partitions
    else:
        from torch.fx.passes.utils.source_matcher_utils import get_source_partitions
    parts = get_source_partitions(graph, wanted)
    return {_src_name(k): sorted(len(p.nodes) for p in v) for k, v in parts.items()}


def test_get_source_partitions_on_dynamo_graph_as_torch():
    torch = _torch()
    x = ember.randn(2, 3)
    gm, _ = _dynamo_meta(ember, x)
    tgm, _ = _dynamo_meta(torch, torch.tensor(x.numpy()))
    ours = _partitions(ember, gm.graph, [ember.nn.Linear, ember.nn.ReLU, ember.nn.functional.relu])
    theirs = _partitions(torch, tgm.graph, [torch.nn.Linear, torch.nn.ReLU, torch.nn.functional.relu])
    assert ours == theirs == {"class Linear": [1, 1], "class ReLU": [1], "relu": [1]}


def _export_meta(lib, x):
    kw = {"strict": True} if lib is not ember else {}
    ep = lib.export.export(_model(lib), (x,), **kw)
    rows = []
    for n in ep.graph.nodes:
        if n.op != "call_function":
            continue
        sfs = n.meta.get("source_fn_stack")
        rows.append(([_src_name(s) for _, s in sfs] if sfs else None,
                     [(k.split("@")[0].startswith("L__self__") or k.isdigit(), fqn, cls.rsplit(".", 1)[-1])
                      for k, (fqn, cls) in n.meta["nn_module_stack"].items()]))
    return ep, rows


def test_export_graph_source_fn_stack_and_module_stack_as_torch_strict():
    torch = _torch()
    x = ember.randn(2, 3)
    ep, ours = _export_meta(ember, x)
    _, theirs = _export_meta(torch, torch.tensor(x.numpy()))
    # one row per source node (the program keeps linear whole, as torch's)
    def dedupe(rows):
        out = []
        for r in rows:
            if not out or out[-1] != r:
                out.append(r)
        return out
    assert dedupe(ours) == dedupe(theirs)
    parts = _partitions(ember, ep.graph, [ember.nn.Linear])
    assert parts == {"class Linear": [1, 1]}     # one aten.linear per Linear, as torch's
    assert ours == theirs


def _subclass_gm(lib):
    class MyGM(lib.fx.GraphModule):
        def __init__(self, root, graph, tag="x"):
            super().__init__(root, graph)
            self.tag = tag

        def extra(self):
            return "extra"

    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = lib.nn.Linear(3, 3)
            self.register_buffer("b", lib.randn(3))

        def forward(self, x):
            return self.l(x).relu() + self.b

    gm0 = lib.fx.symbolic_trace(M())
    g = MyGM(gm0, gm0.graph, tag="hello")
    g.meta["k"] = [1]
    g.meta["_user_preserved_attributes"] = {"pres": 5}
    return MyGM, g


def _deepcopy_facts(lib):
    cls, g = _subclass_gm(lib)
    c = copy.deepcopy(g)
    return (isinstance(c, cls), type(c).__name__, hasattr(c, "tag"), c.meta == g.meta, c.meta["k"] is g.meta["k"],
            getattr(c, "pres", None), c.l is g.l, c.extra()), (c, g)


def test_deepcopy_of_graph_module_subclass_as_torch():
    torch = _torch()
    ours, (c, g) = _deepcopy_facts(ember)
    theirs, _ = _deepcopy_facts(torch)
    assert ours == theirs
    assert ours[0] and not ours[2] and ours[5] == 5
    x = ember.randn(2, 3)
    assert float((c(x) - g(x)).abs().max()) == 0.0
    # a plain copy.copy shares the state and is a plain GraphModule, as torch's
    s = copy.copy(g)
    assert type(s).__mro__[1] is ember.fx.GraphModule and s.l is g.l


def _pickle_facts(lib):
    class MyGM(lib.fx.GraphModule):
        pass

    def f(x, y):
        return lib.relu(x) * y + lib.sin(x).sum(), x.shape[0]

    gm0 = lib.fx.symbolic_trace(f)
    g = MyGM(gm0, gm0.graph)
    g.tag = "hello"
    g.meta["k"] = 1
    p = pickle.loads(pickle.dumps(g))
    return (type(p).__name__, isinstance(p, MyGM), p.tag, p.meta, [n.op for n in p.graph.nodes]), (p, g)


def test_pickle_round_trip_re_traces_the_code_as_torch():
    torch = _torch()
    ours, (p, g) = _pickle_facts(ember)
    theirs, _ = _pickle_facts(torch)
    assert ours == theirs
    x, y = ember.randn(4), ember.randn(4)
    a, b = p(x, y), g(x, y)
    assert float((a[0] - b[0]).abs().max()) == 0.0 and a[1] == b[1] == 4


def test_graph_edit_hooks_and_transform_observer_as_torch(monkeypatch):
    torch = _torch()
    monkeypatch.setenv("INDUCTOR_PROVENANCE", "1")
    from torch._inductor import config as tconfig

    def run(lib, observer_cls):
        def f(x):
            return lib.relu(x) + x * 2

        gm = lib.fx.symbolic_trace(f)

        def mul_to_add(gm):
            for n in list(gm.graph.nodes):
                if n.op == "call_function" and n.target is operator.mul:
                    with gm.graph.inserting_before(n):
                        new = gm.graph.call_function(operator.add, (n.args[0], n.args[0]))
                    n.replace_all_uses_with(new)
                    gm.graph.erase_node(n)
            gm.recompile()
            return copy.deepcopy(gm)

        obs = observer_cls(gm, "mul_to_add")
        copied = obs.apply_gm_pass(mul_to_add)
        prov = {n.name: [(s.name, s.pass_name, [a.name for a in s.action]) for s in n.meta.get("from_node", [])]
                for n in gm.graph.nodes}
        left = (len(getattr(gm, "_create_node_hooks", [])), len(getattr(copied, "_create_node_hooks", [])))
        return obs.active, sorted(obs.created_nodes), sorted(obs.erased_nodes), prov, left, len(obs.copied_gms)

    from ember.fx.passes.graph_transform_observer import GraphTransformObserver as E
    from torch.fx.passes.graph_transform_observer import GraphTransformObserver as T
    ours = run(ember, E)
    with tconfig.patch({"trace.provenance_tracking_level": 1}):   # (torch's config: patch, not setattr)
        theirs = run(torch, T)
    assert ours == theirs
    assert ours[3]["add_1"] == [("mul", "mul_to_add", ["REPLACE", "CREATE"])]


def test_graph_module_node_hooks_fire():
    gm = ember.fx.symbolic_trace(lambda x: x.relu() + 1)
    created, erased, replaced = [], [], []
    gm._register_create_node_hook(lambda n: created.append(n.name))
    gm._register_erase_node_hook(lambda n: erased.append(n.name))
    hook = lambda old, new, user: replaced.append((old.name, new, user.name))  # noqa: E731
    gm._register_replace_node_hook(hook)
    relu = next(n for n in gm.graph.nodes if n.name == "relu")
    with gm.graph.inserting_after(relu):
        s = gm.graph.call_function(ember.sigmoid, (relu.args[0],))
    relu.replace_all_uses_with(s)
    gm.graph.erase_node(relu)
    assert created == ["sigmoid"] and erased == ["relu"] and replaced == [("relu", "sigmoid", "add")]
    gm._unregister_replace_node_hook(hook)
    with pytest.raises(AssertionError, match="not registered"):
        gm._unregister_replace_node_hook(hook)
    x = ember.randn(5)
    gm.recompile()
    assert float((gm(x) - (x.sigmoid() + 1)).abs().max()) == 0.0


def test_fake_tensor_prop_records_values_as_torch():
    torch = _torch()

    def run(lib, prop_cls, mode_cls):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.l = lib.nn.Linear(3, 4)

            def forward(self, x):
                y = self.l(x).relu()
                return y.t(), y.shape[0], lib.split(y, 1, dim=1)

        gm = lib.fx.symbolic_trace(M())
        with pytest.raises(AssertionError, match="Please convert all Tensors to FakeTensors"):
            prop_cls(gm).propagate(lib.randn(2, 3))
        prop_cls(gm, mode_cls(allow_non_fake_inputs=True)).propagate(lib.randn(2, 3))
        def shapes(v):
            if hasattr(v, "shape") and not isinstance(v, tuple):
                return ("tensor", tuple(v.shape))
            if isinstance(v, (tuple, list)):
                return [shapes(a) for a in v]
            return v

        return {n.name: shapes(n.meta.get("val")) for n in gm.graph.nodes}

    from ember._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from ember.fx.passes.fake_tensor_prop import FakeTensorProp
    from torch._subclasses.fake_tensor import FakeTensorMode as TMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp as TProp
    ours = run(ember, FakeTensorProp, FakeTensorMode)
    assert ours == run(torch, TProp, TMode)
    assert ours["t"] == ("tensor", (4, 2)) and ours["getitem"] == 2
    gm = ember.fx.symbolic_trace(lambda x: x * 2)
    FakeTensorProp(gm).propagate(ember.randn(3, 5))
    v = next(iter(gm.graph.nodes)).meta["val"]
    assert isinstance(v, FakeTensor) and tuple(v.shape) == (3, 5)


def test_annotate_getitem_nodes_as_torch():
    torch = _torch()

    def run(lib, annotate):
        class P(typing.NamedTuple):
            a: lib.Tensor
            b: int

        g = lib.fx.Graph()
        types = [typing.Tuple[lib.Tensor, int], typing.List[float], tuple[int, ...], list[str], P,
                 tuple[int, bool], None, typing.Dict[str, int]]
        outs = []
        for i, t in enumerate(types):
            ph = g.placeholder(f"t{i}", type_expr=t)
            outs.append(g.call_function(operator.getitem, (ph, 1)))
        g.output(tuple(outs))
        annotate(g)
        return [getattr(o.type, "__name__", o.type) for o in outs]

    from ember.fx.passes.annotate_getitem_nodes import annotate_getitem_nodes
    from torch.fx.passes.annotate_getitem_nodes import annotate_getitem_nodes as t_annotate
    ours = run(ember, annotate_getitem_nodes)
    assert ours == run(torch, t_annotate) == ["int", "float", "int", "str", "int", "bool", None, None]


def test_insert_deferred_runtime_asserts():
    import sympy

    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.fx.passes.runtime_assert import insert_deferred_runtime_asserts

    def f(x, y):
        return (x * 2).sum(0) + y.shape[0]

    gm = make_fx(f, tracing_mode="symbolic")(ember.randn(5, 3), ember.randn(4))
    env = gm.shape_env
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    s0, s1 = ph[0].meta["val"].shape
    s2 = ph[1].meta["val"].shape[0]
    # without the preference a deferred assert is an ordinary guard
    assert env.defer_runtime_assert(s0 > 1, "static") is True and env.deferred_runtime_asserts == {}
    env.prefer_deferred_runtime_asserts_over_guards = True
    assert env.defer_runtime_assert(s0 > s2, "x longer") is True
    assert env.defer_runtime_assert(sympy.Eq(sympy.Mod(s1.expr, 3), 0), "multiple of 3") is True
    assert env.guards == [] and len(env.deferred_runtime_asserts[None]) == 2
    insert_deferred_runtime_asserts(gm, env, "f")
    insert_deferred_runtime_asserts(gm, env, "f")     # a second run adds nothing
    gm.recompile()
    assert gm.code.count("_assert_scalar(") == 2
    x, y = ember.randn(6, 3), ember.randn(4)
    assert float((gm(x, y) - f(x, y)).abs().max()) == 0.0
    with pytest.raises(RuntimeError, match=r"Runtime assertion failed for expression s0 > s2 on node 'gt'"):
        gm(ember.randn(3, 3), ember.randn(4))
    with pytest.raises(RuntimeError, match=r"Eq\(Mod\(s1, 3\), 0\)"):
        gm(ember.randn(6, 4), ember.randn(4))
    # dead-code elimination keeps the checks
    gm.graph.eliminate_dead_code()
    gm.recompile()
    assert gm.code.count("_assert_scalar(") == 2


def test_fx_module_level_names_as_torch():
    torch = _torch()
    import torch.fx.passes.splitter_base  # noqa: F401
    for name in ("passes", "experimental", "graph_module", "config", "operator_schemas", "tensor_type",
                 "_compatibility", "_pytree"):
        assert getattr(ember.fx, name).__name__ == f"ember.fx.{name}"
    from ember.fx._compatibility import compatibility
    from torch.fx._compatibility import compatibility as tcompat

    def mk():
        def fn():
            """Doc."""
        return fn

    assert compatibility(is_backward_compatible=False)(mk()).__doc__ == tcompat(is_backward_compatible=False)(mk()).__doc__
    assert compatibility(is_backward_compatible=True)(mk()).__doc__ == tcompat(is_backward_compatible=True)(mk()).__doc__
    from ember.fx.annotate import annotate

    def g(x, n):
        return x + annotate(n, int)

    gm = ember.fx.symbolic_trace(g)
    assert "n : int" in gm.code
    with pytest.raises(RuntimeError, match="already had a type"):
        ember.fx.symbolic_trace(lambda x, n: x + annotate(annotate(n, int), float))
    for mod in ("splitter_base", "net_min_base", "fake_tensor_prop", "runtime_assert", "graph_transform_observer",
                "annotate_getitem_nodes", "backends"):
        assert getattr(ember.fx.passes, mod).__name__ == f"ember.fx.passes.{mod}"


def test_cudagraphs_partition_leaves_cpu_graphs_alone():
    from ember.fx.passes.backends.cudagraphs import CudaGraphsSupport, partition_cudagraphs

    gm = ember.fx.symbolic_trace(lambda x: (x.sin() + 1).relu())
    before = [n.op for n in gm.graph.nodes]
    out = partition_cudagraphs(gm, [ember.randn(3)])
    assert [n.op for n in out.graph.nodes] == before
    sup = CudaGraphsSupport()
    assert not any(sup.is_node_supported({}, n) for n in out.graph.nodes)
