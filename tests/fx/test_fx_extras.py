"""The rest of torch.fx's public surface in ember.fx: immutable_collections,
has_side_effect, fx.traceback, CodeGen/set_codegen, ProxyableClassMeta, PH,
config, operator_schemas, tensor_type -- each checked against torch 2.13 on
the same programs where torch is installed."""

import copy
import pickle
import typing

import numpy as np
import pytest

import ember
import ember.fx as efx
from ember.fx import CodeGen, GraphModule, Interpreter, Transformer
from ember.fx import traceback as etb
from ember.fx.immutable_collections import immutable_dict, immutable_list
from ember.utils import _pytree as epytree


def _torch():
    return pytest.importorskip("torch")


# -- immutable_collections ----------------------------------------------------------------
MUTATIONS_LIST = [
    ("append", lambda l: l.append(1)),
    ("extend", lambda l: l.extend([1])),
    ("insert", lambda l: l.insert(0, 1)),
    ("pop", lambda l: l.pop()),
    ("remove", lambda l: l.remove(1)),
    ("clear", lambda l: l.clear()),
    ("sort", lambda l: l.sort()),
    ("reverse", lambda l: l.reverse()),
    ("setitem", lambda l: l.__setitem__(0, 5)),
    ("delitem", lambda l: l.__delitem__(0)),
    ("iadd", lambda l: l.__iadd__([1])),
    ("imul", lambda l: l.__imul__(2)),
]
MUTATIONS_DICT = [
    ("setitem", lambda d: d.__setitem__("a", 1)),
    ("delitem", lambda d: d.__delitem__("a")),
    ("update", lambda d: d.update(b=2)),
    ("pop", lambda d: d.pop("a")),
    ("popitem", lambda d: d.popitem()),
    ("setdefault", lambda d: d.setdefault("z", 0)),
    ("clear", lambda d: d.clear()),
    ("ior", lambda d: d.__ior__({"q": 1})),
]


@pytest.mark.parametrize("name,op", MUTATIONS_LIST)
def test_immutable_list_refuses_mutation(name, op):
    l = immutable_list([1, 2, 3])
    with pytest.raises(TypeError, match="'immutable_list' object does not support mutation") as ei:
        op(l)
    assert "node.args = new_args" in str(ei.value)
    assert l == [1, 2, 3]


@pytest.mark.parametrize("name,op", MUTATIONS_DICT)
def test_immutable_dict_refuses_mutation(name, op):
    d = immutable_dict({"a": 1})
    with pytest.raises(TypeError, match="'immutable_dict' object does not support mutation"):
        op(d)
    assert d == {"a": 1}


def test_immutable_collections_message_and_type_as_torch():
    torch = _torch()
    from torch.fx.immutable_collections import immutable_dict as TD
    from torch.fx.immutable_collections import immutable_list as TL

    for (name, op) in MUTATIONS_LIST:
        with pytest.raises(TypeError) as te:
            op(TL([1, 2, 3]))
        with pytest.raises(TypeError) as ee:
            op(immutable_list([1, 2, 3]))
        assert str(ee.value).split(".")[0] == str(te.value).split(".")[0]
        assert str(ee.value).replace("an ember.fx", "a torch.fx") == str(te.value)
    for (name, op) in MUTATIONS_DICT:
        with pytest.raises(TypeError) as te:
            op(TD({"a": 1}))
        with pytest.raises(TypeError) as ee:
            op(immutable_dict({"a": 1}))
        assert str(ee.value).replace("an ember.fx", "a torch.fx") == str(te.value)
    del torch


