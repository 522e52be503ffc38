"""Session 33's argument errors: the exception type and text torch raises for typical wrong
arguments (the int-list methods' parser errors, ``F.batch_norm``'s checks, ``randperm``'s,
``random_``'s, the common tensor functions' dims/shapes/dtypes), computed by calling torch in
the test. (Module-qualified names print as ember's: ``torch.Size`` is ``ember.Size``.)"""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _outcome(m, fn):
    try:
        r = fn(m)
    except Exception as e:                          # noqa: BLE001 -- compared with torch's
        return type(e).__name__, str(e).replace("torch.", "ember.")
    return "ok", tuple(r.shape) if hasattr(r, "shape") else r


def _same(fn):
    t, e = _outcome(torch, fn), _outcome(ember, fn)
    assert t == e
    return t


# ---------------------------------------------------------------------- int-list methods
_BAD_INT_LISTS = [((), {}), (([2], [3]), {}), ((2.0, 3), {}), ((2.0,), {}), (((2, 3),), {"foo": 1}),
                  ((2, [3]), {}), (((2, 3), 3), {}), (("a",), {}), ((None,), {}), ((2, 3.0), {}),
                  ((2, "a", 3), {}), (((2, "a"),), {}), (((2.0, 3),), {}), ((True, 3), {}),
                  (((2, 3),), {"@": (2, 3)}), ((), {"@": 2.0}), ((), {"@s": (2, 3)}), ((1, -1), {})]


@pytest.mark.parametrize("name,pname", [("expand", "size"), ("reshape", "shape"), ("permute", "dims"),
                                        ("repeat", "repeats"), ("flip", "dims"), ("tile", "dims")])
@pytest.mark.parametrize("case", range(len(_BAD_INT_LISTS)))
def test_int_list_methods_parser_errors(name, pname, case):
    args, kw = _BAD_INT_LISTS[case]
    kw = {k.replace("@", pname): v for k, v in kw.items()}
    out = _same(lambda m: getattr(m.randn(2, 3), name)(*args, **kw))
    if not args and not kw:
        assert out[0] == "TypeError"


def test_expand_without_sizes_and_keywords():
    assert _same(lambda m: m.randn(2, 3).expand())[0] == "TypeError"
    assert _same(lambda m: m.randn(2, 3).expand(size=(4, 2, 3)))[0] == "ok"
    assert _same(lambda m: m.randn(2, 1).expand((2, 5), implicit=True))[0] == "ok"
    assert _same(lambda m: m.randn(2, 1).expand(2, 5, implicit=1))[0] == "TypeError"
    assert _same(lambda m: m.randn(3).reshape(shape=(3, 1)))[0] == "ok"
    assert _same(lambda m: m.randn(3, 2).permute(dims=(1, 0)))[0] == "ok"
    for reps in [(-1, 1), (1, -2), (-2, 1, 1), (1, 1, -1)]:
        _same(lambda m: m.randn(2, 3).repeat(*reps))
    assert _same(lambda m: m.randn(0, 3).repeat(-1, 1)) == ("ok", (0, 3))


# ---------------------------------------------------------------------- F.batch_norm
def _bn(training=True, momentum=0.1, eps=1e-5, x="2d", rm="ok", rv="ok", w=None):
    def call(m):
        m.manual_seed(0)
        inp = {"2d": m.randn(4, 3), "1d": m.randn(5), "0d": m.tensor(1.0), "one": m.randn(1, 3),
               "empty": m.randn(0, 3), "int": m.ones(4, 3, dtype=m.int64), "3d": m.randn(4, 3, 2)}[x]
        stats = {"ok": m.zeros(3), "small": m.zeros(2), None: None}
        var = {"ok": m.ones(3), "small": m.ones(2), None: None}
        weight = {None: None, "small": m.ones(2), "ok": m.rand(3)}[w]
        r_m, r_v = stats[rm], var[rv]
        out = m.nn.functional.batch_norm(inp, r_m, r_v, weight, None, training=training, momentum=momentum, eps=eps)
        return out if r_m is None else m.cat([out.flatten(), r_m, r_v])
    return call


