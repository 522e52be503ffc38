"""Dynamic shapes in ember.dynamo: automatic dynamic, dynamic=True, mark_dynamic, shape guards."""
import logging
import warnings

import numpy as np
import pytest

import ember
from ember import dynamo
from ember.fx.experimental.proxy_tensor import sym_size

from ._util import CountingBackend, assert_same


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    dynamo.reset()


def _sym_size_nodes(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is sym_size]


def view_flat(x):
    y = x.view(x.shape[0], -1) * 2.0
    return y.sum(1) + x.size(1)


def test_size_change_recompiles_once_then_runs_dynamically(caplog):
    cnt = CountingBackend()
    cf = ember.compile(view_flat, backend=cnt)
    with caplog.at_level(logging.INFO, logger="ember.dynamo.recompiles"):
        for n in (3, 4, 5, 7, 9, 4):
            x = ember.randn(n, 3, 2)
            assert_same(view_flat(x), cf(x))
    assert cnt.frame_count == 2
    assert not cnt.graphs[0].meta["dynamic"] and cnt.graphs[1].meta["dynamic"]
    # the size reaching view() is read off the input in the graph, not baked
    assert len(_sym_size_nodes(cnt.graphs[1])) == 1
    assert "view(3" not in cnt.graphs[1].code and "view(4" not in cnt.graphs[1].code
    assert any("making them dynamic" in r.getMessage() and "a0" in r.getMessage() for r in caplog.records)


def test_static_dim_change_still_recompiles():
    cnt = CountingBackend()
    cf = ember.compile(view_flat, backend=cnt)
    for n in (3, 4, 5):
        cf(ember.randn(n, 3, 2))
    assert cnt.frame_count == 2
    x = ember.randn(5, 4, 2)          # dim 1 was static: a new entry, now dynamic there too
    assert_same(view_flat(x), cf(x))
    assert cnt.frame_count == 3
    for shape in ((6, 5, 2), (8, 7, 2)):
        x = ember.randn(*shape)
        assert_same(view_flat(x), cf(x))
    assert cnt.frame_count == 3


def test_dynamic_true_compiles_once_for_many_sizes():
    cnt = CountingBackend()

    def f(x, y):
        z = x @ y
        return z.reshape(-1, x.shape[0] * y.shape[1]).relu() - x.shape[1]

    cf = ember.compile(f, backend=cnt, dynamic=True)
    for m, k, n in ((2, 3, 4), (5, 6, 7), (3, 9, 2), (8, 2, 5)):
        x, y = ember.randn(m, k), ember.randn(k, n)
        assert_same(f(x, y), cf(x, y))
    assert cnt.frame_count == 1
    assert cnt.graphs[0].meta["dynamic"]
    # a size mismatch between the inputs is still an error, as in eager
    with pytest.raises(Exception):
        cf(ember.randn(3, 4), ember.randn(5, 2))


def test_dynamic_false_specialises_every_size():
    cnt = CountingBackend()
    cf = ember.compile(view_flat, backend=cnt, dynamic=False)
    for n in (3, 4, 5):
        x = ember.randn(n, 2)
        assert_same(view_flat(x), cf(x))
    assert cnt.frame_count == 3
    assert not any(g.meta["dynamic"] for g in cnt.graphs)


def test_mark_dynamic():
    cnt = CountingBackend()
    cf = ember.compile(view_flat, backend=cnt, dynamic=False)
    for n in (3, 6, 10):
        x = ember.randn(n, 4)
        dynamo.mark_dynamic(x, 0)
        assert_same(view_flat(x), cf(x))
    assert cnt.frame_count == 1
    x = ember.randn(10, 5)            # dim 1 was not marked: guarded statically
    dynamo.mark_dynamic(x, 0)
    assert_same(view_flat(x), cf(x))
    assert cnt.frame_count == 2
    with pytest.raises(IndexError):
        dynamo.mark_dynamic(ember.randn(2, 2), 2)


def test_guard_on_size_relation_recompiles_when_violated():
    cnt = CountingBackend()

    def f(x):
        if x.shape[0] > 4:
            return x * 2.0
        return x - 1.0

    cf = ember.compile(f, backend=cnt, dynamic=True)
    for n in (2, 3, 4):
        x = ember.randn(n)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == 1
    for n in (5, 8):
        x = ember.randn(n)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == 2
    x = ember.randn(3)
    assert_same(f(x), cf(x))
    assert cnt.frame_count == 2
    guards = dynamo.convert_frame._caches[f.__code__].entries[0].info["guards"]
    assert "s0 <= 4" in guards


