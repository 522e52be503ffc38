"""Session 34's argument errors: the exception type and text torch raises (computed by calling
torch in the test) for ``F.batch_norm``'s dtype rules and running-buffer pairing, the int-list
methods without sizes, Python's wordings where torch has its own (missing ``dim``, unknown
keywords, the setitem broadcast, ``std(unbiased=, correction=)``, einsum's operand sizes,
masked_fill's broadcast), and a sweep of common methods/functions called with a wrong argument
type, an unknown keyword, or too many positional arguments. (Module-qualified names print as
ember's: ``torch.Size`` is ``ember.Size``.)"""
import itertools

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


# ---------------------------------------------------------------------- F.batch_norm dtypes / buffers
_BN_DT = {"f": "float32", "d": "float64", "h": "float16", "b": "bfloat16", "l": "int64"}


def _bn_call(x, rm, rv, w, b, training, xs, n):
    def call(m):
        gen = np.random.default_rng(len(xs) * 7 + n)
        inp = m.tensor(gen.standard_normal(xs).astype(np.float32)).to(getattr(m, _BN_DT[x]))

        def mk(d, fill):
            return None if d is None else m.full((n,), fill, dtype=getattr(m, _BN_DT[d]))
        r_m, r_v = mk(rm, 0.25), mk(rv, 1.5)
        out = m.nn.functional.batch_norm(inp, r_m, r_v, mk(w, 0.5), mk(b, 0.1), training=training)
        return out.float().sum().item(), *(None if t is None else t.float().sum().item() for t in (r_m, r_v))
    return call


_BN_CASES = list(itertools.product("fdhl", ["f", "d", "h", None], ["f", "d", None], ["f", "d", None], ["f", None],
                                   [True, False]))


@pytest.mark.parametrize("shape", [((4, 3), 3), ((3,), 0), ((4, 3), 2), ((0, 3), 3), ((1, 3), 3)])
def test_batch_norm_dtypes_and_buffer_pairing(shape):
    """Every combination of input / running-buffer / affine dtypes and of given buffers, in
    training and evaluation, on good and bad shapes: torch's error (the mixed-dtype rule, the
    kernel's "expected scalar type", running_mean without running_var, the order of the rank and
    size checks) or its values."""
    xs, n = shape
    for combo in _BN_CASES:
        fn = _bn_call(*combo, xs, n)
        t, e = _outcome(torch, fn), _outcome(ember, fn)
        if t[0] == "ok" and e[0] == "ok":
            np.testing.assert_allclose(np.array(e[1], dtype=float), np.array(t[1], dtype=float), rtol=2e-2,
                                       atol=2e-2, err_msg=str(combo))
        else:
            assert t == e, combo


def test_batch_norm_mixed_half_input_values():
    """A float16/bfloat16 input with float32 statistics (torch's mixed mode): output and updated
    buffers as torch's."""
    for dt in ("float16", "bfloat16"):
        def run(m):
            gen = np.random.default_rng(3)
            x = m.tensor(gen.standard_normal((6, 4)).astype(np.float32) * 2 + 1).to(getattr(m, dt))
            rm, rv = m.tensor(gen.random(4).astype(np.float32)), m.tensor(gen.random(4).astype(np.float32) + 1)
            out = m.nn.functional.batch_norm(x, rm, rv, training=True, momentum=0.3)
            assert out.dtype == getattr(m, dt)
            return np.concatenate([out.float().numpy().ravel(), rm.numpy(), rv.numpy()])
        np.testing.assert_allclose(run(ember), run(torch), rtol=1e-2, atol=1e-2)


def test_instance_norm_buffer_pairing():
    _same(lambda m: m.nn.functional.instance_norm(m.randn(4, 3, 5), m.zeros(3), None))
    _same(lambda m: m.nn.functional.instance_norm(m.randn(4, 3, 5), None, m.ones(3)))


# ---------------------------------------------------------------------- int-list methods without sizes
@pytest.mark.parametrize("call", [
    lambda m: m.randn(2, 3).flip(), lambda m: m.randn(2, 3).tile(), lambda m: m.flip(m.randn(2, 3)),
    lambda m: m.tile(m.randn(2, 3)), lambda m: m.tensor(1.5).expand(), lambda m: m.tensor(1.5).permute(),
    lambda m: m.tensor(1.5).repeat(), lambda m: m.randn(1).reshape(), lambda m: m.randn(1, 1).reshape(),
    lambda m: m.tensor(1.5).reshape(), lambda m: m.permute(m.tensor(1.5)),
    # the explicit empty list: accepted where torch accepts it
    lambda m: m.randn(2, 3).flip(()), lambda m: m.randn(2, 3).tile(()), lambda m: m.flip(m.randn(2, 3), ()),
    lambda m: m.tensor(1.5).expand(()), lambda m: m.tensor(1.5).permute(()), lambda m: m.tensor(1.5).repeat(()),
    lambda m: m.randn(1).reshape(()), lambda m: m.randn(1, 1).reshape([]), lambda m: m.randn(2, 3).repeat(()),
    lambda m: m.tensor(1.5).expand(3), lambda m: m.tensor(1.5).expand([]).add(1)])
