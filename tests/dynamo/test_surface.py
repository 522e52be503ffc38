"""User surface: ember.compile forms, backends, recompiles, fullgraph, disable, reset, logging."""
import logging
import warnings

import pytest

import ember
import ember.nn as nn
from ember import dynamo

from ._util import CountingBackend, assert_same


@pytest.fixture(autouse=True)
def _print_breaks(monkeypatch):
    """print() is this file's graph-break device: keep it a break (by default a print of constants
    is replayed after the graph, tests/dynamo/test_logging_calls.py)."""
    monkeypatch.setattr(ember.dynamo.config, "replay_logging_calls", False)


def test_decorator_forms():
    cnt = CountingBackend()

    @ember.compile(backend=cnt)
    def f(x):
        return x * 2 + 1

    x = ember.randn(3)
    assert_same(f(x), x * 2 + 1)
    assert f.__name__ == "f"
    assert cnt.frame_count == 1

    @ember.compile(backend=cnt, fullgraph=True)
    def g(x):
        return x + 1
    assert_same(g(x), x + 1)
    assert cnt.frame_count == 2


def test_named_backends():
    x = ember.randn(4)
    f = ember.compile(lambda t: t.sin() + 1, backend="eager")
    assert_same(f(x), x.sin() + 1)
    with pytest.raises(ValueError, match="unknown backend"):
        ember.compile(lambda t: t, backend="nope")
    assert "eager" in dynamo.list_backends(None) and "inductor" in ember.compiler.list_backends()
    assert "eager" not in ember.compiler.list_backends()       # PyTorch hides its debug backends by default
    assert ember.compiler.list_backends(exclude_tags=()) == ["aot_eager", "eager", "inductor"]

    @dynamo.register_backend
    def my_backend(gm, example_inputs):
        return gm.forward
    try:
        assert "my_backend" in ember.compiler.list_backends()
        assert_same(ember.compile(lambda t: t * 3, backend="my_backend")(x), x * 3)
    finally:
        from ember.dynamo import backends
        del backends._REGISTRY["my_backend"], backends._TAGS["my_backend"]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_aot_backends_or_clear_error(backend):
    def f(x, y):
        return (x * y).relu().sum(1)
    x, y = ember.randn(3, 4), ember.randn(3, 4)
    try:
        cf = ember.compile(f, backend=backend)
    except NotImplementedError as e:
        assert backend in str(e)
        return
    out = cf(x, y)
    assert_same(out, f(x, y))


def test_module_compile_keeps_parameters_and_state_dict():
    m = nn.Linear(4, 3)
    cnt = CountingBackend()
    cm = ember.compile(m, backend=cnt)
    x = ember.randn(2, 4)
    assert_same(cm(x), m(x))
    assert cm.weight is m.weight
    assert set(cm.state_dict()) == {"_orig_mod.weight", "_orig_mod.bias"}
    # a parameter replaced after compiling is read at run time (guarded, recompiles if needed)
    with ember.no_grad():
        m.weight.mul_(2)
    assert_same(cm(x), m(x))
    assert cnt.frame_count == 1


def test_builtin_module_forward_is_compiled():
    cnt = CountingBackend()
    cm = ember.compile(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), backend=cnt)
    cm(ember.randn(2, 4))
    assert cnt.frame_count == 1


def test_recompile_on_shape_change_and_cache_hit():
    cnt = CountingBackend()
    f = ember.compile(lambda t: t * 2, backend=cnt)
    f(ember.randn(3))
    f(ember.randn(3))
    assert cnt.frame_count == 1
    f(ember.randn(5))
    assert cnt.frame_count == 2
    f(ember.randn(3))
    f(ember.randn(5))
    assert cnt.frame_count == 2
    f(ember.randn(5).double())
    assert cnt.frame_count == 3
    f(ember.randn(5, requires_grad=True))
    assert cnt.frame_count == 4


def test_recompile_on_constant_change_and_log(caplog):
    cnt = CountingBackend()

    def f(x, n):
        return x * n

    cf = ember.compile(f, backend=cnt)
    with caplog.at_level(logging.INFO, logger="ember.dynamo.recompiles"):
        for n in (1, 2, 2, 3):
            assert_same(cf(ember.ones(2), n), ember.ones(2) * n)
    # 1 specialised; 2 recompiles with n not specialised (automatic dynamic); 3 reuses that
    assert cnt.frame_count == 2
    assert any("guard failed" in r.getMessage() and "a1" in r.getMessage() for r in caplog.records)
    assert any("not specialised" in r.getMessage() for r in caplog.records)