def test_immutable_hash_copy_pickle_pytree():
    rng = np.random.default_rng(0)
    for _ in range(5):
        vals = rng.integers(-50, 50, size=int(rng.integers(0, 6))).tolist()
        l = immutable_list(vals)
        assert hash(l) == hash(immutable_list(list(vals))) == hash(tuple(vals))
        keys = [f"k{i}" for i in range(len(vals))]
        d1 = immutable_dict(zip(keys, vals))
        d2 = immutable_dict(zip(reversed(keys), reversed(vals)))
        assert d1 == d2 and hash(d1) == hash(d2)  # order-independent, like ==
        for obj in (l, d1):
            for c in (copy.copy(obj), copy.deepcopy(obj), pickle.loads(pickle.dumps(obj))):
                assert type(c) is type(obj) and c == obj
        leaves, spec = epytree.tree_flatten({"l": l, "d": d1})
        assert leaves == list(vals) + list(d1.values())
        back = epytree.tree_unflatten(leaves, spec)
        assert type(back["l"]) is immutable_list and type(back["d"]) is immutable_dict
        assert back == {"l": l, "d": d1}
        assert epytree.tree_leaves(l) == list(vals)


def test_node_args_are_immutable():
    def f(x, y):
        return ember.cat([x, y], dim=0)

    gm = efx.symbolic_trace(f)
    cat = [n for n in gm.graph.nodes if n.op == "call_function"][0]
    assert type(cat.args[0]) is immutable_list
    with pytest.raises(TypeError, match="does not support mutation"):
        cat.args[0].append(cat.args[0][0])
    with pytest.raises(TypeError, match="does not support mutation"):
        cat.kwargs["dim"] = 1


# -- has_side_effect ---------------------------------------------------------------------------
_log = []


@efx.has_side_effect
def _record(x):
    _log.append(x)
    return x


def _pure(x):
    return x


efx.wrap("_record")
efx.wrap("_pure")


def test_has_side_effect_survives_dce():
    def f(x):
        _record(x)
        _pure(x)
        return x + 1

    gm = efx.symbolic_trace(f)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert _record in targets and _pure in targets
    gm.graph.eliminate_dead_code()
    gm.recompile()
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert _record in targets and _pure not in targets
    _log.clear()
    x = ember.tensor(np.random.default_rng(1).standard_normal(3).astype(np.float32))
    np.testing.assert_allclose(gm(x).numpy(), x.numpy() + 1)
    assert len(_log) == 1
    assert efx.has_side_effect(_pure) is _pure  # returns the function itself
    from ember.fx.node import _side_effectful_functions

    _side_effectful_functions.discard(_pure)


def test_has_side_effect_matches_torch():
    torch = _torch()
    import torch.fx as tfx

    def t_fx(x):
        return x

    tfx.has_side_effect(t_fx)

    def build(fx, side, pure, lib):
        g = fx.Graph()
        x = g.placeholder("x")
        g.call_function(side, (x,))
        g.call_function(pure, (x,))
        g.output(x)
        g.eliminate_dead_code()
        return [getattr(n.target, "__name__", n.target) for n in g.nodes]

    def e_fx(x):
        return x

    efx.has_side_effect(e_fx)
    assert build(efx, e_fx, _pure, ember) == ["x", "e_fx", "output"]
    assert build(tfx, t_fx, lambda x: x, torch) == ["x", "t_fx", "output"]


# -- fx.traceback -----------------------------------------------------------------------
def test_preserve_node_meta_stack_trace_like_torch():
    torch = _torch()
    import torch.fx as tfx
    from torch.fx import traceback as ttb

    stack = ["  File a.py, line 1, in f\n", "    y = x + 1\n"]

    def make(lib):
        def f(x, y):
            return lib.relu(x) + y

        return f

    with etb.preserve_node_meta():
        assert etb.has_preserved_node_meta()
        etb.set_stack_trace(stack)
        egm = efx.symbolic_trace(make(ember))
        assert etb.format_stack() == ["".join(stack)]
        assert etb.get_current_meta()["stack_trace"] == "".join(stack)
    with ttb.preserve_node_meta():
        ttb.set_stack_trace(stack)
        tgm = tfx.symbolic_trace(make(torch))
    e = [(n.name, n.meta.get("stack_trace")) for n in egm.graph.nodes]
    t = [(n.name, n.meta.get("stack_trace")) for n in tgm.graph.nodes]
    assert e == t
    assert not etb.has_preserved_node_meta()
    assert etb.get_current_meta() == {}  # restored on exit
    # outside preservation, set_stack_trace is a no-op and format_stack is the
    # real Python stack (ending at the caller)
    etb.set_stack_trace(stack)
    assert etb.get_current_meta() == {}
    fs = etb.format_stack()
    assert "test_preserve_node_meta_stack_trace_like_torch" in fs[-1]
    # an empty stack clears it
    with etb.preserve_node_meta():
        etb.set_stack_trace(stack)
        etb.set_stack_trace([])
        assert "stack_trace" not in etb.get_current_meta()
        assert etb.format_stack() == [""]
    # without preservation, tracing records no stack trace
    assert all("stack_trace" not in n.meta for n in efx.symbolic_trace(make(ember)).graph.nodes)


