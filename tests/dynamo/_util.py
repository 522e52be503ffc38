"""Helpers for dynamo tests: a counting backend and eager-vs-compiled comparison."""
import copy

import numpy as np

import ember
from ember import dynamo


class CountingBackend:
    """Records every graph it is given and runs it eagerly."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    @property
    def frame_count(self):
        return len(self.graphs)

    @property
    def op_count(self):
        return sum(sum(1 for n in g.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
                   for g in self.graphs)


def clone_tree(x):
    if isinstance(x, ember.Tensor):
        c = x.detach().clone()
        if x.requires_grad:
            c.requires_grad_(True)
        return c
    if isinstance(x, list):
        return [clone_tree(i) for i in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(clone_tree(i) for i in x)
    if isinstance(x, dict):
        return {k: clone_tree(v) for k, v in x.items()}
    if hasattr(x, "__dict__") and not isinstance(x, type) and not callable(x):
        return copy.copy(x)
    return x


def assert_same(a, b, path="out"):
    if isinstance(a, ember.Tensor):
        assert isinstance(b, ember.Tensor), f"{path}: {type(b)} is not a tensor"
        assert tuple(a.shape) == tuple(b.shape), f"{path}: shape {tuple(b.shape)} != {tuple(a.shape)}"
        assert a.dtype == b.dtype, f"{path}: dtype {b.dtype} != {a.dtype}"
        assert a.requires_grad == b.requires_grad, f"{path}: requires_grad differs"
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6, atol=1e-6,
                                   err_msg=path)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b), f"{path}: {type(b)} != {type(a)}"
        assert len(a) == len(b), f"{path}: length"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b), f"{path}: dict keys"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif hasattr(a, "__dict__") and not isinstance(a, type) and not callable(a):
        assert type(a) is type(b), f"{path}: {type(b)} != {type(a)}"
        assert_same(vars(a), vars(b), f"{path}.__dict__")
    else:
        assert type(a) is type(b) and (a == b or (type(a) is float and a != a and b != b)), f"{path}: {b!r} != {a!r}"


def check(fn, make_inputs, graphs=1, calls=3, seed=True):
    """Compile ``fn`` with a counting backend; on fresh inputs each call the result equals eager."""
    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(fn, backend=cnt)
    for i in range(calls):
        args = make_inputs()
        args_eager, args_comp = clone_tree(args), clone_tree(args)
        if seed:
            ember.manual_seed(1234 + i)
        expected = fn(*args_eager)
        if seed:
            ember.manual_seed(1234 + i)
        got = cf(*args_comp)
        assert_same(expected, got)
        assert_same(args_eager, args_comp, "inputs after the call")
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons
    assert cnt.frame_count == graphs, (cnt.frame_count, dynamo.fallback_reasons)
    return cnt


def random_tensor(rng, *shape):
    """A float32 tensor of standard-normal draws from ``rng`` (a numpy Generator)."""
    return ember.tensor(rng.standard_normal(shape).astype(np.float32))


def assert_one_graph(fn, *args):
    """``fn(*args)`` compiles to exactly one graph with no break."""
    ex = dynamo.explain(fn)(*args)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


def run_and_capture(fn, args, capsys, stream="out", backend="eager"):
    """``fn(*args)`` eagerly, then compiled with ``backend`` after ``dynamo.reset()``: (eager
    result, compiled result, text eager wrote to ``stream``, text the compiled call wrote)."""
    import ember
    from ember import dynamo
    dynamo.reset()
    want = fn(*args)
    text_eager = getattr(capsys.readouterr(), stream)
    got = ember.compile(fn, backend=backend)(*args)
    return want, got, text_eager, getattr(capsys.readouterr(), stream)