@pytest.mark.parametrize("kw", [
    dict(momentum=None), dict(training=False, momentum=None), dict(momentum="a"), dict(momentum=1),
    dict(momentum=np.float64(0.2)), dict(rm=None, rv=None, momentum=None), dict(rm=None, rv=None, training=False),
    dict(rm=None, training=False), dict(rv=None, training=False), dict(rm="small"), dict(rm="small", training=False),
    dict(rv="small"), dict(w="small", training=False), dict(x="1d"), dict(x="0d", training=False),
    dict(x="one", momentum=None), dict(x="empty"), dict(x="empty", rm=None, rv=None, training=False),
    dict(x="int"), dict(training=None), dict(training=1), dict(training="yes"), dict(eps=0.0), dict(eps=-1.0),
    dict(eps=-1.0, training=False), dict(eps=0, training=False), dict(eps=None), dict(eps="a"),
    dict(x="3d", rm=None, rv=None), dict(w="ok", training=False), dict(x="empty", w="ok")])
def test_batch_norm_arguments(kw):
    t, e = _outcome(torch, _bn(**kw)), _outcome(ember, _bn(**kw))
    assert t[0] == e[0] and (t[0] == "ok" or t[1] == e[1]), (t, e)


def test_batch_norm_module_cumulative_average():
    """``nn.BatchNorm(momentum=None)``: the cumulative moving average (1 / num_batches_tracked)."""
    def run(m):
        m.manual_seed(3)
        bn = m.nn.BatchNorm1d(5, momentum=None)
        for _ in range(4):
            bn(m.randn(8, 5))
        return m.cat([bn.running_mean, bn.running_var, bn.num_batches_tracked.reshape(1).float()])
    t, e = run(torch), run(ember)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- randperm / random_ / randint
@pytest.mark.parametrize("call", [
    lambda m: m.randperm(-1), lambda m: m.randperm(257, dtype=m.uint8), lambda m: m.randperm(129, dtype=m.int8),
    lambda m: m.randperm(2050, dtype=m.float16), lambda m: m.randperm(3, dtype=m.bool),
    lambda m: m.randperm(3, dtype=m.complex64), lambda m: m.randperm(70000, dtype=m.uint16),
    lambda m: m.randperm(2.5), lambda m: m.randperm(None),
    lambda m: m.randint(-3, 100, (4,), dtype=m.uint8), lambda m: m.randint(0, 3, (4,), dtype=m.bool),
    lambda m: m.randint(5, 5, (2,)), lambda m: m.randint(0, 70000, (2,), dtype=m.float16),
    lambda m: m.empty(3, dtype=m.int32).random_(-2 ** 63, None),
    lambda m: m.empty(3, dtype=m.float16).random_(-2 ** 63, None),
    lambda m: m.empty(3, dtype=m.uint16).random_(), lambda m: m.empty(3).random_(0),
    lambda m: m.empty(3, dtype=m.float16).random_(0, 70000), lambda m: m.empty(3, dtype=m.int8).random_(0, 200),
    lambda m: m.empty(3).random_(**{"from": 3}), lambda m: m.empty(3).random_(1, 2, 3),
    lambda m: m.empty(3).random_(2.5), lambda m: m.empty(3).random_(None), lambda m: m.empty(3).random_(to=None),
    lambda m: m.empty(3).random_(foo=1), lambda m: m.randint(0, 5.0, (2,)), lambda m: m.randint(5.0, (2,)),
    lambda m: m.randint(0.0, 5, (2,)), lambda m: m.empty(0, requires_grad=True).random_(),
    lambda m: m.empty(0, requires_grad=True).random_(3), lambda m: m.empty(2, dtype=m.complex64).random_(),
    lambda m: m.empty(2, dtype=m.complex64).random_(3), lambda m: m.empty(2, dtype=m.complex64).random_(2, None),
    lambda m: m.empty(2, dtype=m.complex128).random_(-2 ** 63, None),
    lambda m: m.randint(0, 3, (2,), dtype=m.complex64)])
