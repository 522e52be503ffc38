"""Small programs compiled with a counting backend: results equal eager on fresh random inputs,
with the expected number of graphs (0 = the frame runs eagerly: unsupported or no ops)."""
import collections
import dataclasses
import functools
import math
import operator

import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

from ._util import check


@pytest.fixture(autouse=True)
def _print_breaks(monkeypatch):
    """print() is this file's graph-break device: keep it a break (by default a print of constants
    is replayed after the graph, tests/dynamo/test_logging_calls.py)."""
    monkeypatch.setattr(ember.dynamo.config, "replay_logging_calls", False)

PROGRAMS = []


def x34():
    return (ember.randn(3, 4),)


def xy34():
    return (ember.randn(3, 4), ember.randn(3, 4))


def prog(inputs=x34, graphs=1):
    def deco(fn):
        PROGRAMS.append(pytest.param(fn, inputs, graphs, id=fn.__name__))
        return fn
    return deco


# ---------------------------------------------------------------- arithmetic and ops
@prog(xy34)
def p_add(x, y):
    return x + y


@prog(xy34)
def p_arith_chain(x, y):
    return (x * 2 - y) / 3 + x ** 2 - (-y)


@prog(xy34)
def p_reverse_ops(x, y):
    return 1 - x, 2 * y, 3 / (x.abs() + 1), 2 ** x


@prog()
def p_ember_fns(x):
    return ember.relu(x), ember.sigmoid(x), ember.tanh(x), ember.exp(x), ember.sin(x)


@prog()
def p_methods(x):
    return x.relu().sum(dim=1).mean(), x.t().contiguous(), x.view(4, 3), x.reshape(-1)


@prog()
def p_functional(x):
    return F.relu(x), F.gelu(x), F.softmax(x, dim=-1), F.log_softmax(x, -1), F.silu(x)


@prog(lambda: (ember.randn(2, 3, 4), ember.randn(2, 4, 5)))
def p_matmul(a, b):
    return a @ b, ember.matmul(a, b).sum(-1)


@prog()
def p_reductions(x):
    return x.sum(), x.mean(0), x.max(dim=1)[0], x.amax(1), x.var(1), x.std(0)


@prog()
def p_compare(x):
    return (x > 0).float(), ember.where(x > 0, x, ember.zeros_like(x)), x.clamp(min=-0.5, max=0.5)


@prog()
def p_creation(x):
    return x + ember.ones(3, 4), ember.zeros(2), ember.arange(5), ember.full((2, 2), 3.0)


@prog()
def p_creation_like(x):
    return ember.ones_like(x) * x, ember.zeros_like(x) + 1, ember.empty_like(x).shape


@prog()
def p_dtype_cast(x):
    return x.to(ember.float64), x.double().sum(), x.int(), x.to(dtype=ember.float16).float()


@prog()
def p_cat_stack(x):
    return ember.cat([x, x * 2], dim=0), ember.stack((x, x + 1), 1)


@prog()
def p_split_chunk(x):
    a, b = x.split(2, dim=1)
    c, d = ember.chunk(x, 2, dim=1)
    return a * d, b + c


@prog()
def p_unbind_iter(x):
    out = 0
    for row in x:
        out = out + row
    return out


@prog()
def p_unsqueeze_expand(x):
    return x.unsqueeze(0).expand(2, 3, 4), x[None], x[:, None, :].squeeze(1)


@prog()
def p_permute_transpose(x):
    return x.permute(1, 0), x.transpose(0, 1), x.T, x.flatten()


@prog()
def p_inplace(x):
    y = x.clone()
    y.add_(1)
    y.mul_(2)
    y += 3
    return y


@prog()
def p_inplace_input(x):
    x.add_(1)
    return x * 2


@prog()
def p_setitem(x):
    y = x.clone()
    y[0] = 0.0
    y[:, 1] = y[:, 2] * 2
    return y


# ---------------------------------------------------------------- indexing
@prog()
def p_index_basic(x):
    return x[0], x[1:], x[:, ::2], x[..., -1], x[0, 1], x[-1:, :2]


@prog(lambda: (ember.randn(5, 4), ember.tensor([0, 2, 4])))
def p_index_tensor(x, idx):
    return x[idx], x.index_select(0, idx), ember.gather(x, 0, idx.unsqueeze(1).expand(3, 4))


@prog(lambda: (ember.randn(5, 4),), graphs=1)   # x > 0, then a graph break at the subscript (as torch)
def p_index_mask_falls_back(x):
    return x[x > 0]


