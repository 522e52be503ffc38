"""Capture gaps found by comparing realistic model code with torch.compile (probes s45): each
program gives eager's result with the number of graphs PyTorch's dynamo gives it."""
import dataclasses
import enum
import functools

import ember
from ember import dynamo

from ._util import CountingBackend, assert_one_graph, assert_same


def x3():
    return ember.randn(3)


# ---------------------------------------------------------------- nonlocal writes
def _make_counter():
    counter = 0

    def f(x):
        nonlocal counter
        counter += 1
        return x * 2 + 1

    return f, lambda: counter


def test_nonlocal_write_of_compiled_function_is_replayed_after_the_graph():
    """``nonlocal counter; counter += 1`` in the compiled function: one graph, the cell written
    after it (it ran the frame eagerly: 'assigning a nonlocal ... (side effect)')."""
    f, get = _make_counter()
    assert_one_graph(f, x3())
    assert get() == 1          # explain ran the frame once
    dynamo.reset()
    f, get = _make_counter()
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    x = x3()
    for i in range(10):
        assert_same(x * 2 + 1, cf(x))
        assert get() == i + 1
    # 0 and 1 are specialised; from 2 on the counter is a symbolic int and its new value is
    # computed from it, so one more graph serves every later value (torch: 2 graphs)
    assert cnt.frame_count <= 3, cnt.frame_count


def _make_helper_pair():
    n = 0

    def helper(t):
        nonlocal n
        n += t.shape[0]
        return t.sin()

    def g(x):
        return helper(x) + helper(x * 2)

    return g, lambda: n


def test_nonlocal_write_in_inlined_helper_is_seen_by_its_next_call():
    """Two calls of an inlined closure that bumps its nonlocal: the second call reads what the
    first wrote (one tracker per cell), and the cell holds eager's value after the call."""
    g, get = _make_helper_pair()
    x = x3()
    expected = g(x)
    assert get() == 6
    dynamo.reset()
    g, get = _make_helper_pair()
    cnt = CountingBackend()
    got = ember.compile(g, backend=cnt)(x)
    assert_same(expected, got)
    assert get() == 6 and cnt.frame_count == 1


def _make_tensor_cell():
    acc = None

    def h(x, w):
        nonlocal acc
        y = (x * w).tanh()
        acc = y if acc is None else acc + y
        return y.sum()

    return h, lambda: acc


def test_nonlocal_tensor_write_keeps_its_graph_and_gradient():
    x = x3()
    w0 = ember.randn(3)
    h, get = _make_tensor_cell()
    w = w0.clone().requires_grad_(True)
    h(x, w).backward()
    want_acc, want_grad = get().detach(), w.grad
    dynamo.reset()
    h, get = _make_tensor_cell()
    cnt = CountingBackend()
    w = w0.clone().requires_grad_(True)
    ember.compile(h, backend=cnt)(x, w).backward()
    assert get().requires_grad and cnt.frame_count == 1
    assert_same(want_acc, get().detach())
    assert_same(want_grad, w.grad)


def _make_break_after_write():
    state = 1.0

    def f(x):
        nonlocal state
        state = state * 2
        y = x * state
        dynamo.graph_break()
        return y + state

    return f, lambda: state


def test_nonlocal_write_before_a_graph_break_is_seen_by_the_resumed_code():
    f, get = _make_break_after_write()
    x = x3()
    expected = f(x)
    dynamo.reset()
    f, get = _make_break_after_write()
    cnt = CountingBackend()
    got = ember.compile(f, backend=cnt)(x)
    assert_same(expected, got)
    assert get() == 2.0
    assert cnt.frame_count == 2     # before and after the break (it ran the frame eagerly)


def _bump_across_a_break(x):
    n = 0

    def bump(t):
        nonlocal n
        n += 1
        return t * n

    for i in range(4):
        x = bump(x)
        if i == 1:
            dynamo.graph_break()
    return x, n


def test_nonlocal_of_a_frame_closure_written_in_the_resumed_loop():
    """The cell ``n`` belongs to the frame; after the break in the loop the resume function gets
    it as a closure cell of its own (a real cell there) and keeps writing it."""
    from ._util import check
    check(_bump_across_a_break, lambda: (ember.randn(3),), graphs=2)


def _counted(fn):
    calls = 0

    def wrapper(*a, **k):
        nonlocal calls
        calls += 1
        return fn(*a, **k)

    wrapper.calls = lambda: calls
    return wrapper


