"""Symbolic tracing of plain Python functions over numbers (torch-free)."""

import math
import operator

import pytest

import ember.fx as fx
from ember.fx import Graph, Proxy, TraceError, Tracer

from ._helpers import compile_graph, trace_fn


def arith(x, y):
    a = x * 2 + 3
    b = a - y
    c = -b
    d = abs(c)
    e = a // 2
    f = a ** 2
    g = a % 3
    h = 10 / a
    i = (a < b, a == b, a >= b, a != b)
    j = 7 - x
    k = 2 ** y
    return (c, d, e, f, g, h, i, j, k)


@pytest.mark.parametrize("x,y", [(1, 2), (3.5, -1), (-4, 7)])
def test_arithmetic_roundtrip(x, y):
    g = trace_fn(arith)
    g.lint()
    assert compile_graph(g)(x, y) == arith(x, y)


def test_reflected_ops_keep_operand_order():
    g = trace_fn(lambda x: 3 - x)
    node = [n for n in g.nodes if n.op == "call_function"][0]
    assert node.target is operator.sub and node.args[0] == 3
    assert "sub = 3 - x" in g.python_code().src


def test_bitwise_and_shift_ops():
    def f(x):
        return (x & 6, x | 1, x ^ 3, x << 2, x >> 1, ~x, 5 & x, 1 << x)

    g = trace_fn(f)
    assert compile_graph(g)(13) == f(13)
    src = g.python_code().src
    assert "and_ = x & 6" in src and "invert = ~x" in src


def test_getitem_getattr_and_methods():
    def f(x):
        a = x[1:3]
        b = x.real
        c = x.conjugate()
        d = x["k"] if False else x[0]
        return a, b, c, d

    g = trace_fn(f)
    ops = [(n.op, n.name) for n in g.nodes]
    assert ("call_method", "conjugate") in ops
    assert ("call_function", "getattr_1") in ops  # getattr is a builtin name
    src = g.python_code().src
    assert "getattr_1 = x.real" in src
    assert "getitem = x[slice(1, 3, None)]" in src
    assert "conjugate = x.conjugate()" in src

    class V(list):
        real = 5

        def conjugate(self):
            return "conj"

    v = V([10, 11, 12, 13])
    assert compile_graph(g)(v) == f(v)


def test_attribute_node_is_lazy_like_torch():
    def h(x):
        return 3 + x, x.T, x[0]

    g = trace_fn(h)
    # the getattr node is only created when the attribute value is used (at
    # return), i.e. after x[0]
    assert [n.name for n in g.nodes] == ["x", "add", "getitem", "getattr_1", "output"]


def test_bool_raises_trace_error_naming_user_line():
    def branchy(x):
        if x > 0:  # THE-BRANCH-LINE
            return x
        return -x

    with pytest.raises(TraceError) as ei:
        trace_fn(branchy)
    msg = str(ei.value)
    assert __file__ in msg
    assert "THE-BRANCH-LINE" in msg
    assert "branchy" in msg
    assert isinstance(ei.value, RuntimeError)


def test_iter_and_len_raise_trace_error():
    def loops(x):
        for i in x:  # LOOP-LINE
            pass
        return x

    with pytest.raises(TraceError, match="LOOP-LINE"):
        trace_fn(loops)

    def lens(x):
        return len(x)  # LEN-LINE

    with pytest.raises(TraceError, match="LEN-LINE"):
        trace_fn(lens)


def test_tuple_unpacking_is_allowed():
    def f(pair):
        a, b = pair
        return b, a

    g = trace_fn(f)
    assert compile_graph(g)((1, 2)) == (2, 1)
    assert [n.name for n in g.nodes] == ["pair", "getitem", "getitem_1", "output"]


def test_defaults_and_kwonly_become_placeholders():
    def f(x, y=3, *, z=4):
        return x + y + z

    g = trace_fn(f)
    src = g.python_code().src
    assert "def forward(self, x, y = 3, z = 4):" in src
    fn = compile_graph(g)
    assert fn(1) == 8 and fn(1, 1, z=0) == 2


def test_varargs_rejected_clearly():
    def f(x, *rest):
        return x

    with pytest.raises(NotImplementedError, match=r"\*args"):
        trace_fn(f)


def test_concrete_args_specialize_and_guard():
    def f(x, flag):
        if flag:
            return x * 2
        return x + 1

    g = trace_fn(f, concrete_args={"flag": True})
    g.lint()
    fn = compile_graph(g)
    assert fn(5) == 10 and fn(5, True) == 10
    with pytest.raises(AssertionError, match="specialized"):
        fn(5, False)
    # the guard survives dead-code elimination
    g.eliminate_dead_code()
    assert any(n.target is fx.assert_specialized for n in g.nodes)


def test_math_functions_are_autowrapped():
    def f(x):
        return math.sqrt(x) + math.floor(x)

    g = trace_fn(f)
    targets = [n.target for n in g.nodes if n.op == "call_function"]
    assert math.sqrt in targets and math.floor in targets
    assert compile_graph(g)(9.5) == f(9.5)
    # patching is undone after tracing
    assert f.__globals__["math"].sqrt is math.sqrt


def opaque(x):
    return int(x) + 1  # int() on a Proxy cannot be traced


fx.wrap("opaque")


def test_wrap_makes_function_a_leaf():
    def f(x):
        return opaque(x) * 2

    g = trace_fn(f)
    assert [n.target for n in g.nodes if n.op == "call_function"][0] is opaque
    assert compile_graph(g)(4.5) == f(4.5)
    assert globals()["opaque"] is opaque


def test_proxy_over_existing_graph_appends_nodes():
    g = Graph()
    x = Proxy(g.placeholder("x"))
    y = (x + 1) * x.node.graph.placeholder("z").name.__len__()
    g.output(y.node)
    assert compile_graph(g)(2, None) == 3


def test_ember_function_protocol_records_call_function():
    def myfunc(a, b=1):  # stand-in for a public ember function
        for arg in (a, b):
            if hasattr(type(arg), "__ember_function__"):
                return type(arg).__ember_function__(myfunc, (type(arg),), (a,), {"b": b})
        return a + b

    def f(x):
        return myfunc(x, b=2)

    g = trace_fn(f)
    node = [n for n in g.nodes if n.op == "call_function"][0]
    assert node.target is myfunc and node.args == (g.find_nodes(op="placeholder")[0],) and node.kwargs == {"b": 2}
    assert compile_graph(g)(1) == 3


def test_setitem_is_recorded_and_impure():
    def f(x):
        x[0] = 5
        return x

    g = trace_fn(f)
    g.eliminate_dead_code()
    assert any(n.target is operator.setitem for n in g.nodes)
    lst = [1, 2]
    assert compile_graph(g)(lst) == [5, 2]


def test_stack_traces_recorded_when_asked():
    t = Tracer(record_stack_traces=True)
    g = t.trace(lambda x: x + 1)
    add = [n for n in g.nodes if n.op == "call_function"][0]
    assert __file__ in add.stack_trace