# ---------------------------------------------------------------- shapes and metadata
@prog()
def p_shape_arith(x):
    n, m = x.shape
    return x.view(n * m), x.reshape(m, n), x.size(0) + x.size(1), x.dim(), x.numel()


@prog()
def p_shape_branch(x):
    if x.shape[0] > 2:
        return x * 2
    return x * 3


@prog(lambda: (ember.randn(2, 4),))
def p_shape_branch_other(x):
    if x.shape[0] > 2:
        return x * 2
    return x * 3


@prog()
def p_dtype_branch(x):
    if x.dtype == ember.float32:
        y = x + 1
    else:
        y = x - 1
    if x.is_floating_point() and x.ndim == 2 and not x.requires_grad:
        y = y * 2
    return y, x.device, x.dtype


@prog()
def p_size_object(x):
    s = x.size()
    return x.new_zeros(s) if hasattr(x, "new_zeros") else ember.zeros(s), s, len(x)


@prog()
def p_len_range(x):
    acc = x
    for i in range(len(x)):
        acc = acc + i
    return acc


# ---------------------------------------------------------------- Python constants and containers
@prog()
def p_const_fold(x):
    a = 3
    b = a * 2 + 1
    c = math.sqrt(16) + abs(-2) + max(1, 5) + min([3, 4]) + sum([1, 2, 3])
    return x * b + c


@prog()
def p_fstring(x):
    name = f"layer{1 + 1}_{'x'!r:>5}"
    return x + len(name), name


@prog()
def p_tuple_list_dict(x):
    t = (x, x * 2)
    lst = [t[0], t[1], x + 1]
    lst.append(x - 1)
    d = {"a": lst[0], "b": lst[-1]}
    d["c"] = d["a"] + d["b"]
    return d, tuple(lst), [v for v in d.values()]


@prog()
def p_unpack_star(x):
    a, *rest = [x, x + 1, x + 2]
    *init, last = (x, x * 2, x * 3)
    return a + sum(rest) + last + init[0]


@prog()
def p_list_comprehension(x):
    ys = [x * i for i in range(4)]
    zs = [y + 1 for y in ys if y is not None]
    return sum(zs), {i: z for i, z in enumerate(zs)}


@prog()
def p_generator_expr(x):
    return sum(x * i for i in range(3))


@prog()
def p_enumerate_zip(x):
    ws = [1.0, 2.0, 3.0]
    acc = x
    for i, (w, s) in enumerate(zip(ws, "abc")):
        acc = acc * w + i
    return acc


@prog()
def p_dict_iteration(x):
    d = {"x": x, "y": x * 2}
    out = {}
    for k, v in d.items():
        out[k + "_out"] = v + 1
    for k in d:
        out[k] = d[k]
    return out


@prog()
def p_isinstance(x):
    if isinstance(x, ember.Tensor) and not isinstance(x, (list, tuple)):
        return x + 1
    return x - 1


@prog()
def p_none_checks(x):
    y = None
    if y is None:
        y = x
    z = x if y is not None else None
    return y + z


@prog()
def p_bool_ops(x):
    a, b = True, False
    if (a and not b) or b:
        x = x + 1
    return x, a or b, a and b


@prog()
def p_sorted_reversed(x):
    order = sorted([3, 1, 2], reverse=True)
    acc = x
    for i in reversed(order):
        acc = acc * i
    return acc


@prog()
def p_map_filter_reduce(x):
    ys = list(map(lambda i: x * i, [1, 2, 3]))
    ks = list(filter(lambda i: i % 2 == 1, range(5)))
    return functools.reduce(operator.add, ys), ks, functools.reduce(lambda a, b: a * b, ks, 1)


@prog()
def p_operator_module(x):
    return operator.add(x, 1), operator.mul(x, x), operator.getitem(x, 0), operator.neg(x)


@prog()
def p_slices_consts(x):
    lst = list(range(10))
    return x * lst[2:5][1], lst[::-1], lst[1:-1:2]


@prog()
def p_string_methods(x):
    s = "a,b,c".split(",")
    return x * len(s), "-".join(s).upper()


@prog()
def p_while_loop_const(x):
    i = 0
    while i < 3:
        x = x * 2
        i += 1
    return x


@prog()
def p_nested_loops(x):
    for i in range(2):
        for j in range(2):
            if i == j:
                continue
            x = x + i * j
        if i > 5:
            break
    return x


@prog()
def p_assert_const(x):
    assert x.ndim == 2, "need a matrix"
    return x + 1