def test_call_counting_decorator_in_a_loop():
    """A decorator counting its calls (a closure writing its cell three times in a frame)."""
    act = _counted(lambda t: ember.nn.functional.gelu(t))

    def g(x):
        for _ in range(3):
            x = act(x)
        return x

    x = x3()
    expected = g(x)
    assert act.calls() == 3
    dynamo.reset()
    cnt = CountingBackend()
    assert_same(expected, ember.compile(g, backend=cnt)(x))
    assert act.calls() == 6 and cnt.frame_count == 1
    assert_one_graph(g, x)


# ---------------------------------------------------------------- symbolic ints leaving the graph
class _Pos:
    def __init__(self):
        self.n = 0


def test_int_attribute_counter_is_not_specialised_on_each_value():
    """``self.pos += 1`` / ``pos // 2`` returned: the new value is computed after the graph from
    the symbolic int (it was specialised: a recompile per value up to the recompile limit)."""
    o = _Pos()

    def f(x):
        o.n += 1
        o.n += 2
        return x * 2 + 1, o.n // 2, o.n % 3

    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    x = x3()
    for i in range(1, 11):
        r = cf(x)
        assert o.n == 3 * i
        assert r[1:] == (o.n // 2, o.n % 3)
        assert type(r[1]) is int and type(o.n) is int
    assert cnt.frame_count <= 3, cnt.frame_count


def test_size_expression_returned_with_dynamic_shapes_is_one_graph():
    def f(x, n):
        return x * 2, x.shape[0] * 2 + n, n + 1

    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt, dynamic=True)
    for k in range(3, 9):
        x = ember.randn(k)
        assert_same(f(x, k + 5), cf(x, k + 5))
    assert cnt.frame_count == 1, cnt.frame_count


# ---------------------------------------------------------------- symbolic container indexes
def test_module_list_indexed_by_a_dynamic_int_is_specialised():
    """``self.experts[i]`` / ``scales[i]`` with ``i`` an int that became dynamic (a resume
    function's loop counter, an int argument that changes): specialised per value as
    torch.compile does (it broke the graph at the index)."""
    layers = ember.nn.ModuleList([ember.nn.Linear(4, 4) for _ in range(5)])
    scales = [0.5, 1.0, 1.5, 2.0, 2.5]

    def f(x, i):
        return layers[i](x) * scales[i]

    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    x = ember.randn(3, 4)
    for i in range(5):
        assert_same(f(x, i), cf(x, i))
    # one graph per value (from i=2 on, a dynamic i broke the graph at the index)
    assert cnt.frame_count == 5
    assert dynamo.counters["graph_breaks"] == 0, dynamo.fallback_reasons


# ---------------------------------------------------------------- boolean-mask writes
def test_boolean_mask_write_of_a_scalar_is_a_masked_fill():
    """``labels[labels == pad] = -100`` / ``x[x < 0] = 0`` (an input, mutated) / a mask over the
    leading dims with a 0-d tensor value that requires grad: one graph (it broke the graph)."""
    from ._util import check

    def ignore_pad(labels):
        labels = labels.clone()
        labels[labels == 3] = -100
        return labels

    check(ignore_pad, lambda: (ember.randint(0, 5, (4, 6)),))

    def clamp_input(x):
        x[x < 0] = 0.0
        return x * 2

    check(clamp_input, lambda: (ember.randn(4, 6),))

    def rows(x, w):
        y = x * w
        y[y.sum(-1) > 0] = w.sum()
        return y

    check(rows, lambda: (ember.randn(4, 6), ember.randn(6, requires_grad=True)))
    x, w = ember.randn(4, 6), ember.randn(6, requires_grad=True)
    rows(x, w).sum().backward()
    want, w.grad = w.grad, None
    dynamo.reset()
    ember.compile(rows, backend="aot_eager")(x, w).sum().backward()
    assert_same(want, w.grad)


def test_boolean_mask_write_of_a_tensor_still_breaks():
    """``x[mask] = values`` (as many values as the mask's true count) depends on the data."""
    def f(x):
        x = x.clone()
        m = x > 0
        x[m] = x[m] * 2
        return x

    x = ember.randn(4, 6)
    expected = f(x)
    dynamo.reset()
    assert_same(expected, ember.compile(f, backend="eager")(x))
    assert dynamo.explain(f)(x).graph_break_count >= 1


