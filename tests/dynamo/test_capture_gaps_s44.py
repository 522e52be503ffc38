"""Capture gaps found by comparing realistic model code with torch.compile: each program gives
eager's result with the number of graphs/breaks PyTorch's dynamo gives it (probes s44)."""
import ember
import ember.nn as nn
from ember import dynamo

from ._util import CountingBackend, assert_same, check


def x24():
    return (ember.randn(2, 4),)


# ---------------------------------------------------------------- decorated methods
class _DecoratedMethods(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)

    @ember.no_grad()
    def ema(self, x):
        return self.l(x) * 0.5

    @ember.enable_grad()
    def eg(self, x):
        return self.l(x) * 2

    @ember.compile(backend="eager")
    def step(self, x):
        return self.l(x).tanh()

    def forward(self, x):
        return self.ema(x), self.eg(x) + self.step(x)


def test_grad_mode_and_compiled_methods_are_traced_like_functions():
    """``@no_grad()`` / ``@enable_grad()`` / ``@ember.compile`` on a method: traced as the method
    in its grad-mode block, as for a plain function (the wrapper's own code broke the graph at
    each call, in ember's grad-mode internals)."""
    m = _DecoratedMethods()
    check(m, x24, graphs=1)
    dynamo.reset()
    ema, rest = ember.compile(m, backend="eager")(*x24())
    assert not ema.requires_grad and rest.requires_grad
    ex = dynamo.explain(m)(*x24())
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


class _DisabledMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)

    @ember.compiler.disable
    def eager_part(self, x):
        return x * 3

    def forward(self, x):
        y = self.eager_part(self.l(x))
        return y.relu()


def test_disabled_method_breaks_at_its_call():
    m = _DisabledMethod()
    check(m, x24, graphs=2)
    dynamo.reset()
    ex = dynamo.explain(m)(*x24())
    assert ex.graph_break_count == 1
    assert "ember.compiler.disable" in ex.break_reasons[0].reason
    assert ex.break_reasons[0].source_line == "y = self.eager_part(self.l(x))"


# ---------------------------------------------------------------- sliced containers
class _Sliced(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(4)])
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))

    def forward(self, x):
        for layer in self.layers[1:]:
            x = layer(x)
        for i, layer in enumerate(self.layers[::-1][1:3]):
            x = layer(x) + i
        x = self.seq[:2](x) + self.seq[1:][-1](x) + len(self.layers[:-1])
        return x, isinstance(self.seq[1:], nn.Sequential), isinstance(self.layers[:1], nn.ModuleList)


def test_modulelist_and_sequential_slices():
    """``self.layers[1:]`` / ``self.seq[:2](x)``: one graph (the slice was unsupported and the
    whole forward ran eagerly)."""
    check(_Sliced(), x24, graphs=1)


def test_sliced_container_returned_from_the_frame():
    m = _Sliced()

    def f(x):
        return m.seq[1:](x), m.seq[1:]
    cnt = CountingBackend()
    out, sub = ember.compile(f, backend=cnt)(x := ember.randn(2, 4))
    assert cnt.frame_count == 1
    assert type(sub) is nn.Sequential and list(sub) == list(m.seq)[1:]
    assert_same(m.seq[1:](x), out)


# ---------------------------------------------------------------- breaks at a subscript
def _three_positive():
    x = ember.rand(6) + 0.1
    x[::2] *= -1
    return (x,)


def test_boolean_mask_index_is_a_graph_break_not_an_eager_frame():
    """``a[a > 0]`` (data-dependent shape) breaks the graph at the subscript, as PyTorch does;
    the whole frame ran eagerly before."""
    def f(x):
        a = x * 2
        b = a[a > 0]
        return b.sum() + a.cos().sum()
    check(f, _three_positive, graphs=2)     # the same mask size each call: no recompile after it
    ex = dynamo.explain(f)(*_three_positive())
    assert (ex.graph_count, ex.graph_break_count) == (2, 1)
    assert "boolean-mask" in ex.break_reasons[0].reason and ex.break_reasons[0].source_line == "b = a[a > 0]"


def test_subscript_break_inside_call_arguments_keeps_the_op_on_the_stack():
    """A break in ``ember.cat([...])``'s arguments: the resume function gets ``ember.cat`` on its
    stack and records it as the operator (it was traced into as Python code: a second break)."""
    def f(x, y):
        z = x * 2
        out = ember.cat([z, z[z > 0], y])
        return out.sum(), (z + 1)[0]
    check(f, lambda: _three_positive() + (ember.randn(3),), graphs=2)
    ex = dynamo.explain(f)(*_three_positive(), ember.randn(3))
    assert ex.graph_break_count == 1, ex.break_reasons


def test_subscript_break_in_a_try_block():
    def f(x):
        s = x.sum() * 0
        try:
            s = s + x[x > 0].sum()
        except IndexError:
            s = s - 1
        return s * 2
    check(f, _three_positive, graphs=2)


def test_subscript_that_raises_at_the_break():
    def f(x, d):
        y = x + 1
        return y * d[y.sum() > 1000]       # a tensor key: KeyError in eager too

    cf = ember.compile(f, backend=CountingBackend())
    for fn in (f, cf):
        try:
            fn(ember.randn(2), {True: 1.0, False: 2.0})
        except KeyError:
            pass
        else:
            raise AssertionError("expected KeyError")


# ---------------------------------------------------------------- small things
def test_tensor_dunder_class():
    lin = nn.Linear(2, 2)

    def f(x):
        return (x * 2, x.__class__ is ember.Tensor, lin.weight.__class__ is nn.Parameter,
                x.__class__.__name__, (x * 2).__class__.__name__)
    check(f, lambda: (ember.randn(2),), graphs=1)


def test_divmod_of_a_symbolic_size():
    def f(x):
        q, r = divmod(x.shape[0], 3)
        return x * q + r - divmod(7, x.shape[0])[1]
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt, dynamic=True)
    for n in (4, 5, 9):
        x = ember.randn(n)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == 1 and dynamo.counters["graph_breaks"] == 0, dynamo.fallback_reasons


class _Scaler:
    def __init__(self, s):
        self.s = s

    def __call__(self, x):
        return x * self.s


def _local_class_module():
    scale = _Scaler(4.0)
    bias = ember.ones(3)

    class M(nn.Module):
        def helper(self, x):
            return scale(x) + bias

        def forward(self, x):
            return self.helper(x) * bias
    return M(), bias


def test_forward_closing_over_objects():
    """A module class defined in a function whose methods close over a helper object and a
    tensor: the cells are read through the class (one graph; calling the object was
    unsupported, its cell having no source). The tensor is a graph input: an in-place change
    to it is seen."""
    m, bias = _local_class_module()
    check(m, lambda: (ember.randn(3),), graphs=1)
    dynamo.reset()
    cm = ember.compile(m, backend="eager")
    x = ember.randn(3)
    assert_same(m(x), cm(x))
    bias.mul_(3)
    assert_same(m(x), cm(x))


def test_list_times_a_symbolic_size_specialises():
    """``[None] * x.shape[0]`` once the size is dynamic: specialised (a guard on the value, a new
    size recompiles, as torch.compile does) instead of running the frame eagerly."""
    def f(x):
        n = x.shape[0]
        ys = [None] * n
        zs = n * [0.5]
        for t in range(n):
            ys[t] = x[t] * 2 + zs[t]
        return ember.stack(ys, 0)
    dynamo.reset()
    c = ember.compile(f, backend="eager")
    for n in (3, 5, 7):
        x = ember.randn(n, 2)
        assert_same(f(x), c(x))
    assert dynamo.counters["eager_fallback"] == 0