@prog()
def p_del_local(x):
    y = x + 1
    z = y * 2
    del y
    return z


# ---------------------------------------------------------------- functions, closures, globals
def helper_scale(t, k=2.0, *, bias=0.0):
    return t * k + bias


def helper_varargs(*ts, **kw):
    out = ts[0]
    for t in ts[1:]:
        out = out + t
    return out * kw.get("scale", 1.0)


def helper_recursive(t, n):
    if n == 0:
        return t
    return helper_recursive(t * 2, n - 1)


@prog()
def p_inline_defaults(x):
    return helper_scale(x), helper_scale(x, 3.0), helper_scale(x, bias=1.0), helper_scale(k=0.5, t=x)


@prog()
def p_inline_varargs(x):
    return helper_varargs(x, x, x, scale=2.0), helper_varargs(*[x, x + 1]), helper_varargs(x, **{"scale": 3})


@prog()
def p_inline_recursive(x):
    return helper_recursive(x, 4)


@prog()
def p_closure(x):
    scale = 3.0

    def inner(t):
        return t * scale

    return inner(x) + inner(x + 1)


@prog()
def p_nonlocal(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count

    y = bump(x)
    y = bump(y)
    return y, count


@prog()
def p_lambda_default(x):
    f = lambda t, k=2: t * k  # noqa: E731
    return f(x), f(x, 5)


@prog()
def p_partial_like_closure(x):
    def make(k):
        return lambda t: t + k
    fs = [make(i) for i in range(3)]
    return [f(x) for f in fs]


GLOBAL_W = ember.randn(4, 4)
GLOBAL_SCALE = 0.5


@prog()
def p_global_tensor(x):
    return x @ GLOBAL_W * GLOBAL_SCALE


_closure_tensor = ember.randn(4)


def _make_closure_fn():
    b = _closure_tensor

    def fn(x):
        return x + b
    return fn


p_closure_tensor = _make_closure_fn()
PROGRAMS.append(pytest.param(p_closure_tensor, x34, 1, id="p_closure_tensor"))


Point = collections.namedtuple("Point", ["a", "b"])


@prog(lambda: (Point(ember.randn(3), ember.randn(3)),))
def p_namedtuple_input(p):
    return p.a + p.b, Point(p.b, p.a)


@dataclasses.dataclass
class Config:
    scale: float
    shift: float


CFG = Config(2.0, 1.0)


@prog()
def p_dataclass_global(x):
    return x * CFG.scale + CFG.shift


@prog(lambda: ([ember.randn(3), ember.randn(3), ember.randn(3)],))
def p_list_input(xs):
    return sum(xs), xs[0] * xs[-1], len(xs)


@prog(lambda: ({"a": ember.randn(2), "b": ember.randn(2)},))
def p_dict_input(d):
    return d["a"] * d["b"], {k: v + 1 for k, v in d.items()}


@prog(lambda: (ember.randn(3, 4), 3, 2.5, "mul"))
def p_scalar_args(x, n, f, mode):
    if mode == "mul":
        return x * n * f
    return x + n + f


@prog(lambda: (ember.randn(3, 4), None))
def p_optional_arg(x, mask):
    if mask is not None:
        x = x * mask
    return x + 1


# ---------------------------------------------------------------- nn.Modules
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.norm = nn.LayerNorm(4)
        self.scale = 0.5
        self.register_buffer("offset", ember.ones(4))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = x + self.scale * F.relu(layer(x)) + i
        return self.norm(x) + self.offset


class WithHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4, bias=False)

    def _act(self, t):
        return t * ember.sigmoid(t)

    @property
    def weight_t(self):
        return self.proj.weight.t()

    def forward(self, x):
        return self._act(self.proj(x)) + x @ self.weight_t


class ScaledMLP(MLP):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, x):
        return super().forward(x) * self.scale + super(ScaledMLP, self).forward(x)


MLP_M = MLP()
SCALED_M = ScaledMLP()


@prog()
def p_module_super_forward(x):
    return SCALED_M(x)
RES_M = Residual()
HELP_M = WithHelper()
SEQ_M = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3), nn.Softmax(dim=-1))
DROP_M = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))


@prog()
def p_module_mlp(x):
    return MLP_M(x)


@prog()
def p_module_residual(x):
    return RES_M(x)


@prog()
def p_module_helpers(x):
    return HELP_M(x)


@prog()
def p_module_sequential(x):
    return SEQ_M(x)


@prog()
def p_module_dropout_train(x):
    return DROP_M(x)