def test_equality_of_sizes_is_guarded():
    cnt = CountingBackend()

    def f(x, y):
        if x.shape[0] == y.shape[0]:
            return x + y
        return x.sum() + y.sum()

    cf = ember.compile(f, backend=cnt, dynamic=True)
    for a, b in ((3, 3), (5, 5), (3, 4), (6, 2), (7, 7)):
        x, y = ember.randn(a), ember.randn(b)
        assert_same(f(x, y), cf(x, y))
    assert cnt.frame_count == 2


def test_size_one_does_not_hit_symbolic_entry():
    cnt = CountingBackend()

    def f(x, y):
        return (x + y).sum(0)

    cf = ember.compile(f, backend=cnt, dynamic=True)
    for n in (3, 5):
        x, y = ember.randn(n, 4), ember.randn(n, 4)
        assert_same(f(x, y), cf(x, y))
    assert cnt.frame_count == 1
    # a size 1 broadcasts: it must not run the symbolic graph (which assumed equal sizes)
    x, y = ember.randn(1, 4), ember.randn(6, 4)
    assert_same(f(x, y), cf(x, y))
    assert cnt.frame_count == 2
    x = ember.randn(1, 4)
    assert_same(f(x, x), cf(x, x))
    assert cnt.frame_count == 3


def test_duck_sized_inputs_must_stay_equal():
    cnt = CountingBackend()

    def f(x, y):
        return x * 2.0, y + 1.0

    cf = ember.compile(f, backend=cnt, dynamic=True)
    x, y = ember.randn(3), ember.randn(3)
    assert_same(f(x, y), cf(x, y))
    x, y = ember.randn(4), ember.randn(6)  # the entry assumed equal sizes (one symbol)
    assert_same(f(x, y), cf(x, y))
    assert cnt.frame_count == 2
    x, y = ember.randn(7), ember.randn(9)
    assert_same(f(x, y), cf(x, y))
    assert cnt.frame_count == 2


def test_size_in_fstring_and_int_specialise():
    cnt = CountingBackend()

    def f(x):
        tag = f"n={x.shape[0]}"
        return x * float(len(tag)) + int(x.shape[0])

    cf = ember.compile(f, backend=cnt, dynamic=True)
    for n in (3, 12, 12, 3):
        x = ember.randn(n)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == 2


def test_sizes_into_creation_ops_and_arithmetic():
    cnt = CountingBackend()

    def f(x):
        n, m = x.shape
        z = ember.zeros(n, m * 2) + 1.0
        return (z[:, :m] * x).sum(1) + x.numel() // 2

    cf = ember.compile(f, backend=cnt, dynamic=True)
    for n, m in ((2, 3), (4, 5), (7, 2)):
        x = ember.randn(n, m)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == 1


def test_size_returned_to_python_is_computed_not_specialised():
    """``x.shape[0] + 1`` returned as a Python int is computed after the graph from the input's
    size (``OutputGraph.sym_int_expr``), as torch.compile returns it: one graph for every size
    (it was specialised on each value: a recompile per size)."""
    cnt = CountingBackend()

    def f(x):
        return x * 2.0, x.shape[0] + 1

    cf = ember.compile(f, backend=cnt, dynamic=True)
    for n in (3, 4, 4, 7):
        x = ember.randn(n)
        got, want = cf(x), f(x)
        assert_same(got, want)
        assert type(got[1]) is int and got[1] == n + 1
    assert cnt.frame_count == 1


def test_non_contiguous_input_gets_symbolic_strides():
    """A transposed input's strides are symbols (duck-shared with the sizes they equal), as
    torch's: one graph serves every size (it used to stay static: one compile per size)."""
    cnt = CountingBackend()
    cf = ember.compile(lambda t: t * 2.0, backend=cnt, dynamic=True)
    for n in (3, 4, 7):
        x = ember.randn(5, n).t()
        assert_same(x * 2.0, cf(x))
    assert cnt.frame_count == 1
    assert all(g.meta["dynamic"] for g in cnt.graphs)


def test_module_with_dynamic_batch():
    nn = ember.nn
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    cnt = CountingBackend()
    cm = ember.compile(model, backend=cnt)
    for b in (2, 3, 5, 9):
        x = ember.randn(b, 6)
        assert_same(model(x), cm(x))
    assert cnt.frame_count == 2


def test_recompile_limit_unchanged_for_constants():
    cnt = CountingBackend()
    cf = ember.compile(lambda x, s: x + len(s), backend=cnt)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(12):
            x = ember.randn(n + 2)
            assert_same(x + (n + 1), cf(x, "a" * (n + 1)))
    assert cnt.frame_count == dynamo.config.recompile_limit
    assert sum(issubclass(x.category, dynamo.RecompileLimitExceeded) for x in w) == 1