def test_transformer_hands_metadata_on_like_torch():
    torch = _torch()
    import torch.fx as tfx

    def make(lib):
        def f(x, y):
            return lib.relu(x) + y

        return f

    def run(fx, f):
        gm = fx.symbolic_trace(f)
        for n in gm.graph.nodes:
            n.meta["stack_trace"] = f"st-{n.name}"
            n.meta["custom"] = {"k": n.name}
        out = fx.Transformer(gm).transform()
        res = []
        for n in out.graph.nodes:
            if n.op in ("call_function", "call_method"):
                src = n.meta["from_node"]
                res.append((n.name, n.meta["stack_trace"], n.meta["custom"],
                            [(s.name, s.pass_name, s.action[0].name) for s in src]))
        return res

    assert run(efx, make(ember)) == run(tfx, make(torch))


def test_set_current_meta_and_node_source():
    g = efx.Graph()
    x = g.placeholder("x")
    r = g.call_function(ember.relu, (x,))
    g.output(r)
    r.meta["stack_trace"] = "here"
    with etb.set_current_meta(r):  # not preserving: nothing changes
        assert etb.get_current_meta() == {}
    with etb.preserve_node_meta():
        with etb.set_current_meta(r, "mypass"):
            cur = etb.get_current_meta()
            assert cur["stack_trace"] == "here"
            (src,) = cur["from_node"]
            assert (src.name, src.target, src.pass_name, src.graph_id) == ("relu", str(ember.relu), "mypass", id(g))
            assert src.to_dict()["action"] == "create"
            assert src == etb.NodeSource(r, "mypass", etb.NodeSourceAction.CREATE)
            assert hash(src) == hash(etb.NodeSource(r, "mypass", etb.NodeSourceAction.CREATE))
        assert "from_node" not in etb.get_current_meta()
        with etb.annotate({"stage": 1}):
            assert etb.get_current_meta()["custom"] == {"stage": 1}
        assert "custom" not in etb.get_current_meta()
    with pytest.raises(AssertionError, match="Expected NodeSourceAction"):
        etb.NodeSource(r, "p", ["create"])


# -- CodeGen ------------------------------------------------------------------------------------
def _list_codegen(base, tensor_name):
    class ListCodeGen(base):
        def gen_fn_def(self, free_vars, maybe_return_annotation):
            return f"""
def forward(self, args_list: List[{tensor_name}]){maybe_return_annotation}:
    {', '.join(free_vars)} = args_list"""

        def additional_globals(self):
            return [("List", typing.List)]

        def process_inputs(self, *inputs):
            assert len(inputs) == 1
            return inputs[0]

        def generate_output(self, output_args):
            return f"return list({repr(output_args)})"

        def process_outputs(self, outputs):
            return list(outputs)

    return ListCodeGen