def test_int_list_methods_without_sizes(call):
    _same(call)


def test_internal_callers_of_empty_shapes():
    """ember's own code that expands/reshapes/permutes to a possibly empty shape (0-dim operands)
    still works with the public methods refusing no sizes: values as torch's."""
    def run(m):
        g = np.random.default_rng(4)
        a, b = m.tensor(float(g.standard_normal())), m.tensor(g.standard_normal(3).astype(np.float32))
        outs = [m.broadcast_to(a, ()), *m.broadcast_tensors(a, m.tensor(2.0)), m.kron(a, m.tensor(3.0)),
                m.tensordot(a, m.tensor(2.0), dims=0), m.einsum("->", a), m.take_along_dim(b, m.tensor([1, 0]), 0),
                m.nn.functional.mse_loss(a, m.tensor(0.5)), m.diag_embed(b).sum(), m.cartesian_prod(b).sum()]
        return np.array([float(o.sum()) for o in outs])
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- Python's wording -> torch's
@pytest.mark.parametrize("call", [
    lambda m: m.full(foo=1), lambda m: m.full((2,)), lambda m: m.full((2,), 1.0, foo=1), lambda m: m.full(),
    lambda m: m.full((2,), 1.0, 2, 3), lambda m: m.full(size=(2,)), lambda m: m.full((2,), 1.0, size=(2,)),
    lambda m: m.cat([m.ones(2)], foo=1), lambda m: m.cat([m.ones(2)], 0, 1, 2), lambda m: m.stack([m.ones(2)], foo=1),
    lambda m: m.stack([m.ones(2)], 0, 1), lambda m: m.index_put(m.ones(2), (m.tensor([0]),), m.ones(1), foo=1),
    lambda m: m.view_as_complex(m.ones(2, 2), foo=1), lambda m: m.ones(2).prelu(m.ones(1), foo=1),
    lambda m: m.ones(2).polygamma(1, foo=1), lambda m: m.ones(2).type(m.float64, foo=1),
    lambda m: m.ones(2).index_put_((m.tensor([0]),), m.ones(1), foo=1), lambda m: m.ones(2).resize(2, foo=1)])
def test_public_names_in_binding_errors(call):
    """An unknown keyword / too many or missing arguments of a function whose implementation is a
    private entry function: torch's text, naming the public function."""
    assert _same(call)[0] == "TypeError"


def test_renamed_entry_functions_stay_picklable():
    import pickle
    for f in (ember.cat, ember.stack, ember.full, ember.index_put, ember.Tensor.where, ember.Tensor.polygamma,
              ember.Tensor.resize, ember.Tensor.index_put_, ember.view_as_complex):
        assert pickle.loads(pickle.dumps(f)) is f
        assert not f.__qualname__.startswith("_")


@pytest.mark.parametrize("call", [
    lambda m: m.randn(3, 4).__setitem__(0, m.ones(3)),
    lambda m: m.randn(3, 4).__setitem__((slice(None), 0), m.ones(4)),
    lambda m: m.randn(3, 4).__setitem__(slice(0, 2), m.ones(3, 4)),
    lambda m: m.randn(3, 4).__setitem__(0, m.ones(2, 4)),
    lambda m: m.einsum("ij,jk->ik", m.randn(2, 3), m.randn(4, 5)), lambda m: m.einsum("i,i->", m.randn(2), m.randn(3)),
    lambda m: m.einsum("bij,bjk->bik", m.randn(2, 3, 4), m.randn(3, 4, 5)),
    lambda m: m.randn(3, 4).masked_fill(m.ones(3, dtype=m.bool), 0.0),
    lambda m: m.randn(3, 4).masked_fill(m.ones(2, 4, dtype=m.bool), 0.0),
    lambda m: m.masked_fill(m.randn(3, 4), m.ones(3, 1, 2, dtype=m.bool), m.tensor(1.0))])
def test_broadcast_messages(call):
    assert _same(call)[0] == "RuntimeError"


def test_setitem_broadcast_values():
    """The expand before the copy: broadcast assignments and their gradients as torch's."""
    def run(m):
        g = np.random.default_rng(9)
        x = m.tensor(g.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
        v = m.tensor(g.standard_normal(4).astype(np.float32), requires_grad=True)
        w = m.tensor(g.standard_normal((2, 1)).astype(np.float32), requires_grad=True)
        y = x * 1
        y[1:] = v
        y[0, :2] = w[0]
        y[:, 3] = m.tensor(2.5)
        (y * m.arange(12.0).reshape(3, 4)).sum().backward()
        return np.concatenate([y.detach().numpy().ravel(), x.grad.numpy().ravel(), v.grad.numpy(), w.grad.numpy().ravel()])
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-6, atol=1e-6)
