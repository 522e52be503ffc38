"""torch's sub-byte and bit-container dtypes (uint1..7, int1..7, bits*, float4_e2m1fn_x2):
the dtype objects' attributes, and which tensor operations run on them (made, viewed, moved)
versus torch's refusals, compared with torch 2.13 on CPU."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

NAMES = ([f"uint{n}" for n in range(1, 8)] + [f"int{n}" for n in range(1, 8)]
         + ["bits1x8", "bits2x4", "bits4x2", "bits8", "bits16", "float4_e2m1fn_x2"])


def _outcome(f):
    try:
        r = f()
        if isinstance(r, (ember.Tensor, torch.Tensor)):
            return ("tensor", str(r.dtype).split(".")[-1], tuple(r.shape))
    except Exception as e:                       # noqa: BLE001 - the error is what is compared
        return ("error", type(e).__name__, str(e))
    return ("value", r)


@pytest.mark.parametrize("name", NAMES)
def test_dtype_attributes(name):
    e, t = getattr(ember, name), getattr(torch, name)
    assert repr(e) == repr(t).replace("torch.", "ember.")
    assert (e.itemsize, e.is_floating_point, e.is_complex) == (t.itemsize, t.is_floating_point, t.is_complex)
    assert _outcome(lambda: e.is_signed) == _outcome(lambda: t.is_signed)
    assert e.to_real() is e
    assert _outcome(lambda: e.to_complex()) == _outcome(lambda: t.to_complex())
    assert ember.promote_types(e, e) is e
    assert ember.empty(3, dtype=name).dtype is e          # by name too
    import pickle
    assert pickle.loads(pickle.dumps(e)) is e


@pytest.mark.parametrize("name", NAMES)
def test_creation_and_moves(name):
    rng = np.random.default_rng(0)
    for lib in (ember, torch):
        d = getattr(lib, name)
        z = lib.zeros(2, 3, dtype=d)
        assert z.dtype == d and z.element_size() == d.itemsize
        assert z.view(lib.uint8).sum().item() == 0
        assert lib.empty_like(z).dtype == d and lib.zeros_like(z).dtype == d
        assert z.new_empty(4).dtype == d and z.new_zeros(4).dtype == d
        assert lib.empty_strided((2, 2), (1, 2), dtype=d).stride() == (1, 2)
    # the same ops on both: results' dtypes and shapes, or the same error
    raw = rng.integers(0, 256, size=(4, 6), dtype=np.uint8)
    ops = ["t()", "reshape(3, 8)", "permute(1, 0)", "unsqueeze(0)", "expand(2, 4, 6)", "select(0, 1)",
           "narrow(1, 1, 3)", "__getitem__(slice(1, 3))", "split(2)[1]", "unbind()[0]", "flatten()",
           "as_strided((2,), (2,))", "detach()", "contiguous()", "clone()", "t().contiguous()", "repeat(2, 1)",
           "zero_()", "fill_(1)", "fill_(0.5)", "add(X)", "mul(X)", "eq(X)", "neg()", "sum()", "max()", "flip(0)",
           "to(ember.float32)", "float()", "index_select(0, ember.tensor([0]))",
           "masked_select(ember.ones(X.shape, dtype=ember.bool))", "copy_(X)", "copy_(ember.zeros(X.shape, dtype=ember.uint8))",
           "roll(1)", "diag()", "ne(X)", "abs()", "isnan()", "any()", "tril()", "bitwise_and(X)", "lt(X)", "sort()[0]",
           "masked_fill(ember.ones(X.shape, dtype=ember.bool), 0)", "where(ember.ones(X.shape, dtype=ember.bool), X)",
           "__setitem__(0, 1)", "__repr__()", "to(X.dtype, copy=True)"]
    e = ember.tensor(raw).view(getattr(ember, name))
    t = torch.tensor(raw).view(getattr(torch, name))
    # the bytes survive the moves: views (and, where torch copies the dtype, copies) see the original bytes
    back = e.t().contiguous().t() if name.startswith(("bits", "float4")) else e.t().flip(0).flip(0).t()
    as_bytes = back.view(ember.uint8) if e.itemsize == 1 else back.contiguous().view(ember.int16)
    np.testing.assert_array_equal(as_bytes.numpy().view(np.uint8).reshape(4, 6), raw)
    for op in ops:
        got = _outcome(lambda: eval("e." + op.replace("X", "e"), {"e": e, "ember": ember}))
        want = _outcome(lambda: eval("t." + op.replace("X", "t").replace("ember.", "torch."), {"t": t, "torch": torch}))
        if op in ("__setitem__(0, 1)", "__repr__()") and want[0] == "error":
            assert got[0] == "error" and got[1] == want[1], op       # (torch names another kernel: fill_out)
            continue
        if want[0] == "value" and want[1] is None:
            assert got[0] == "value", op
            continue
        if op == "__repr__()" and want[0] == "value":         # float4's printing: ember refuses it
            assert got[0] == "error" and "not implemented" in got[2]
            continue
        if name == "float4_e2m1fn_x2" and op in ("eq(X)", "ne(X)", "isnan()", "to(ember.float32)", "float()"):
            assert got[0] == "error", op                       # torch compares float4; ember does not
            continue
        assert got == want, (op, got, want)

@pytest.mark.parametrize("name", ["uint4", "int4", "bits8", "bits16", "float4_e2m1fn_x2"])
def test_cat_stack_views_keep_bytes(name):
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, size=(3, 4), dtype=np.uint8)
    e = ember.tensor(raw).view(getattr(ember, name))
    t = torch.tensor(raw).view(getattr(torch, name))
    for f in (lambda lib, x: lib.cat([x, x]), lambda lib, x: lib.stack([x, x], 1),
              lambda lib, x: lib.cat([x, x[:1]]), lambda lib, x: x.index_select(1, lib.tensor([2, 0])),
              lambda lib, x: x.flip(1)):
        want = _outcome(lambda: f(torch, t))
        if want[0] == "error":       # (torch refuses some layouts per dtype; ember may run them)
            continue
        a, b = f(ember, e), f(torch, t)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1] and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.contiguous().view(ember.uint8).numpy(), b.contiguous().view(torch.uint8).numpy())


@pytest.mark.parametrize("pair", [("uint4", "uint8"), ("uint4", "float32"), ("bits8", "uint8"), ("bits16", "float32"),
                                  ("uint1", "uint16"), ("uint4", "float8_e5m2"), ("bits8", "int4")])
def test_promotion(pair):
    a, b = pair
    got = _outcome(lambda: ember.promote_types(getattr(ember, a), getattr(ember, b)))
    want = _outcome(lambda: torch.promote_types(getattr(torch, a), getattr(torch, b)))
    if want[0] == "value":
        assert got[0] == "value" and repr(got[1]) == repr(want[1]).replace("torch.", "ember.")
    else:
        assert got == want


def test_int_subbyte_promotion_is_refused():
    # torch fails an internal assert here; ember says which dtypes
    with pytest.raises(RuntimeError, match="Promotion from Int4 and Byte"):
        ember.promote_types(ember.int4, ember.uint8)


def test_finfo_iinfo_refuse():
    for name in ("uint4", "int2", "bits8", "bits16", "float4_e2m1fn_x2"):
        for f in ("iinfo", "finfo"):
            got = _outcome(lambda: getattr(ember, f)(getattr(ember, name)))
            if (name, f) == ("float4_e2m1fn_x2", "finfo"):   # torch returns an object whose fields raise
                assert got[0] == "error"
                continue
            want = _outcome(lambda: getattr(torch, f)(getattr(torch, name)))
            assert got[:2] == want[:2] and got[2].replace("ember", "torch") == want[2], (name, f)