@pytest.mark.parametrize("kind", [int, float])
def test_a_number_argument_that_changes_is_not_specialised_again(kind):
    """Automatic dynamic for numbers: the first new value recompiles with the argument traced
    unspecialized (a graph input where it meets a floating tensor); later values reuse that
    graph. Before, every value compiled again until the recompile limit sent the function to
    eager for good (a learning rate or a step count passed in)."""
    cnt = CountingBackend()
    cf = ember.compile(lambda x, lr, step: x * lr + step / 100, backend=cnt)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(12):
            x = ember.randn(4)
            lr, step = kind(n + 1) * (0.5 if kind is float else 1), n
            assert_same(x * lr + step / 100, cf(x, lr, step))
    assert cnt.frame_count == 2
    assert not any(issubclass(x.category, dynamo.RecompileLimitExceeded) for x in w)


def test_dynamic_true_leaves_numbers_unspecialised_from_the_start():
    cnt = CountingBackend()
    cf = ember.compile(lambda x, k: (x * k).sum(), backend=cnt, dynamic=True)
    for k in (0.5, 1.5, 2.5, 3):
        x = ember.randn(5)
        assert_same((x * k).sum(), cf(x, k))
    assert cnt.frame_count == 2         # the int 3: a new type (the type is guarded)


def test_a_number_used_as_a_size_is_still_specialised():
    cnt = CountingBackend()
    cf = ember.compile(lambda x, n: x.reshape(n, -1).sum(1), backend=cnt)
    for n in (2, 3, 4, 6):
        x = ember.randn(12)
        assert_same(x.reshape(n, -1).sum(1), cf(x, n))


def test_backward_through_dynamic_graph():
    def f(x, w):
        return (x.view(x.shape[0], -1) @ w).tanh().sum()

    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt, dynamic=True)
    w = ember.randn(6, 4, requires_grad=True)
    for n in (5, 7, 9):   # not 2/3/4/6: equal to another size, duck sizing would tie them
        x = ember.randn(n, 2, 3)
        cf(x, w).backward()
        g = w.grad.numpy().copy()
        w.grad = None
        f(x, w).backward()
        np.testing.assert_allclose(g, w.grad.numpy(), rtol=1e-5, atol=1e-6)
        w.grad = None
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_aot_backends_on_dynamic_graphs(backend):
    def f(x, w):
        y = x.view(x.shape[0], -1) @ w
        return (y.relu() * x.size(1)).sum(1)

    cf = ember.compile(f, backend=backend)
    w = ember.randn(6, 4, requires_grad=True)
    for n in (3, 4, 6):
        x = ember.randn(n, 2, 3)
        r = cf(x, w)
        r.sum().backward()
        g = w.grad.numpy().copy()
        w.grad = None
        e = f(x, w)
        e.sum().backward()
        np.testing.assert_allclose(r.detach().numpy(), e.detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g, w.grad.numpy(), rtol=1e-5, atol=1e-5)
        w.grad = None