# ---------------------------------------------------------------- functools.cached_property
class _CachedProp(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(4, 4)

    @functools.cached_property
    def mask(self):
        return ember.tril(ember.ones(4, 4)) * 2

    @functools.cached_property
    def scale(self):
        return 1.0 / self.lin.in_features

    def forward(self, x):
        return self.lin(x) @ self.mask * self.scale + self.mask.sum()


def test_cached_property_is_computed_in_the_graph_and_cached_after_it():
    """A ``functools.cached_property`` read before it was computed: its function is inlined and
    the value stored in the instance __dict__ after the graph, as eager does (it broke the
    graph); the next call reads the cached value."""
    m = _CachedProp()
    x = ember.randn(3, 4)
    assert_one_graph(m, x)
    m = _CachedProp()
    eager = _CachedProp()
    eager.load_state_dict(m.state_dict())
    dynamo.reset()
    cnt = CountingBackend()
    cm = ember.compile(m, backend=cnt)
    for _ in range(3):
        x = ember.randn(3, 4)
        assert_same(eager(x), cm(x))
    assert {"mask", "scale"} <= set(vars(m))
    assert m.scale == 0.25 and type(vars(m)["mask"]) is ember.Tensor
    assert cnt.frame_count == 2      # computing it, then reading the cached values


# ---------------------------------------------------------------- decorated forward, device queries
class _NoGradRotary(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", ember.randn(4))

    @ember.no_grad()
    def forward(self, x):
        return (x * self.inv_freq).cos()


class _UsesRotary(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.rot = _NoGradRotary()
        self.lin = ember.nn.Linear(4, 4)

    def forward(self, x):
        cos = self.rot(x)
        return self.lin(x) * cos, cos


def test_submodule_forward_decorated_with_no_grad_is_traced():
    """HF's rotary embedding: ``@torch.no_grad()`` on a submodule's forward. One graph, the
    submodule's result does not require grad (the wrapper's code broke the graph twice)."""
    m = _UsesRotary()
    x = ember.randn(3, 4, requires_grad=True)
    assert_one_graph(m, x)
    dynamo.reset()
    y, cos = ember.compile(m, backend="aot_eager")(x)
    want_y, want_cos = m(x)
    assert not cos.requires_grad and y.requires_grad
    assert_same(want_cos, cos)
    y.sum().backward()
    got = x.grad
    x.grad = None
    want_y.sum().backward()
    assert_same(x.grad, got)


def test_device_availability_queries_fold_to_constants():
    """``torch.cuda.is_available()`` / ``device_count()`` / ``torch.backends.mps.is_available()``
    in a forward: constants, as torch.compile folds them (each broke the graph)."""
    def f(x):
        y = x * 2
        if ember.cuda.is_available() or ember.cuda.device_count() > 0 or ember.backends.mps.is_available():
            y = y + 1
        return y - 1

    x = ember.randn(3)
    assert_one_graph(f, x)
    dynamo.reset()
    assert_same(f(x), ember.compile(f, backend="eager")(x))


# ---------------------------------------------------------------- dataclass configs and enums
@dataclasses.dataclass(frozen=True)
class _FrozenCfg:
    d: int = 4
    act: str = "gelu"


@dataclasses.dataclass
class _Cfg:
    d: int = 4
    act: str = "gelu"


class _Kind(str, enum.Enum):
    A = "a"
    B = "b"


_FROZEN, _PLAIN = _FrozenCfg(), _Cfg()


def test_dataclass_helpers_on_a_config_are_one_graph():
    """``dataclasses.asdict/astuple`` (deepcopy of each field value), ``dataclasses.replace``
    (``obj.__class__``), ``cfg.__class__.__name__``: one graph, as torch.compile (each broke)."""
    def f(x):
        a = dataclasses.asdict(_FROZEN)["d"] + dataclasses.astuple(_PLAIN)[0]
        b = dataclasses.replace(_FROZEN, d=8).d + dataclasses.replace(_PLAIN, d=5).d
        name = _PLAIN.__class__.__name__
        return x * a + b, name, type(dataclasses.replace(_PLAIN, act="relu"))

    x = ember.randn(3)
    assert_one_graph(f, x)
    from ._util import check
    check(f, lambda: (ember.randn(3),))


def test_dataclass_field_objects_of_an_outside_config_do_not_recompile():
    """``dataclasses.replace(cfg)`` reads ``f._field_type`` of the class's Field objects
    (``__slots__``, no ``__dict__``): the guard that no instance attribute shadows the class
    attribute raised AttributeError on them, so every call recompiled (and ran eagerly past the
    recompile limit)."""
    def f(x):
        return x * dataclasses.replace(_PLAIN, d=3).d

    from ._util import check
    check(f, lambda: (ember.randn(3),), calls=4)


def test_enum_called_with_a_value_is_its_member():
    def f(x):
        k = _Kind("b")
        return x * (2 if k is _Kind.B else 3), k

    x = ember.randn(3)
    assert_one_graph(f, x)
    from ._util import check
    check(f, lambda: (ember.randn(3),))

    def bad(x):
        try:
            _Kind("zzz")
        except ValueError:
            return x - 1
        return x + 1

    dynamo.reset()
    assert_same(bad(x), ember.compile(bad, backend="eager")(x))