def test_custom_codegen_changes_code_like_torch():
    torch = _torch()
    import torch.fx as tfx

    def f(a, b):
        return a + b, a - b

    arrays = [np.random.default_rng(i).standard_normal(3).astype(np.float32) for i in range(2)]
    e_vals = [ember.tensor(a) for a in arrays]
    t_vals = [torch.tensor(a) for a in arrays]

    egm, tgm = efx.symbolic_trace(f), tfx.symbolic_trace(f)
    egm.graph.set_codegen(_list_codegen(CodeGen, "ember.Tensor")())
    tgm.graph.set_codegen(_list_codegen(tfx.CodeGen, "torch.Tensor")())
    egm.recompile()
    tgm.recompile()
    assert egm.code.replace("ember.Tensor", "torch.Tensor") == tgm.code
    out = egm(e_vals)
    assert isinstance(out, list)
    for e, t in zip(out, tgm(t_vals)):
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)
    # the Interpreter honours process_inputs/process_outputs like the code
    interp = Interpreter(egm).run(e_vals)
    assert isinstance(interp, list) and all(np.allclose(a.numpy(), b.numpy()) for a, b in zip(interp, out))
    # a bare copy with the default codegen runs the graph itself
    bare = GraphModule({}, copy.deepcopy(egm.graph))
    assert type(bare.graph._codegen).__name__ == "ListCodeGen"  # deep-copied with the graph
    bare.graph.set_codegen(CodeGen())
    bare.recompile()
    again = egm.graph.process_outputs(bare(*egm.graph.process_inputs(e_vals)))
    assert all(np.allclose(a.numpy(), b.numpy()) for a, b in zip(again, out))
    # a Transformer keeps the codegen
    tr = Transformer(egm).transform()
    assert "args_list" in tr.code
    assert all(np.allclose(a.numpy(), b.numpy()) for a, b in zip(tr(e_vals), out))


def test_default_codegen_is_unchanged_and_on_generate_code():
    def f(x, y):
        return ember.relu(x) * y

    gm = efx.symbolic_trace(f)
    before = gm.code
    gm.graph.set_codegen(CodeGen())
    gm.recompile()
    assert gm.code == before
    assert "def forward(self, x, y):" in before

    class Renamed(CodeGen):  # overriding only the def line
        def gen_fn_def(self, free_vars, maybe_return_annotation):
            free_vars = ["self"] + [v.upper() for v in free_vars]
            body = "".join(f"\n    {v.lower()} = {v}" for v in free_vars[1:])
            return f"def forward({', '.join(free_vars)}){maybe_return_annotation}:{body}"

    gm.graph.set_codegen(Renamed())
    gm.recompile()
    assert "def forward(self, X, Y):" in gm.code
    x, y = (ember.tensor(np.random.default_rng(i).standard_normal(4).astype(np.float32)) for i in range(2))
    np.testing.assert_allclose(gm(x, y).numpy(), np.maximum(x.numpy(), 0) * y.numpy(), rtol=1e-6)

    def add_comment(prev):
        def transform(body):
            out = ["# generated\n"] + list(body)
            return prev(out) if prev is not None else out

        return transform

    gm.graph.set_codegen(CodeGen())
    with gm.graph.on_generate_code(add_comment):
        gm.recompile()
        assert "    # generated\n" in gm.code
    gm.recompile()
    assert "# generated" not in gm.code
    with pytest.raises(TypeError, match="CodeGen"):
        gm.graph.set_codegen(object())


# -- ProxyableClassMeta / PH ----------------------------------------------------------------------
class TensorPair(metaclass=efx.ProxyableClassMeta):
    def __init__(self, left, right):
        self.left, self.right = left, right

    def add(self, other):
        return TensorPair(self.left + other.left, self.right + other.right)

    def mul(self, other):
        return TensorPair(self.left * other.left, self.right * other.right)


def use_tensor_pair_ctor(x: TensorPair, y):
    s = x.add(TensorPair(y, y))
    return s.mul(x)


def _torch_pair_program(tfx):
    """The same class and function as above, on torch.fx (the class is named
    the same so that node names agree)."""

    class TensorPair(metaclass=tfx.ProxyableClassMeta):
        def __init__(self, left, right):
            self.left, self.right = left, right

        def add(self, other):
            return TensorPair(self.left + other.left, self.right + other.right)

        def mul(self, other):
            return TensorPair(self.left * other.left, self.right * other.right)

    def t_use(x: TensorPair, y):
        s = x.add(TensorPair(y, y))
        return s.mul(x)

    return t_use


