"""DCE, CSE, tabular/DOT printing and the Interpreter on plain values
(torch-free; GraphModule/ShapeProp on ember tensors live in test_ember_*)."""

import operator
import random
import types

import pytest

from ember.fx import Graph, Interpreter
from ember.fx.passes import eliminate_common_subexpressions, eliminate_dead_code, format_tabular, to_dot

from ._helpers import compile_graph, trace_fn


def test_dce_removes_unused_chains_only():
    def f(x, y):
        a = x + 1
        b = a * y
        _ = b - 1
        _ = (x * 3) // 2
        return a

    g = trace_fn(f)
    assert len(g.nodes) == 8
    assert eliminate_dead_code(g) is True
    assert [n.name for n in g.nodes] == ["x", "y", "add", "output"]  # unused placeholder kept
    assert eliminate_dead_code(g) is False
    g.lint()


def impure_fn(x):
    return x


impure_fn._ember_is_impure = True


def test_dce_respects_impurity():
    g = Graph()
    x = g.placeholder("x")
    g.call_function(impure_fn, (x,))
    g.call_method("add_", (x, 1))  # in-place method
    flagged = g.call_function(operator.neg, (x,))
    flagged.meta["is_impure"] = True
    g.call_function(random.random, ())
    g.impure_targets.add(random.random)
    g.call_function(operator.pos, (x,))  # pure, dead
    g.output(x)
    g.eliminate_dead_code()
    assert [n.op + ":" + n.name for n in g.nodes] == [
        "placeholder:x", "call_function:impure_fn", "call_method:add_", "call_function:neg",
        "call_function:random", "output:output",
    ]
    # a custom predicate overrides the default
    g.eliminate_dead_code(is_impure_node=lambda n: n.op in ("placeholder", "output"))
    assert [n.name for n in g.nodes] == ["x", "output"]


def test_cse_merges_duplicates_and_keeps_impure():
    def f(x, y):
        a = x * y
        b = x * y
        c = a + b
        d = x.mul(2, k=1)
        e = x.mul(2, k=1)
        f_ = x.mul(2.0, k=1)  # 2.0 vs 2: different constants, kept apart
        return c, d, e, f_

    g = trace_fn(f)
    before = compile_graph(g)
    assert eliminate_common_subexpressions(g) is True
    g.lint()
    names = [n.name for n in g.nodes]
    assert names == ["x", "y", "mul", "add", "mul_2", "mul_4", "output"]

    class V(float):
        def mul(self, factor, **kw):
            return V(self * factor)

    after = compile_graph(g)
    assert after(V(3.0), 2.0) == before(V(3.0), 2.0)

    g2 = Graph()
    x = g2.placeholder("x")
    a = g2.call_method("add_", (x, 1))
    b = g2.call_method("add_", (x, 1))
    g2.output((a, b))
    assert eliminate_common_subexpressions(g2) is False


def test_tabular_and_dot():
    g = trace_fn(lambda x: x * 2 + 3)
    table = format_tabular(g)
    lines = table.split("\n")
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert lines[3].split()[:3] == ["call_function", "mul", "operator.mul"]
    assert "(x, 2)" in lines[3]
    dot = to_dot(g)
    assert dot.startswith('digraph "fx_graph" {')
    assert '"x" -> "mul";' in dot and '"mul" -> "add";' in dot and '"add" -> "output";' in dot
    assert dot.rstrip().endswith("}")


def test_interpreter_runs_and_frees_values():
    def f(x, y):
        a = x + y
        b = a * 2
        return b - x, (a, b)

    g = trace_fn(f)
    root = types.SimpleNamespace()
    interp = Interpreter(root, graph=g)
    assert interp.run(3, 4) == f(3, 4)
    # only values still needed by the output remain
    assert {n.name for n in interp.env} <= {"sub", "add", "mul", "output"}

    class Doubler(Interpreter):
        def call_function(self, target, args, kwargs):
            if target is operator.add:
                return 2 * target(*args, **kwargs)
            return super().call_function(target, args, kwargs)

    assert Doubler(root, graph=g).run(3, 4)[0] == (2 * 7) * 2 - 3


def test_interpreter_initial_env_and_errors():
    g = trace_fn(lambda x, y: (x + 1) * y)
    add = g.find_nodes(op="call_function", target=operator.add)[0]
    x, y = g.find_nodes(op="placeholder")
    interp = Interpreter(types.SimpleNamespace(), graph=g)
    # placeholders already in initial_env consume no positional argument
    assert interp.run(5, initial_env={x: 0, add: 100}) == 500
    with pytest.raises(RuntimeError, match="expected a positional argument"):
        interp.run(1)
    with pytest.raises(TypeError) as ei:
        interp.run("a", 2)
    assert any("While executing %add" in n for n in ei.value.__notes__)


def test_interpreter_get_attr_and_call_module():
    g = Graph()
    x = g.placeholder("x")
    w = g.get_attr("sub.w")
    m = g.call_module("sub.f", (x,), {"k": w})
    g.output(m)
    root = types.SimpleNamespace(sub=types.SimpleNamespace(w=10, f=lambda v, k: v + k))
    root.named_modules = lambda: []
    assert Interpreter(root, graph=g).run(1) == 11
    assert compile_graph(g, root)(1) == 11
    src = g.python_code().src
    assert "sub_w = self.sub.w" in src and "sub_f = self.sub.f(x, k = sub_w)" in src
    with pytest.raises(RuntimeError, match="no attribute 'w'"):
        Interpreter(types.SimpleNamespace(sub=types.SimpleNamespace()), graph=g).run(1)
