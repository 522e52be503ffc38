"""Inputs that are not C-contiguous get symbolic strides (as torch's do).

They used to keep static sizes and strides, so a function called on ``idx[:, -8:]`` of a
growing ``idx`` (a language model's generation loop) or on stepped slices of a changing size
compiled once per call until the recompile limit, then ran eagerly for good. Now their strides
are ShapeEnv symbols read off ``.stride()`` (duck-shared with sizes they equal, which guards a
dense layout), automatic dynamic also notes changed strides, and a graph that returns a view
of such an input is traced again with it static (its compiled value would not alias the
input)."""
import logging
import warnings

import numpy as np
import pytest

import ember
from ember import dynamo

from ember.dynamo.backends import lookup
from ember.dynamo.exc import RecompileLimitExceeded

from ._util import CountingBackend


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    dynamo.reset()


class Counting(CountingBackend):
    """Counts the graphs, then compiles them with a real backend."""

    def __init__(self, backend):
        super().__init__()
        self.inner = lookup(backend)

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return self.inner(gm, example_inputs)


def close(want, got, rtol=1e-5, atol=1e-6):
    assert tuple(want.shape) == tuple(got.shape) and want.dtype == got.dtype
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


def _no_recompile_limit(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecompileLimitExceeded)
        return fn()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_generation_loop_over_the_last_columns_compiles_three_times(backend):
    ember.manual_seed(0)
    emb, head = ember.nn.Embedding(40, 8), ember.nn.Linear(8, 40)

    def step(idx):
        return head(emb(idx).mean(1))

    cnt = Counting(backend)
    cstep = ember.compile(step, backend=cnt)
    idx = ember.randint(0, 40, (2, 1))

    def run():
        nonlocal idx
        for _ in range(20):
            cond = idx[:, -8:]                 # (2, min(T, 8)), strides (T, 1) once T > 8
            out = cstep(cond)
            close(step(cond), out)
            idx = ember.cat([idx, out.argmax(-1, keepdim=True)], 1)
    _no_recompile_limit(run)
    # static (2, 1); symbolic width, contiguous; symbolic width and row stride (torch: 3 too)
    assert cnt.frame_count == 3 and cnt.graphs[-1].meta["dynamic"]


def test_stepped_slices_of_changing_size_compile_twice_forward_and_backward():
    ember.manual_seed(1)
    lin = ember.nn.Linear(9, 3)

    def loss(x):
        return (lin(x * 2.0 + 1.0).tanh() ** 2).sum()

    closs = ember.compile(loss)
    for n in range(3, 10):
        base = ember.randn(n, 18)
        x = base[:, ::2]                       # strides (18, 2)
        lin.zero_grad()
        want = loss(x)
        want.backward()
        gw = lin.weight.grad.numpy().copy()
        lin.zero_grad()
        got = _no_recompile_limit(lambda: closs(x))
        got.backward()
        close(want, got, atol=1e-5)
        np.testing.assert_allclose(lin.weight.grad.numpy(), gw, rtol=1e-4, atol=1e-5)
    cnt = CountingBackend()
    f = ember.compile(lambda x: (x * 2.0).sum(0), backend=cnt)
    for n in range(3, 10):
        x = ember.randn(n, 18)[:, ::2]
        close((x * 2.0).sum(0), f(x))
    assert cnt.frame_count == 2 and cnt.graphs[-1].meta["dynamic"]


def test_strides_changing_with_sizes_the_same_are_noted(caplog):
    cnt = CountingBackend()
    f = ember.compile(lambda x: x.cumsum(1) * 3.0, backend=cnt)
    with caplog.at_level(logging.INFO, logger="ember.dynamo.recompiles"):
        for width in range(9, 16):
            x = ember.randn(4, width)[:, -5:]      # (4, 5) every call; strides (width, 1)
            close(x.cumsum(1) * 3.0, f(x))
    assert cnt.frame_count == 2
    assert any("strides of" in r.getMessage() and "making them dynamic" in r.getMessage()
               for r in caplog.records)