def test_dynamic_int_start_of_arange_is_not_specialised():
    """A decode step's position (``arange(pos, pos + T)``) that changes between calls: after the
    first recompile the start stays a symbol (iota + start), through inductor and backward."""
    cnt = CountingBackend()
    calls = []

    def f(x, pos):
        return x * ember.arange(pos, pos + x.shape[0]).float(), ember.arange(pos, pos + 2 * x.shape[0], 2)

    cf = ember.compile(f)
    counting = ember.compile(f, backend=cnt)
    x = ember.randn(5, requires_grad=True)
    for pos in (3, 5, 7, 12, 5):        # (0 and 1 specialise, as torch's sizes do)
        got, want = cf(x, pos), f(x, pos)
        assert_same(got[0], want[0])
        assert_same(got[1], want[1])
        assert got[1].dtype == ember.int64
        got[0].sum().backward()
        calls.append(x.grad.clone())
        x.grad = None
        counting(x.detach(), pos)
        assert_same(calls[-1], ember.arange(pos, pos + 5).float())
    assert cnt.frame_count == 2


def test_recompile_limit_warns_once_then_eager():
    cnt = CountingBackend()
    cf = ember.compile(lambda x, n: x + len(n), backend=cnt)     # (a str is always specialised)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(12):
            assert_same(cf(ember.ones(2), "a" * n), ember.ones(2) + n)
    assert cnt.frame_count == dynamo.config.recompile_limit
    assert sum(issubclass(x.category, dynamo.RecompileLimitExceeded) for x in w) == 1


def test_global_guard():
    cnt = CountingBackend()
    g = {"scale": 2.0}
    src = "def f(x):\n    return x * scale\n"
    exec(src, g)
    cf = ember.compile(g["f"], backend=cnt)
    assert_same(cf(ember.ones(2)), ember.ones(2) * 2.0)
    g["scale"] = 3.0
    assert_same(cf(ember.ones(2)), ember.ones(2) * 3.0)
    assert cnt.frame_count == 2


def test_grad_mode_guard():
    cnt = CountingBackend()
    cf = ember.compile(lambda x: x * 2, backend=cnt)
    x = ember.randn(2, requires_grad=True)
    assert cf(x).requires_grad
    with ember.no_grad():
        assert not cf(x).requires_grad
    assert cnt.frame_count == 2


def test_fullgraph_error_names_reason():
    def f(x):
        print("side effect")
        return x + 1

    cf = ember.compile(f, backend="eager", fullgraph=True)
    with pytest.raises(dynamo.FullGraphError, match="print"):
        cf(ember.randn(2))


def test_unsupported_runs_eagerly_with_logged_reason(caplog):
    import threading
    lock = threading.Lock()

    def f(x):
        with lock:       # a context manager dynamo does not model (C __enter__/__exit__)
            return x * 2

    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    x = ember.randn(3)
    with caplog.at_level(logging.INFO, logger="ember.dynamo.graph_breaks"):
        assert_same(cf(x), f(x))
    assert cnt.frame_count == 0
    assert any("eagerly" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_disable():
    calls = []

    @ember.compiler.disable
    def helper(t):
        calls.append(1)
        return t + 1

    cnt = CountingBackend()
    cf = ember.compile(lambda x: helper(x) * 2, backend=cnt)
    x = ember.randn(2)
    assert_same(cf(x), (x + 1) * 2)
    assert calls == [1]


def test_reset_forgets_entries():
    cnt = CountingBackend()
    cf = ember.compile(lambda x: x - 1, backend=cnt)
    cf(ember.randn(2))
    ember.compiler.reset()
    cf(ember.randn(2))
    assert cnt.frame_count == 2


def test_nested_compiled_functions():
    cnt = CountingBackend()
    inner = ember.compile(lambda t: t * 3, backend=cnt)
    outer = ember.compile(lambda t: inner(t) + 1, backend=cnt)
    x = ember.randn(2)
    assert_same(outer(x), x * 3 + 1)
    assert cnt.frame_count == 1   # inner is inlined into outer's graph


def test_hook_uninstalled_after_call_and_on_error():
    from ember._C import _eval_frame
    cf = ember.compile(lambda x: x + 1, backend="eager")
    cf(ember.randn(2))
    assert not _eval_frame.is_installed()

    def bad(x):
        return x + ember.randn(3)

    cb = ember.compile(bad, backend="eager")
    with pytest.raises(Exception):
        cb(ember.randn(2))
    assert not _eval_frame.is_installed()


def test_backend_receives_example_inputs_and_graph_code():
    seen = {}

    def backend(gm, example_inputs):
        seen["code"] = gm.code
        seen["n"] = len(example_inputs)
        return gm.forward

    cf = ember.compile(lambda x, y: (x @ y).relu(), backend=backend)
    cf(ember.randn(2, 3), ember.randn(3, 2))
    assert seen["n"] == 2 and "relu" in seen["code"]


def test_logs_configure(capsys):
    from ember.dynamo import logs
    logs.configure("graph_code,guards")
    try:
        cf = ember.compile(lambda x: x.cos(), backend="eager")
        cf(ember.randn(2))
        err = capsys.readouterr().err
        assert "cos" in err and "Guards" in err
    finally:
        for name in ("graph_code", "guards"):
            lg = logs.get(name)
            lg.handlers = [h for h in lg.handlers if not getattr(h, "_ember", False)]
            lg.setLevel(logging.NOTSET)


def test_rng_not_advanced_by_tracing():
    cf = ember.compile(lambda x: x + ember.randn(3), backend="eager")
    ember.manual_seed(0)
    a = cf(ember.zeros(3))
    ember.manual_seed(0)
    b = ember.zeros(3) + ember.randn(3)
    assert_same(a, b)


def test_explain():
    def f(x):
        y = x.relu() + 1
        return y * 2

    out = dynamo.explain(f)(ember.randn(3))
    assert out.graph_count == 1 and out.graph_break_count == 0 and out.op_count == 3
    assert "Graph Count: 1" in str(out) and "tensor_match" not in str(out)

    def g(x):
        y = x + 1
        print("hi")
        return y

    out = dynamo.explain(g)(ember.randn(3))
    assert out.graph_count == 1 and out.graph_break_count == 1
    assert "print" in out.break_reasons[0][1] and 'print("hi")' in out.break_reasons[0][2]


def test_compiled_module_prints_like_torch():
    m = ember.nn.Linear(3, 2)
    assert repr(ember.compile(m)) == ("OptimizedModule(\n  (_orig_mod): Linear(in_features=3, out_features=2, "
                                      "bias=True)\n)")


def test_a_compiled_generator_function_runs_eagerly_like_torch():
    def gen(t):
        for i in range(3):
            yield t * i
    x = ember.randn(2)
    got = list(ember.compile(gen)(x))
    assert len(got) == 3
    for i, g in enumerate(got):
        assert_same(g, x * i)


def test_a_namedtuple_constructor_frame_is_not_traced():
    """collections builds a namedtuple's ``__new__`` with eval (file ``<string>``): reached by
    the frame hook from eager code, it was traced and always fell back (noise in explain())."""
    import collections
    from ember.dynamo.convert_frame import _skipped_file
    P = collections.namedtuple("P", "a b")
    assert _skipped_file(P.__new__.__code__)
    assert not _skipped_file(compile("lambda a: a", "<string>", "eval").co_consts[0])


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 1.0
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x) * self.scale