def test_proxyable_class_meta_records_construction_like_torch():
    torch = _torch()
    import torch.fx as tfx

    t_use = _torch_pair_program(tfx)

    egm = efx.symbolic_trace(use_tensor_pair_ctor)
    tgm = tfx.symbolic_trace(t_use)
    sig = lambda gm: [(n.op, getattr(n.target, "__name__", n.target), n.name) for n in gm.graph.nodes]  # noqa: E731
    assert sig(egm) == sig(tgm)
    ctor = [n for n in egm.graph.nodes if n.op == "call_function"]
    assert len(ctor) == 1 and ctor[0].target is TensorPair
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal((5, 3)).astype(np.float32) for _ in range(3))
    ex = TensorPair(ember.tensor(a), ember.tensor(b))
    ref = use_tensor_pair_ctor(ex, ember.tensor(c))
    got = egm(ex, ember.tensor(c))
    assert isinstance(got, TensorPair)
    np.testing.assert_allclose(got.left.numpy(), ref.left.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got.right.numpy(), ref.right.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got.left.numpy(), (a + c) * a, rtol=1e-6)
    # outside tracing, or without Proxy arguments, construction is ordinary
    assert not efx._symbolic_trace.is_fx_tracing()
    assert isinstance(TensorPair(1, 2), TensorPair)


def test_proxyable_instance_as_constant_becomes_get_attr():
    const = TensorPair(ember.ones(2), ember.ones(2))

    def f(x):
        return _combine(const, x)  # a wrapped leaf: const is an argument

    gm = efx.symbolic_trace(f)
    gets = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert [n.target for n in gets] == ["_TensorPair_constant_0"]
    assert getattr(gm, "_TensorPair_constant_0") is const
    x = ember.tensor(np.random.default_rng(4).standard_normal(2).astype(np.float32))
    np.testing.assert_allclose(gm(x).numpy(), x.numpy() + 1, rtol=1e-6)


def _combine(pair, x):
    return pair.left + x


efx.wrap("_combine")


def test_ph_marker():
    assert repr(efx.PH) == "PH"
    from ember.fx._symbolic_trace import PHBase, PHWithMeta

    assert isinstance(efx.PH, PHBase) and PHWithMeta("k").ph_key == "k"


def _pair_fn(x, y):
    return x[0] + y, (x[1], {"k": y})


def _branchy(b, a):
    if b:
        return a["a"]
    return a["z"]


def test_ph_concrete_args_flatten_inputs_like_torch():
    torch = _torch()
    import torch.fx as tfx

    egm = efx.symbolic_trace(_pair_fn, concrete_args={"x": (efx.PH, efx.PH)})
    tgm = tfx.symbolic_trace(_pair_fn, concrete_args={"x": (tfx.PH, tfx.PH)})
    assert egm.code == tgm.code  # same text, specs read from self._in_spec/_out_spec
    assert [n.name for n in egm.graph.nodes] == [n.name for n in tgm.graph.nodes]
    rng = np.random.default_rng(6)
    a, b, c = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    eo = egm((ember.tensor(a), ember.tensor(b)), ember.tensor(c))
    to = tgm((torch.tensor(a), torch.tensor(b)), torch.tensor(c))
    assert isinstance(eo, tuple) and isinstance(eo[1], tuple) and isinstance(eo[1][1], dict)
    np.testing.assert_allclose(eo[0].numpy(), to[0].numpy())
    np.testing.assert_allclose(eo[1][0].numpy(), to[1][0].numpy())
    np.testing.assert_allclose(eo[1][1]["k"].numpy(), to[1][1]["k"].numpy())
    # the Interpreter flattens/rebuilds through the codegen as well
    io = Interpreter(egm).run((ember.tensor(a), ember.tensor(b)), ember.tensor(c))
    np.testing.assert_allclose(io[0].numpy(), a + c)
    assert egm.graph.process_inputs((1, 2), 3) == [1, 2, 3]
    # copies keep the specs
    cp = copy.deepcopy(egm)
    np.testing.assert_allclose(cp((ember.tensor(a), ember.tensor(b)), ember.tensor(c))[0].numpy(), a + c)
    # a value without the traced structure is refused
    with pytest.raises(ValueError):
        egm({"no": 1}, ember.tensor(c))

    # dict inputs with a specialised literal: same placeholders as torch, the
    # literal guarded
    inp = {"a": {"a": efx.PH, "z": efx.PH}, "b": True}
    egm = efx.symbolic_trace(_branchy, concrete_args=inp)
    tgm = tfx.symbolic_trace(_branchy, concrete_args={"a": {"a": tfx.PH, "z": tfx.PH}, "b": True})
    assert [(n.op, n.name) for n in egm.graph.nodes if n.op == "placeholder"] == \
        [(n.op, n.name) for n in tgm.graph.nodes if n.op == "placeholder"]
    x, z = ember.tensor(a), ember.tensor(b)
    np.testing.assert_allclose(egm(True, {"a": x, "z": z}).numpy(), a)
    with pytest.raises(AssertionError, match="b has been specialized to have value True"):
        egm(False, {"a": x, "z": z})