def test_guards_with_floor_division_and_modulo():
    cnt = CountingBackend()

    def f(x):
        if x.shape[0] % 2 == 0:
            x = x * 3.0
        if x.shape[0] // 3 > 1:
            return x[: x.shape[0] // 2] + 1.0
        return x - 1.0

    cf = ember.compile(f, backend=cnt, dynamic=True)
    sizes = (4, 8, 10, 5, 7, 9, 2, 3, 6, 12)
    for n in sizes:
        x = ember.randn(n)
        assert_same(f(x), cf(x))
    # one entry per (parity, n // 3 > 1) combination: (even, no), (even, yes), (odd, yes), (odd, no)
    assert cnt.frame_count == 4
    for n in sizes:
        x = ember.randn(n)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == 4


def test_transformer_layer_with_changing_batch_and_sequence():
    nn = ember.nn
    ember.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    cnt = CountingBackend()
    cm = ember.compile(layer, backend=cnt)
    # (2,5)->(2,7): the sequence becomes dynamic; (3,9): the batch too; then no more compiles
    for b, t in ((2, 5), (2, 7), (3, 9), (4, 11), (5, 13)):
        x = ember.randn(b, t, 8)
        with ember.no_grad():
            assert_same(layer(x), cm(x))
    assert cnt.frame_count == 3


_SIZE_PROGRAMS = {
    # name: (program, graphs for three sizes: 1 = stays symbolic, 3 = specialised with a guard)
    "expand": (lambda x: x[:1].expand(x.shape[0], -1) + x, 1),
    "repeat_reshape": (lambda x: x.repeat(2, 1).reshape(x.shape[0] * 2, -1), 1),
    "new_zeros_slice": (lambda x: x.new_zeros(x.shape[0], x.shape[1] + 1)[:, 1:] + x, 1),
    "narrow": (lambda x: x.narrow(0, 0, x.shape[0] - 1), 1),
    "split": (lambda x: x.split(x.shape[1] // 2, dim=1)[0] * 2.0, 1),
    "div_numel": (lambda x: x / x.numel(), 1),
    "rsub_size": (lambda x: x.shape[1] - x, 1),
    # linspace's kernel needs an int and a float power leaves the integers: specialised, still exact
    "linspace": (lambda x: x * ember.linspace(0, 1, x.shape[1]), 3),
    "float_scale": (lambda x: (x / x.shape[-1] ** 0.5).softmax(-1), 3),
}


@pytest.mark.parametrize("name", sorted(_SIZE_PROGRAMS))
def test_sizes_flowing_into_ops(name):
    f, graphs = _SIZE_PROGRAMS[name]
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt, dynamic=True)
    for shape in ((4, 6), (5, 8), (7, 10)):
        x = ember.randn(*shape)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == graphs
    assert not dynamo.fallback_reasons


# ----------------------------------------------------------------------- view inputs
def _rows(n, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal((24, 5)).astype(np.float32))


def _bump_and_scale(x, y):
    x.add_(1.0)
    return x * y


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_view_inputs_get_symbolic_sizes(backend):
    """A C-contiguous view input (x.detach(), rows of a bigger tensor) is compiled once for every
    size, like a plain tensor: before, views kept static sizes (one compilation per size). Its
    in-place update still reaches the base's memory, and a guard checks that it shares no memory
    with the other arguments."""
    cf = ember.compile(_bump_and_scale, backend=backend, dynamic=True)
    for n in (3, 5, 8, 11):
        got_base, want_base = _rows(n, n), _rows(n, n)
        y = ember.tensor(np.random.default_rng(100 + n).standard_normal((n, 5)).astype(np.float32))
        got = cf(got_base[2:2 + n], y.detach())
        want = _bump_and_scale(want_base[2:2 + n], y)
        assert_same(want, got)
        assert_same(want_base, got_base)                     # the update reached the base
    assert dynamo.convert_frame.counters["compiled"] == 1
    f = dynamo.convert_frame._caches[_bump_and_scale.__code__].entries[0]
    assert "shares no memory" in str(f.guard.guard_set)


def test_views_sharing_memory_stay_static_and_alias_correctly():
    """Two inputs sharing memory (views of one tensor, or a view and its base): a symbolic view
    would be traced as memory of its own, losing the aliasing. The frame is traced again with
    view inputs static (their example values share their base's storage), and a call whose
    arguments newly share memory fails the no-sharing guard of a symbolic compile."""
    cf = ember.compile(_bump_and_scale, dynamic=True)
    for n in (3, 4, 6):
        got_base, want_base = _rows(n, n), _rows(n, n)
        got = cf(got_base[:n], got_base[1:n + 1])            # overlapping rows
        want = _bump_and_scale(want_base[:n], want_base[1:n + 1])
        assert_same(want, got)
        assert_same(want_base, got_base)
    dynamo.reset()
    cf = ember.compile(lambda x, y: x * 2 + y[: x.shape[0]], dynamic=True)
    for n in (3, 5):
        base = _rows(n, n)
        plain = _rows(n, n + 50)
        assert_same(base[:n] * 2 + plain[:n], cf(base[:n], plain))   # no sharing: symbolic
        assert_same(base[:n] * 2 + base[:n], cf(base[:n], base))     # the view and its base


_SCHEDULE = {"lr": 1.0}


def _halve_and_scale(x):
    _SCHEDULE["lr"] = _SCHEDULE["lr"] * 0.5
    return x * _SCHEDULE["lr"]


def test_an_outside_number_the_frame_rewrites_is_read_when_the_call_starts():
    """Once the dict's number is unspecialized, the replay of the frame's write to it
    (``d.clear(); d.update({'lr': <expr over d['lr']>})``) read it after the clear: KeyError.
    Such reads are taken when the call starts."""
    _SCHEDULE["lr"] = 1.0
    cf = ember.compile(_halve_and_scale)
    x = ember.randn(3)
    for k in range(1, 6):
        assert_same(x * 0.5 ** k, cf(x))
        assert _SCHEDULE["lr"] == 0.5 ** k


def test_a_branch_on_an_unspecialised_number_guards_the_outcome_not_the_value():
    cnt = CountingBackend()

    def f(x, lr):
        if lr > 0.1:
            return x * lr
        return x - lr
    cf = ember.compile(f, backend=cnt)
    x = ember.randn(3)
    for lr in (0.5, 0.4, 0.3, 0.2, 0.05, 0.04, 0.03, 0.3, 0.01):
        assert_same(f(x, lr), cf(x, lr))
    assert cnt.frame_count == 3          # 0.5 specialised, then one graph per side of the branch