def test_a_dense_transpose_guards_its_layout():
    """The stride symbols of a transposed input are the sizes' own: a call with the same shape
    but another row stride (a transposed slice of a wider matrix) fails the guard instead of
    reusing what the trace decided from the dense layout (``stride(1)``, ``view``)."""
    def f(x):
        return x.t().reshape(-1) * x.stride(1)

    cf = ember.compile(f, backend="eager", dynamic=True)
    for n in (4, 5, 6):
        x = ember.randn(9, n).t()                  # dense: strides (1, n)
        close(f(x), cf(x))
        y = ember.randn(9, 20)[:, :n].t()          # same shape, strides (1, 20)
        close(f(y), cf(y))

    g = ember.compile(lambda x: x.t().view(-1) + 1.0, backend="aot_eager", dynamic=True)
    x = ember.randn(9, 5).t()
    close(x.t().view(-1) + 1.0, g(x))
    y = ember.randn(9, 20)[:, :5].t()
    with pytest.raises(RuntimeError):
        y.t().view(-1)
    with pytest.raises(RuntimeError):              # as eagerly: the view is not possible
        g(y)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_returned_view_of_a_strided_input_still_aliases_it(backend):
    f = ember.compile(lambda x: (x.t(), x * 2.0), backend=backend, dynamic=True)
    for n in (3, 4, 6):
        base = ember.randn(n, 18)
        x = base[:, ::2]
        before = base.numpy().copy()
        v, y = f(x)
        close(x * 2.0, y)
        v.add_(1.0)                              # reaches x, and through it the base
        want = before.copy()
        want[:, ::2] += 1.0
        np.testing.assert_array_equal(base.numpy(), want)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_in_place_writes_into_a_stepped_slice_reach_its_base(backend):
    f = ember.compile(lambda x: x.mul_(2.0).sum(1), backend=backend)
    for n in range(3, 9):
        base = ember.randn(n, 18)
        ref = base.clone()
        got = f(base[:, ::2])
        want = ref[:, ::2].mul_(2.0).sum(1)
        close(want, got)
        np.testing.assert_array_equal(base.numpy(), ref.numpy())


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_stride_used_as_a_value_is_specialised_not_a_fallback(backend):
    """``x * x.stride(0)`` puts a stride symbol in the graph as an operand; the graphs read
    sizes only, so it is specialised (guarded) there. It sent the frame to eager."""
    cnt = Counting(backend)
    f = ember.compile(lambda x: x * x.stride(0) + x.size(0), backend=cnt)
    for n in range(3, 9):
        x = ember.randn(n, 18)[:, ::2]
        close(x * 18 + n, f(x))
    assert cnt.frame_count == 2 and cnt.graphs[-1].meta["dynamic"]
    x = ember.randn(5, 20)[:, ::2]                 # another row stride: guarded, compiled again
    close(x * 20 + 5, f(x))
    assert cnt.frame_count == 3


def test_a_dtype_view_of_a_dynamic_input_checks_its_offset_as_eager():
    """A symbolic input has memory of its own in the trace; its storage offset's alignment
    decides whether ``view(float64)`` of float32 is allowed. It was taken as 0: a row slice
    starting at an odd element gave values compiled where eager raises. The trace now starts
    at the offset's residue and, where a dtype view read it, the guards check it."""
    f = ember.compile(lambda x: x.view(ember.float64) * 2)
    for n in (3, 4, 5, 6):
        for start in (1, 2):                       # odd: eager raises; even: a valid view
            x = ember.randn(100)[start:start + 4 * n].view(n, 4)
            try:
                want, err = x.view(ember.float64) * 2, None
            except RuntimeError as e:
                want, err = None, str(e)
            if err is None:
                close(want, f(x))
            else:
                with pytest.raises(RuntimeError) as got:
                    f(x)
                assert str(got.value) == err
    for bad in (ember.randn(4, 6).t(), ember.randn(4, 6)[:, 1:5], ember.randn(5, 6)[:, 1:5]):
        with pytest.raises(RuntimeError):
            bad.view(ember.float64)
        with pytest.raises(RuntimeError):
            f(bad)