def test_ph_on_modules_meta_and_errors():
    class M(ember.nn.Module):
        def forward(self, x, y):
            return x["a"] * 2 + y

    gm = efx.symbolic_trace(M(), concrete_args={"x": {"a": efx.PH}})
    assert "x_1, y, = fx_pytree.tree_flatten_spec([x, y], self._in_spec)" in gm.code
    v = np.random.default_rng(7).standard_normal(2).astype(np.float32)
    np.testing.assert_allclose(gm({"a": ember.tensor(v)}, 1.0).numpy(), v * 2 + 1, rtol=1e-6)

    from ember.fx._symbolic_trace import PHWithMeta

    ph = PHWithMeta("first")
    ph.note = "kept"

    def f(x):
        return x[0] - x[1]

    gm = efx.symbolic_trace(f, concrete_args={"x": [ph, efx.PH]})
    first = [n for n in gm.graph.nodes if n.op == "placeholder"][0]
    assert first.name == "x_1" and first.ph_key == "first" and first.note == "kept"

    const = ember.ones(2)
    with pytest.warns(UserWarning, match="Was not able to add assertion"):
        gm = efx.symbolic_trace(f, concrete_args={"x": [efx.PH, const]})
    np.testing.assert_allclose(gm([ember.tensor(v), const]).numpy(), v - 1, rtol=1e-6)

    def kw(a, *, b):
        return a[0] + b

    with pytest.raises(NotImplementedError, match="keyword-only"):
        efx.symbolic_trace(kw, concrete_args={"a": (efx.PH,)})


# -- config / tensor_type / operator_schemas ------------------------------------------------------
def test_config_matches_torch():
    torch = _torch()
    import torch.fx.config as tcfg

    from ember.fx import config as ecfg

    for name in ("disable_progress", "verbose_progress", "do_not_emit_stack_traces"):
        assert getattr(ecfg, name) == getattr(tcfg, name)
    del torch


def test_tensor_type_relations_match_torch():
    _torch()
    from torch.fx import tensor_type as ttt

    from ember.fx import tensor_type as ett

    rng = np.random.default_rng(5)

    def draw(mod):
        def one(spec):
            kind, dims = spec
            if kind == "dyn":
                return mod.Dyn
            if kind == "int":
                return int
            return mod.TensorType(tuple(mod.Dyn if d is None else d for d in dims))

        return one

    specs = []
    for _ in range(40):
        k = rng.choice(["dyn", "int", "tt", "tt", "tt"])
        dims = [None if rng.random() < 0.3 else int(rng.integers(1, 3)) for _ in range(int(rng.integers(1, 3)))]
        specs.append((str(k), dims))
    for s1 in specs[:20]:
        for s2 in specs[20:]:
            e1, e2 = draw(ett)(s1), draw(ett)(s2)
            t1, t2 = draw(ttt)(s1), draw(ttt)(s2)
            assert ett.is_consistent(e1, e2) == ttt.is_consistent(t1, t2)
            assert ett.is_more_precise(e1, e2) == ttt.is_more_precise(t1, t2)
    assert repr(ett.TensorType[1, ett.Dyn]) == repr(ttt.TensorType[1, ttt.Dyn]).replace("Dyn", "Dyn")
    assert ett.TensorType((1, 2)) == ett.TensorType[1, 2] and str(ett.Dyn) == "Dyn"
    with pytest.raises(TypeError):
        hash(ett.TensorType((1,)))


def _pyfn(a, b, c=3, *, d=4):
    return a