def test_random_argument_errors(call):
    assert _same(call)[0] != "ok"


def test_random_of_empty_tensors_of_any_dtype():
    for dt in ("complex64", "uint16", "float32", "int8"):
        assert _same(lambda m: m.empty(0, dtype=getattr(m, dt)).random_()) == ("ok", (0,))


# ---------------------------------------------------------------------- common functions
_COMMON = [
    lambda m, x: x.sum(2), lambda m, x: x.mean(-3), lambda m, x: x.max(5), lambda m, x: x.argmax(2),
    lambda m, x: x.transpose(0, 2), lambda m, x: x.squeeze(3), lambda m, x: x.unsqueeze(3),
    lambda m, x: x.flatten(2), lambda m, x: x.unflatten(1, (3, 2)), lambda m, x: m.cat([x, m.randn(3, 2)]),
    lambda m, x: m.stack([x, m.randn(2, 3)]), lambda m, x: x.split(2, 2), lambda m, x: x.chunk(0),
    lambda m, x: x.narrow(1, 2, 3), lambda m, x: x.select(0, 5), lambda m, x: x.index_select(0, m.tensor([0.5])),
    lambda m, x: x.gather(1, m.tensor([[0]]).float()), lambda m, x: x.scatter(1, m.tensor([[0]]).float(), 1.0),
    lambda m, x: m.where(x > 0, x, m.randn(3)), lambda m, x: m.where(m.randn(4) > 0, m.randn(2, 4), m.randn(3)),
    lambda m, x: x.roll(1, 2), lambda m, x: x.topk(5), lambda m, x: x.sort(2), lambda m, x: x.cumsum(2),
    lambda m, x: m.matmul(x, m.randn(3, 2)), lambda m, x: m.bmm(x, x), lambda m, x: x.view(3, 3),
    lambda m, x: m.zeros(2, -1), lambda m, x: m.zeros(size=(-1,)), lambda m, x: m.ones(2, -3),
    lambda m, x: m.arange(0, 5, 0), lambda m, x: m.linspace(0, 1, -1), lambda m, x: m.eye(-2),
    lambda m, x: m.eye(3, -1), lambda m, x: x.clamp(), lambda m, x: x.min(dim=4),
    lambda m, x: x.scatter(1, m.tensor([[5]]), 1.0), lambda m, x: x.expand_as(m.randn(3, 4)),
    lambda m, x: x.tile(1.5), lambda m, x: x.permute(0, 0), lambda m, x: x.flip(3),
    lambda m, x: x.repeat(-1, 2), lambda m, x: x.reshape(3, -1), lambda m, x: x.expand(3, 2, 5),
    lambda m, x: m.arange(5, 0, 1), lambda m, x: m.arange(0, float("nan")), lambda m, x: m.arange(0, float("inf")),
    lambda m, x: m.cat([]), lambda m, x: m.bmm(m.randn(1, 2, 3), m.randn(1, 3, 2, dtype=m.float64)),
    lambda m, x: m.baddbmm(m.randn(1, 2, 2), m.randn(1, 2, 3, dtype=m.float64), m.randn(1, 3, 2)),
    lambda m, x: m.eye(2.5), lambda m, x: m.baddbmm(m.randn(1, 2, 2, dtype=m.float64), m.randn(1, 2, 3),
                                                    m.randn(1, 3, 2))]


def test_gather_scatter_take_int32_indices():
    """torch 2.13's gather/scatter take int32 indices (values equal to int64's)."""
    def run(m):
        m.manual_seed(1)
        x = m.randn(3, 5)
        i32 = m.randint(0, 5, (3, 4), dtype=m.int32)
        return [x.gather(1, i32), x.scatter(1, i32, 2.0), x.scatter_add(1, i32, m.ones(3, 4)),
                x.index_select(1, i32[0])]
    for a, b in zip(run(torch), run(ember)):
        assert np.array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("i", range(len(_COMMON)))
def test_common_functions_wrong_arguments(i):
    assert _same(lambda m: _COMMON[i](m, m.randn(2, 4)))[0] != "ok"