def test_attribute_writes_on_the_compiled_module_reach_the_original_like_torch():
    m = _Scaled()
    cm = ember.compile(m)
    x = ember.randn(2, 4)
    first = cm(x)
    cm.scale = 2.0                         # PyTorch's OptimizedModule forwards the write
    assert m.scale == 2.0 and "scale" not in cm.__dict__
    assert_same(cm(x), first * 2.0)
    cm.lin.weight = nn.Parameter(ember.randn(3, 4))
    assert_same(cm(x), m(x))
    cm.lin = nn.Linear(4, 3)              # a submodule replaced through the wrapper
    assert m.lin is cm.lin
    assert_same(cm(x), m(x))
    del cm.scale
    assert not hasattr(m, "scale")


def test_train_and_eval_on_the_compiled_module_switch_the_original():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    cm = ember.compile(m)
    cm.eval()
    assert not m.training and not m[1].training and not cm.training
    x = ember.randn(8, 4)
    assert_same(cm(x), m(x))              # eval: dropout is the identity, both ways
    cm.train()
    assert m.training and cm.training
    assert len(cm) == 2 and "forward" in dir(cm)


def test_finfo_and_iinfo_of_a_dtype_are_constants_of_the_graph():
    def f(x):
        return x.masked_fill(x > 0, ember.finfo(x.dtype).min) + ember.iinfo(ember.int8).max + ember.finfo().eps
    assert dynamo.explain(f)(ember.randn(4)).graph_break_count == 0
    cf = ember.compile(f)
    for dt in (ember.float32, ember.float64, ember.float16):       # the dtype is guarded
        x = ember.randn(6).to(dt)
        assert_same(cf(x), f(x))


def test_a_method_of_an_ember_object_is_not_baked_into_the_graph():
    """scaler.scale(x) in a compiled function: recorded as one graph node, it called the object
    the trace saw (its scale tensor a constant); a graph break now, so the live object is used."""
    scaler = ember.amp.GradScaler("cpu", init_scale=4.0)
    f = ember.compile(lambda x: scaler.scale(x) + 1)
    x = ember.randn(3)
    assert_same(f(x), x * 4.0 + 1)
    other = ember.amp.GradScaler("cpu", init_scale=16.0)
    scaler = other                                   # noqa: F841 - read through the closure
    assert_same(f(x), x * 16.0 + 1)


def test_explain_counts_a_break_in_a_module_forward_once():
    # the module call is entered through ember.compile's own wrapper frame, which breaks at the
    # same place; the report lists what the user wrote, once
    class Branchy(ember.nn.Module):
        def forward(self, x):
            y = x.relu()
            if y.sum() > 0:
                y = y * 2
            return y
    ex = dynamo.explain(Branchy())(ember.tensor([1.0, -2.0, 3.0]))
    assert ex.graph_break_count == 1, ex.break_reasons
    assert ex.break_reasons[0][0].startswith("forward (")