def test_normalize_function_matches_torch_on_python_functions():
    _torch()
    from torch.fx import operator_schemas as tos

    from ember.fx import operator_schemas as eos

    calls = [((1, 2), {}), ((1,), {"b": 2}), ((1, 2, 5), {"d": 7}), ((), {"a": 1, "b": 2})]
    for args, kwargs in calls:
        for only_kw in (False, True):
            assert eos.normalize_function(_pyfn, args, kwargs, normalize_to_only_use_kwargs=only_kw) == \
                tos.normalize_function(_pyfn, args, kwargs, normalize_to_only_use_kwargs=only_kw)

    def varargs(*a):
        return a

    assert eos.normalize_function(varargs, (1,)) is None is tos.normalize_function(varargs, (1,))
    with pytest.raises(TypeError):
        eos.normalize_function(_pyfn, (1,), {})


def test_normalize_ember_ops_and_modules():
    from ember.fx import operator_schemas as eos

    x = ember.ones(2)
    res = eos.normalize_function(ember.add, (x, x))
    assert res.args == (x, x) and res.kwargs == {"alpha": 1}
    res = eos.normalize_function(ember.add, (x, x), normalize_to_only_use_kwargs=True)
    assert res.args == () and list(res.kwargs) == ["self", "other", "alpha"]
    assert eos.get_signature_for_torch_op(ember.add)[0].parameters.keys() == {"self", "other", "alpha"}
    assert eos.get_signature_for_torch_op(_pyfn) is None
    assert eos.get_signature_for_torch_op(_pyfn, return_schemas=True) == (None, None)

    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(2, 2)
            self.sub = ember.nn.Module()

    m = M()
    res = eos.normalize_module(m, "lin", (x,), normalize_to_only_use_kwargs=True)
    assert res.args == () and list(res.kwargs) == ["input"]
    assert eos.normalize_module(m, "sub", (x,)) is None  # not an ember.nn class
    with pytest.raises(RuntimeError, match="root did not have that target"):
        eos.normalize_module(m, "nope", (x,))
    # in-place and out= calls are refused, functional ones pass
    eos.check_for_mutable_operation(ember.add, (x, x), {})
    with pytest.raises(RuntimeError, match="mutable operation"):
        eos.check_for_mutable_operation(ember.Tensor.add_, (x, x), {})


def test_type_matches_and_create_type_hint_match_torch():
    torch = _torch()
    import numbers

    from torch.fx import operator_schemas as tos

    from ember.fx import operator_schemas as eos

    class A:
        pass

    class B(A):
        pass

    pairs = [
        (int, int), (int, bool), (float, int), (typing.Union[int, float], float),
        (typing.Optional[int], type(None)), (typing.List[int], int), (typing.List[int], typing.List[bool]),
        (typing.List[A], typing.Tuple[B, B]), (typing.List[A], typing.Tuple[B, ...]),
        (typing.List[A], typing.Tuple[int]), (numbers.Number, float), (A, B), (B, A), (str, int),
    ]
    for s, a in pairs:
        assert eos.type_matches(s, a) == tos.type_matches(s, a), (s, a)
    assert eos.type_matches(int, ember.dtype) and tos.type_matches(int, torch.dtype)
    for x in ([B, A], (A, B), [A, int], [], (int,), int):
        assert eos.create_type_hint(x) == tos.create_type_hint(x)


def test_node_normalized_arguments():
    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(3, 3)

        def forward(self, x):
            return ember.add(self.lin(x), x, alpha=2)

    gm = efx.symbolic_trace(M())
    by_op = {n.op: n for n in gm.graph.nodes}
    add = by_op["call_function"]
    res = add.normalized_arguments(gm)
    assert [a.name for a in res.args] == ["lin", "x"] and res.kwargs == {"alpha": 2}
    res = add.normalized_arguments(gm, normalize_to_only_use_kwargs=True)
    assert res.args == () and list(res.kwargs) == ["self", "other", "alpha"]
    res = by_op["call_module"].normalized_arguments(gm, normalize_to_only_use_kwargs=True)
    assert list(res.kwargs) == ["input"]
    assert by_op["placeholder"].normalized_arguments(gm) is None
