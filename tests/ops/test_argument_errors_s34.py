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