@prog()
def p_module_params(x):
    w = MLP_M.fc1.weight
    return x @ w.t() + MLP_M.fc1.bias, MLP_M.training


class Attention(nn.Module):
    def __init__(self, d=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        h = self.heads
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        return self.out(y)


class Block(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    def __init__(self, n=2, d=8):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


TRANSFORMER = Transformer()


@prog(lambda: (ember.randn(2, 5, 8),))
def p_transformer(x):
    return TRANSFORMER(x)


CONV = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                     nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


@prog(lambda: (ember.randn(2, 3, 8, 8),))
def p_cnn(x):
    return CONV(x)


# ---------------------------------------------------------------- grad mode and autograd
@prog(lambda: (ember.randn(3, 4, requires_grad=True),))
def p_requires_grad_input(x):
    return (x * 2).sum(), x.requires_grad


# ---------------------------------------------------------------- random ops (seeded equal to eager)
@prog()
def p_random_ops(x):
    return x + ember.randn(3, 4), F.dropout(x, 0.5, training=True)


# ---------------------------------------------------------------- fallbacks: the frame runs eagerly
# ---------------------------------------------------------------- graph breaks (resume functions)
# .item() breaks; the float enters the resume function's graph as an input (no recompile per value)
@prog(graphs=2)
def p_break_item(x):
    return x * x.sum().item()


@prog(lambda: (ember.randn(3, 4).abs() + 0.1,), graphs=2)
def p_break_data_branch(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


@prog(lambda: (-ember.randn(3, 4).abs() - 0.1,), graphs=2)
def p_break_data_branch_false(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


@prog(graphs=1)
def p_break_print_no_ops_before(x):
    print("hello")
    return x + 1


@prog(graphs=2)
def p_break_print(x):
    y = x.relu()
    print("y has shape", y.shape)
    z = y * 2
    return z, y


# the resume function receives ``b`` as an argument; appending to it there is replayed after its graph
# (2 graphs)
@prog(graphs=2)
def p_break_keeps_locals_and_stack(x):
    a = x + 1
    b = [a, 2]
    c = {"k": a * 3}
    r = a * 2 + len(str(b[1]))
    b.append(r)
    print("b", len(b))
    b.append(a - 1)
    return r + c["k"], b


@prog(graphs=2)
def p_break_aliasing_preserved(x):
    inner = [x + 1]
    outer = [inner, inner]
    print("break")
    inner.append(x * 2)
    return outer, len(outer[1])


@ember.compiler.disable
def _disabled_helper(t):
    return t * 10


@prog(graphs=2)
def p_break_disabled_call(x):
    y = x + 1
    z = _disabled_helper(y)
    return z * y


@prog(graphs=3)
def p_break_twice(x):
    a = x + 1
    print("one")
    b = a * 2
    print("two")
    return b - 1


# the resume function reads only len(n): the rows of ``n`` (lists of floats) are not read, so
# nothing is guarded on the numbers and later calls reuse it (1 + 1; session 48: outside lists
# are read lazily, variables/lists.py OutsideListVariable)
@prog(graphs=2)
def p_break_method_call_on_tensor(x):
    y = x.abs() + 1
    n = y.tolist()
    return y * len(n)


# the resume function branches on the .item() value: specialised (recompiled, but no new graph)
@prog(graphs=2)
def p_break_in_call_args(x):
    y = x * 2
    return ember.stack([y, ember.tensor(float(y.sum().item() > -1e9)) * y])


@prog(graphs=1)
def p_break_nonzero(x):
    return ember.nonzero(x > 0)


def _helper_with_print(t):
    print("inside helper")
    return t * 2


@prog(graphs=3)
def p_break_at_inlined_call(x):
    y = x + 1
    z = _helper_with_print(y)
    return z + y


# try bodies are traced (a graph raising there re-runs the frame eagerly for the handler)
@prog(graphs=1)
def p_fallback_try(x):
    try:
        y = x + 1
    except RuntimeError:
        y = x
    return y


@prog(lambda: (ember.randn(3, 4, requires_grad=True),))
def p_with_no_grad(x):
    with ember.no_grad():
        y = x * 2
    z = x * 3
    with ember.enable_grad():
        w = z + 1
    return y, z, w, y.requires_grad


@prog(lambda: (ember.randn(3, 4, requires_grad=True),), graphs=0)
def p_fallback_with_unknown_ctx(x):
    import threading
    with threading.Lock():       # (nullcontext and Python managers are modelled; a C lock is not)
        y = x * 2
    return y


@prog(lambda: (ember.randn(3, 4), [1, 2]), graphs=1)
def p_side_effect_input_list_append(x, lst):
    lst.append(3)
    return x + len(lst)


@prog(graphs=0)
def p_fallback_tolist(x):
    return x.tolist()


# a break in a loop body resumes mid-loop: one resume function, one graph per segment with ops
@prog(graphs=2)
def p_fallback_break_in_loop(x):
    for i in range(2):
        print(i)
        x = x + i
    return x


# a break in a no_grad block: the resume function re-enters it (tests/dynamo/test_breaks_in_blocks.py);
# what follows the break only leaves the block (no graph: the mode is set after the first one)
@prog(graphs=1)
def p_fallback_break_in_with(x):
    with ember.no_grad():
        y = x + 1
        print("inside")
    return y


@prog(graphs=0)
def p_no_ops(x):
    return x


@prog(graphs=0)
def p_only_constants(x):
    return 1 + 2, "s"


class Holder:
    def __init__(self):
        self.count = 0


@prog(lambda: (ember.randn(3, 4), Holder()), graphs=1)
def p_side_effect_setattr(x, h):
    h.count += 1
    return x * h.count


@prog(lambda: (ember.randn(3, 4), Holder()), graphs=1)
def p_side_effect_setattr_tensor_and_read_back(x, h):
    h.saved = x * 2
    h.count = h.count + 5
    old = h.count
    h.count = 0
    return h.saved + old


@prog(lambda: (ember.randn(3, 4), {"a": 1}), graphs=1)
def p_side_effect_input_dict(x, d):
    d["b"] = x + 1
    d.pop("a")
    d["c"] = [d["b"], 3]
    return x * len(d)


@prog(lambda: (ember.randn(3, 4), [ember.randn(2)]), graphs=1)
def p_side_effect_list_alias(x, lst):
    outer = [lst, lst]
    lst.append(x)
    lst[0] = lst[0] * 2
    return outer[1][1] + 1, len(outer[0])


@prog(lambda: (ember.randn(3, 4), [1]), graphs=2)
def p_side_effect_across_break(x, lst):
    lst.append(2)
    y = x + len(lst)
    print("break", len(lst))
    lst.append(y)
    return y * 2


class Box:
    def __init__(self, v):
        self.v = v


@prog(lambda: (ember.randn(3, 4), [Box(2.0), Box(3.0)]), graphs=1)
def p_popped_object_across_break(x, lst):
    # b is read back after the graph through its source, lst[0]: after the replay of the pop
    # that was the other box (or, popping the last, an IndexError)
    b = lst.pop(0)
    print("break", len(lst))
    return x * b.v, len(lst), lst[0].v


@prog(lambda: (ember.randn(3, 4), [Box(2.0), Box(5.0)]), graphs=2)
def p_popped_and_pushed_back_across_break(x, pool):
    b = pool.pop()
    y = x * b.v
    print("break", len(pool))
    pool.append(b)
    return y + len(pool), pool[-1].v


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        self.last = x.detach()
        return self.lin(x)


def test_module_attribute_side_effects():
    from ember import dynamo
    from ._util import CountingBackend, assert_same
    m = Counting()
    cnt = CountingBackend()
    cm = ember.compile(m, backend=cnt)
    x = ember.randn(2, 4)
    for i in range(3):
        assert_same(cm(x), m.lin(x))
    assert m.calls == 3
    assert_same(m.last, x)
    assert dynamo.counters["internal_errors"] == 0


COUNTER = 0


def _bump_global(x):
    global COUNTER
    COUNTER = COUNTER + 1
    return x * COUNTER


def test_module_compile_method():
    from ._util import CountingBackend, assert_same
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    ref = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    ref.load_state_dict(m.state_dict())
    cnt = CountingBackend()
    m.compile(backend=cnt)
    x = ember.randn(2, 4)
    assert_same(m(x), ref(x))
    assert_same(m(x), ref(x))
    assert cnt.frame_count == 1


def test_global_assignment_side_effect():
    global COUNTER
    from ._util import assert_same
    COUNTER = 0
    cf = ember.compile(_bump_global, backend="eager")
    x = ember.randn(3)
    assert_same(cf(x), x * 1)
    assert_same(cf(x), x * 2)
    assert COUNTER == 2


@pytest.mark.parametrize("fn,inputs,graphs", PROGRAMS)
def test_program(fn, inputs, graphs):
    check(fn, inputs, graphs=graphs)
