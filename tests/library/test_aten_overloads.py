"""ember.ops.aten overloads (``aten.add.Tensor``, ``aten.sum.dim_IntList``, ...), their schemas
(``FunctionSchema``) and tags, checked against torch's: the table ember carries
(``ember/ops/_aten_schemas.json``), each overload's name/schema/tags, and the results of calling
a broad sample of overloads with torch's argument conventions (hypothesis-drawn shapes and
values)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import ember
from ember.ops._aten_namespace import OpOverload, OpOverloadPacket, torch_overloads, _table

aten = ember.ops.aten


# ---------------------------------------------------------------------- no torch needed
def test_overloads_are_objects_with_torch_names():
    add = aten.add
    assert isinstance(add, OpOverloadPacket) and isinstance(add.Tensor, OpOverload)
    assert add.Tensor is add.Tensor and add.Tensor.overloadpacket is add and add.Tensor._overloadpacket is add
    assert add.Tensor._overloadname == "Tensor" and add.Tensor.__name__ == "add.Tensor"
    assert add.Tensor.name() == "aten::add.Tensor" and add.default.name() == "aten::add"
    assert str(add.Tensor) == "aten.add.Tensor" and repr(add.Tensor) == "<OpOverload(op='aten.add', overload='Tensor')>"
    assert add.overloads()[:4] == ["Tensor", "Scalar", "out", "Scalar_out"] and "default" in add.overloads()
    assert "Tensor" in dir(add) and add.Tensor.namespace == "aten"
    with pytest.raises(AttributeError, match="The underlying op of 'aten.add' has no overload name 'foo'"):
        add.foo
    s = add.Tensor._schema
    assert isinstance(s, ember.FunctionSchema)
    assert str(s) == "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    assert [a.name for a in s.arguments] == ["self", "other", "alpha"] and s.arguments[2].kwarg_only
    assert not s.is_mutable and aten.add_.Tensor._schema.is_mutable
    assert aten.add.out._schema.arguments[-1].is_out
    assert ember.Tag.pointwise in add.Tensor.tags and ember.Tag.core in add.Tensor.tags
    assert ember.Tag.nondeterministic_seeded in aten.binomial.default.tags
    assert ember.Tag.reduction in aten.sum.dim_IntList.tags and ember.Tag.out in aten.sum.IntList_out.tags
    assert _table()["tags"][7] == "inplace_view" and 7 in torch_overloads("transpose_")["default"][1]
    assert aten.view.default.is_view and not aten.add.Tensor.is_view


def test_default_is_embers_op():
    x = ember.randn(3, 4)
    # the dispatcher hands handlers .default with ember's own arguments (Tensor|Scalar other)
    assert ember.equal(aten.add.default(x, 2), x + 2)
    assert ember.equal(aten.sum.default(x, [0], True), x.sum(0, keepdim=True))
    # torch's add.default is TorchScript's Scalar + Scalar: ember's default keeps ember's schema
    assert str(aten.add.default._schema) == "aten::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    assert str(aten.mm.default._schema) == "aten::mm(Tensor self, Tensor mat2) -> Tensor"


def test_argument_conventions():
    x, y = ember.randn(3, 4), ember.randn(3, 4) + 3
    assert ember.allclose(aten.add.Scalar(x, 2), x + 2)
    assert ember.allclose(aten.add.Tensor(x, y, alpha=2), x + 2 * y)
    assert ember.allclose(aten.sum.dim_IntList(x, [0], True), x.sum(0, keepdim=True))
    assert ember.equal(aten.div.Tensor_mode(x, y, rounding_mode="floor"), ember.div(x, y, rounding_mode="floor"))
    v, i = aten.max.dim(x, 1, True)
    assert ember.equal(v, x.max(1, keepdim=True)[0]) and ember.equal(i, x.max(1, keepdim=True)[1])
    out = ember.empty(0)
    assert aten.add.out(x, y, out=out) is out and ember.allclose(out, x + y)
    vals, idx = ember.empty(0), ember.empty(0, dtype=ember.int64)
    r = aten.sort.values(x, 1, values=vals, indices=idx)
    assert r[0] is vals and r[1] is idx and ember.equal(vals, x.sort(1)[0])
    assert aten._to_copy.default(x, dtype=ember.float64, layout=ember.strided, pin_memory=False).dtype == ember.float64
    z = x.clone()
    assert aten.add_.Tensor(z, y) is z and ember.allclose(z, x + y)


def test_errors_name_the_overload():
    x = ember.randn(2)
    with pytest.raises(NotImplementedError, match=r"aten\.add\.int .*no implementation"):
        aten.add.int(1, 2)
    with pytest.raises(NotImplementedError, match=r"aten\.special_zeta\.self_scalar .*takes no number"):
        aten.special_zeta.self_scalar(3.0, x)
    # (bitwise ops take a number first since session 47, as torch's Scalar_Tensor overloads)
    assert aten.bitwise_and.Scalar_Tensor(3, ember.tensor([5, 6, 7])).tolist() == [1, 2, 3]
    with pytest.raises(NotImplementedError, match="non_blocking"):
        aten._to_copy.default(x, non_blocking=True)
    with pytest.raises(RuntimeError, match=r"aten::add\(\) is missing value for argument 'other'\. Declaration: "
                                           r"aten::add\.Tensor\(Tensor self"):
        aten.add.Tensor(x)
    with pytest.raises(RuntimeError, match="Unknown keyword argument 'beta'"):
        aten.add.Tensor(x, x, beta=2)
    with pytest.raises(AttributeError):
        aten.not_an_op


def test_table_is_whole():
    t = _table()
    assert len(t["ops"]) > 1500 and sum(len(v) for v in t["ops"].values()) > 3500
    assert t["tags"] == list(ember.Tag.__members__)
    assert list(torch_overloads("sum"))[:3] == ["dim_IntList", "default", "IntList_out"]
    for name, ovs in t["ops"].items():
        for ov in ovs:
            s = ember.parse_schema(f"aten::{name}" + ("" if ov == "default" else f".{ov}") + ovs[ov][0])
            assert s.name == f"aten::{name}" and s.overload_name == ("" if ov == "default" else ov)


def test_parse_schema_torch_forms():
    s = ember.parse_schema("aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor")
    assert str(s.arguments[1].type) == "List[Optional[Tensor]]"
    assert str(s) == "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"
    s = ember.parse_schema("aten::_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()")
    assert s.is_mutable and s.arguments[0].alias_info.is_write
    s = ember.parse_schema("f(Dict(str, t)(a!) d, (Tensor, tVal)[] p, str c=\" \\n\") -> Future(t)")
    assert [str(a.type) for a in s.arguments] == ["Dict[str, t]", "List[Tuple[Tensor, tVal]]", "str"]
    assert s.arguments[2].default_value == " \n" and str(s.returns[0].type) == "Future[t]"
    s = ember.parse_schema("f(int[2] padding=0, int[1] d=0) -> Tensor")
    assert str(s) == "f(int[2] padding=0, int[1] d=[0]) -> Tensor" and s.arguments[0].default_value == [0, 0]


# ---------------------------------------------------------------------- against torch
def _torch():
    return pytest.importorskip("torch")


def test_table_matches_torch():
    torch = _torch()
    t = _table()
    assert t["tags"] == list(torch.Tag.__members__)
    names = sorted({s.name[6:] for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::")})
    assert set(t["ops"]) == set(names)
    for name in ("add", "sum", "convolution", "native_layer_norm", "_to_copy", "view", "max", "index_put_"):
        pkt = getattr(torch.ops.aten, name)
        assert list(t["ops"][name]) == pkt.overloads()
        for ov in pkt.overloads():
            op = getattr(pkt, ov)
            assert f"aten::{name}" + ("" if ov == "default" else f".{ov}") + t["ops"][name][ov][0] == str(op._schema)
            assert [t["tags"][i] for i in t["ops"][name][ov][1]] == sorted((x.name for x in op.tags),
                                                                          key=list(torch.Tag.__members__).index)


def _describe(a):
    ai = a.alias_info
    return (a.name, str(a.type), a.N, a.kwarg_only, a.has_default_value(), a.default_value if
            a.has_default_value() else None, None if ai is None else (set(ai.before_set), set(ai.after_set),
                                                                       ai.is_write))


def test_every_aten_schema_parses_as_torchs():
    torch = _torch()
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith("aten::"):
            continue
        text = str(s)
        e = ember.parse_schema(text)
        assert str(e) == text
        assert e.is_mutable == s.is_mutable, text
        assert [_describe(a) for a in e.arguments] == [_describe(a) for a in s.arguments], text
        assert [_describe(a) for a in e.returns] == [_describe(a) for a in s.returns], text


def test_packets_match_torch():
    torch = _torch()
    for name in dir(aten):
        pkt = getattr(aten, name)
        if not isinstance(pkt, OpOverloadPacket) or not hasattr(torch.ops.aten, name):
            continue
        tp = getattr(torch.ops.aten, name)
        want = tp.overloads() + ([] if "default" in tp.overloads() else ["default"])
        assert pkt.overloads() == want, name
        for ov in tp.overloads():
            o, to = getattr(pkt, ov), getattr(tp, ov)
            assert (o.__name__, o._overloadname, o.name()) == (to.__name__, to._overloadname, to.name())
            if ov != "default" or o.op is None or str(o._schema) == str(to._schema):
                if ov != "default":
                    assert str(o._schema) == str(to._schema)
                    assert [t.name for t in o.tags] == [t.name for t in to.tags]
                    assert o.is_view == to.is_view


# Overloads called with torch's conventions; "T" draws a float tensor of the given shape, "P" a
# positive one, "I" an int64 one in [0, 3), "B" a bool one; everything else is passed as is.
SAMPLES = [
    ("add.Tensor", [("T", (3, 4)), ("T", (3, 4))], {"alpha": 2}),
    ("add.Scalar", [("T", (3, 4)), 2.5], {}),
    ("sub.Tensor", [("T", (3, 4)), ("T", (4,))], {}),
    ("sub.Scalar", [("T", (3, 4)), 3], {}),
    ("rsub.Scalar", [("T", (3, 4)), 1.5], {}),
    ("mul.Tensor", [("T", (2, 3)), ("T", (2, 3))], {}),
    ("mul.Scalar", [("T", (2, 3)), -2], {}),
    ("div.Tensor", [("T", (2, 3)), ("P", (2, 3))], {}),
    ("div.Scalar", [("T", (2, 3)), 4], {}),
    ("div.Tensor_mode", [("T", (2, 3)), ("P", (2, 3))], {"rounding_mode": "floor"}),
    ("div.Scalar_mode", [("T", (2, 3)), 0.7], {"rounding_mode": "trunc"}),
    ("sum.default", [("T", (3, 4))], {}),
    ("sum.dim_IntList", [("T", (3, 4)), [0], True], {}),
    ("sum.dim_IntList", [("T", (3, 4)), [1]], {"dtype": "float64"}),
    ("mean.dim", [("T", (3, 4)), [1], True], {}),
    ("mean.default", [("T", (3, 4))], {}),
    ("amax.default", [("T", (3, 4)), [0]], {}),
    ("max.dim", [("T", (3, 4)), 1, True], {}),
    ("min.dim", [("T", (3, 4)), 0], {}),
    ("max.default", [("T", (3, 4))], {}),
    ("max.other", [("T", (3, 4)), ("T", (3, 4))], {}),
    ("pow.Tensor_Scalar", [("T", (3, 4)), 2], {}),
    ("pow.Tensor_Tensor", [("P", (3, 4)), ("T", (3, 4))], {}),
    ("clamp.default", [("T", (3, 4)), -0.5, 0.5], {}),
    ("eq.Tensor", [("I", (3, 4)), ("I", (3, 4))], {}),
    ("gt.Scalar", [("T", (3, 4)), 0.1], {}),
    ("where.self", [("B", (3, 4)), ("T", (3, 4)), ("T", (3, 4))], {}),
    ("view.default", [("T", (3, 4)), [-1]], {}),
    ("view.dtype", [("T", (3, 4)), "int32"], {}),
    ("permute.default", [("T", (2, 3, 4)), [2, 0, 1]], {}),
    ("transpose.int", [("T", (3, 4)), 0, 1], {}),
    ("unsqueeze.default", [("T", (3, 4)), 1], {}),
    ("squeeze.dim", [("T", (1, 4)), 0], {}),
    ("cat.default", [[("T", (2, 3)), ("T", (2, 3))], 1], {}),
    ("stack.default", [[("T", (2, 3)), ("T", (2, 3))]], {}),
    ("_to_copy.default", [("T", (3, 4))], {"dtype": "float64"}),
    ("mm.default", [("T", (3, 4)), ("T", (4, 2))], {}),
    ("addmm.default", [("T", (2,)), ("T", (3, 4)), ("T", (4, 2))], {"beta": 0.5, "alpha": 2}),
    ("bmm.default", [("T", (2, 3, 4)), ("T", (2, 4, 2))], {}),
    ("relu.default", [("T", (3, 4))], {}),
    ("gelu.default", [("T", (3, 4))], {"approximate": "tanh"}),
    ("_softmax.default", [("T", (3, 4)), 1, False], {}),
    ("_log_softmax.default", [("T", (3, 4)), 0, False], {}),
    ("native_layer_norm.default", [("T", (2, 3, 4)), [4], ("T", (4,)), ("T", (4,)), 1e-5], {}),
    ("select.int", [("T", (3, 4)), 0, 1], {}),
    ("slice.Tensor", [("T", (3, 4)), 1, 0, 2], {}),
    ("expand.default", [("T", (1, 3)), [4, 3]], {}),
    ("clone.default", [("T", (3, 4))], {}),
    ("neg.default", [("T", (3, 4))], {}),
    ("exp.default", [("T", (3, 4))], {}),
    ("var.correction", [("T", (3, 4)), [1]], {"correction": 1, "keepdim": True}),
    ("std.correction", [("T", (3, 4)), [0]], {"correction": 0}),
    ("cumsum.default", [("T", (3, 4)), 1], {}),
    ("argmax.default", [("T", (3, 4)), 1], {}),
    ("gather.default", [("T", (3, 4)), 1, ("I", (3, 2))], {}),
    ("index_select.default", [("T", (3, 4)), 1, ("I", (2,))], {}),
    ("masked_fill.Scalar", [("T", (3, 4)), ("B", (3, 4)), 0.3], {}),
    ("remainder.Scalar", [("T", (3, 4)), 1.5], {}),
    ("fmod.Tensor", [("T", (3, 4)), ("P", (3, 4))], {}),
    ("leaky_relu.default", [("T", (3, 4)), 0.2], {}),
    ("hardtanh.default", [("T", (3, 4)), -0.3, 0.4], {}),
    ("sort.default", [("T", (3, 4)), 1], {}),
    ("embedding.default", [("T", (5, 3)), ("I", (2, 2))], {}),
    ("logsumexp.default", [("T", (3, 4)), [1]], {}),
    ("prod.dim_int", [("T", (3, 4)), 1], {}),
    ("split.Tensor", [("T", (4, 3)), 2], {}),
    ("bitwise_and.Tensor", [("I", (3, 4)), ("I", (3, 4))], {}),
    ("lerp.Scalar", [("T", (3, 4)), ("T", (3, 4)), 0.3], {}),
    ("addcmul.default", [("T", (3, 4)), ("T", (3, 4)), ("T", (3, 4))], {"value": 0.5}),
    ("threshold.default", [("T", (3, 4)), 0.1, -1.0], {}),
    ("mean.out", [("T", (3, 4)), [1]], {"out": ("E", (0,))}),
    ("mul.out", [("T", (3, 4)), ("T", (3, 4))], {"out": ("E", (0,))}),
    ("max.dim_max", [("T", (3, 4)), 1], {"max": ("E", (0,)), "max_values": ("EI", (0,))}),
    ("full.default", [[2, 3], 1.5], {"dtype": "float64"}),
]


def _build(spec, lib, rng, cache):
    if isinstance(spec, tuple) and spec and spec[0] in ("T", "P", "I", "B", "E", "EI"):
        key = (id(spec),)
        if key not in cache:
            kind, shape = spec
            if kind == "T":
                cache[key] = rng.standard_normal(shape).astype(np.float32)
            elif kind == "P":
                cache[key] = (rng.random(shape) + 0.5).astype(np.float32)
            elif kind == "I":
                cache[key] = rng.integers(0, 3, shape).astype(np.int64)
            elif kind == "B":
                cache[key] = rng.random(shape) > 0.5
            elif kind == "E":
                cache[key] = np.zeros(shape, np.float32)
            else:
                cache[key] = np.zeros(shape, np.int64)
        return lib.tensor(cache[key].copy())
    if isinstance(spec, list):
        return [_build(s, lib, rng, cache) for s in spec]
    if spec in ("float64", "int32"):
        return getattr(lib, spec)
    return spec


def _same(e, t):
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)) and len(e) == len(t)
        for a, b in zip(e, t):
            _same(a, b)
        return
    if hasattr(t, "numpy"):
        assert isinstance(e, ember.Tensor), type(e)
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        assert tuple(e.shape) == tuple(t.shape)
        tn = t.detach().numpy()
        if t.dtype.is_floating_point:
            np.testing.assert_allclose(e.numpy(), tn, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(e.numpy(), tn)
        return
    assert e == t


@pytest.mark.parametrize("name,args,kwargs", SAMPLES, ids=[s[0] for s in SAMPLES])
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 31 - 1))
def test_overload_matches_torch(name, args, kwargs, seed):
    torch = _torch()
    op, ov = name.split(".")
    eo, to = getattr(getattr(aten, op), ov), getattr(getattr(torch.ops.aten, op), ov)
    rng = np.random.default_rng(seed)
    cache = {}
    ea = [_build(a, ember, rng, cache) for a in args]
    ek = {k: _build(v, ember, rng, cache) for k, v in kwargs.items()}
    ta = [_build(a, torch, rng, cache) for a in args]
    tk = {k: _build(v, torch, rng, cache) for k, v in kwargs.items()}
    want = to(*ta, **tk)
    got = eo(*ea, **ek)
    _same(got, want)
    for k in ek:                    # out= overloads return their out tensors
        if k in ("out", "max", "max_values"):
            assert any(g is ek[k] for g in (got if isinstance(got, tuple) else (got,)))


# ---------------------------------------------------------------------- dir(ember), fx names
def test_dir_lists_lazy_names():
    names = dir(ember)
    for n in ("max_pool2d", "compile", "nn", "Tag", "parse_schema", "vmap", "cat", "FunctionSchema"):
        assert n in names, n
    assert names == sorted(names) and all(hasattr(ember, n) for n in ("max_pool2d", "kl_div", "Future"))


def test_fx_code_names_ember_functions_as_torch_does():
    from ember.fx.experimental.proxy_tensor import make_fx

    def f(x, y):
        return ember.cat([x, y]).view(4, 3)[:2] + ember.where(x > 0, x, y).max()

    x, y = ember.randn(2, 3), ember.randn(2, 3)
    gm = make_fx(f)(x, y)
    code = gm.code
    # make_fx records torch's aten overloads, printed as torch prints torch.ops.aten.cat.default
    assert "ember.ops.aten.cat.default([x_1, y_1])" in code and "ember_cat" not in code
    assert "ember.ops.aten.slice.Tensor(" in code and "ember_" not in code
    assert ember.allclose(gm(x, y), f(x, y))
    assert "target=ember.ops.aten.cat.default]" in str(gm.graph)

    class M(ember.nn.Module):
        def forward(self, a, b):
            return ember.cat([a, b]) + ember.stack([a, b]).sum(0).repeat(2, 1)

    sm = ember.fx.symbolic_trace(M())
    assert "ember.cat([a, b])" in sm.code and "ember.stack([a, b])" in sm.code
    assert ember.allclose(sm(x, y), M()(x, y))
