"""Graph breaks inside loops, ``with`` blocks, ``try`` blocks and frames with closure cells.

Each program is compiled with a counting backend and run on fresh random inputs; results,
printed output (the side effect that breaks the graph, in order) and the grad mode after the
call are identical to eager, and the graph / graph-break / eager-fallback / recompile counts
are the ones the design gives (ember/dynamo/__init__.py, "Graph breaks"):

* a break in a loop body resumes mid-loop in a resume function that is itself captured (one
  resume code object per break site: its entries are shared by all iterations whose guards
  hold). torch.compile instead skips the whole frame ("graph break in a for/while loop").
* a break in a grad-mode block re-enters the block in the resume function (its exit restores
  the mode at the same place as eagerly), like torch.compile.
* a break in a ``try`` block runs its call in a trampoline under the frame's handler (an
  exception there is handled as eagerly, the rest of that frame then running eagerly); a
  graph over try-block code that raises at run time re-runs the frame eagerly; a frame whose
  graph would mutate in place inside a try runs eagerly (logged). torch.compile skips frames
  with a break in a try block.
* frames with cells pass them to the resume function as its closure (writing a shared cell
  after the break runs that resume function eagerly, logged).
* an ``.item()`` float reaching the resume function is a graph input, not a constant."""
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, assert_same, clone_tree


@pytest.fixture(autouse=True)
def _print_breaks(monkeypatch):
    """print() is this file's graph-break device: keep it a break (by default a print of constants
    is replayed after the graph, tests/dynamo/test_logging_calls.py)."""
    monkeypatch.setattr(ember.dynamo.config, "replay_logging_calls", False)


def run(fn, make_inputs, capsys, calls=3):
    """Compile ``fn``; each call on fresh inputs matches eager (value, printed output, inputs
    after the call, grad mode after the call). Returns (backend, counters, fallback reasons)."""
    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(fn, backend=cnt)
    for i in range(calls):
        args = make_inputs()
        a_e, a_c = clone_tree(args), clone_tree(args)
        capsys.readouterr()
        grad_before = ember.is_grad_enabled()
        ember.manual_seed(1234 + i)
        expected = fn(*a_e)
        out_e = capsys.readouterr().out
        grad_e = ember.is_grad_enabled()
        ember.set_grad_enabled(grad_before)
        ember.manual_seed(1234 + i)
        got = cf(*a_c)
        out_c = capsys.readouterr().out
        grad_c = ember.is_grad_enabled()
        ember.set_grad_enabled(grad_before)
        assert_same(expected, got)
        assert_same(a_e, a_c, "inputs after the call")
        assert out_c == out_e, (out_c, out_e)
        assert grad_c == grad_e
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons
    return cnt, dict(dynamo.counters), list(dynamo.fallback_reasons)


def expect(res, graphs, breaks, fallbacks=0, recompiles=None):
    cnt, counters, reasons = res
    assert cnt.frame_count == graphs, (cnt.frame_count, reasons)
    assert counters["graph_breaks"] == breaks, (counters, reasons)
    assert counters["eager_fallback"] == fallbacks, (counters, reasons)
    if recompiles is not None:
        assert counters["recompiles"] == recompiles, (counters, reasons)


def x3():
    return (ember.randn(3, 4),)


def x3g():
    return (ember.randn(3, 4, requires_grad=True),)


# ---------------------------------------------------------------------------------- loops
def loop_mid(x):
    for i in range(5):
        x = x * 2
        if i == 2:
            print("middle", i)
        x = x + 1
    return x


def test_loop_break_in_middle_iteration(capsys):
    # graph 1: iterations 0-1 and the start of 2; the resume function: the rest of 2, 3 and 4
    expect(run(loop_mid, x3, capsys), graphs=2, breaks=1, recompiles=0)


def loop_every(x):
    for _ in range(4):
        x = x + 1
        print("step")
    return x.sin()


def test_loop_break_every_iteration_reuses_resume_entry(capsys):
    # the resume function's entry for "one more item left" serves iterations 1, 2 and 3; the
    # last call (iterator exhausted) is a second entry with the sin()
    expect(run(loop_every, x3, capsys), graphs=3, breaks=2, recompiles=1)


def loop_uses_index(x):
    for i in range(3):
        x = x * (i + 1)
        print("i =", i)
    return x


def test_loop_break_every_iteration_using_index(capsys):
    # the printed index is guarded per iteration: one resume entry per iteration
    expect(run(loop_uses_index, x3, capsys), graphs=3, breaks=3, recompiles=2)


def loop_over_tensors(xs):
    acc = xs[0] * 0
    for t in xs:
        acc = acc + t.exp()
        if acc.shape[0] == 3:
            print("acc")
        acc = acc * 0.5
    return acc


def test_loop_over_list_of_tensors(capsys):
    # the second and third iterations share one resume entry (same tensor metadata)
    expect(run(loop_over_tensors, lambda: ([ember.randn(3, 2) for _ in range(3)],), capsys),
           graphs=3, breaks=2, recompiles=1)


def nested_loops(x):
    for i in range(3):
        for j in range(2):
            x = x + j
            if i == 1 and j == 0:
                print("inner", i, j)
        x = x * 2
    return x


def test_nested_loops(capsys):
    # both iterators are on the stack at the break: the resume function gets both
    expect(run(nested_loops, x3, capsys), graphs=2, breaks=1, recompiles=0)


def while_loop(x):
    i = 0
    while i < 4:
        x = x * 2
        if i == 1:
            print("while", i)
        i += 1
    return x - 1


def test_while_loop(capsys):
    expect(run(while_loop, x3, capsys), graphs=2, breaks=1, recompiles=0)


def break_continue_after(x):
    for i in range(6):
        x = x + 1
        if i == 1:
            print("break point")
        if i == 0:
            continue
        if i == 3:
            break
        x = x * 2
    else:
        x = x - 100
    return x


def test_break_and_continue_after_the_break_point(capsys):
    expect(run(break_continue_after, x3, capsys), graphs=2, breaks=1)


def data_dependent_in_loop(x):
    for _ in range(3):
        if x.sum() > 0:
            x = x - 1
        else:
            x = x + 1
    return x


def test_data_dependent_branch_in_loop(capsys):
    res = run(data_dependent_in_loop, lambda: (ember.randn(3, 4) + 0.3,), capsys, calls=4)
    cnt, counters, reasons = res
    assert counters["eager_fallback"] == 0 and counters["graph_breaks"] >= 1, reasons


def enumerate_zip_loop(xs, ys):
    out = []
    for k, (a, b) in enumerate(zip(xs, ys)):
        out.append(a * b + k)
        if k == 1:
            print("pair", k)
    return out


def test_enumerate_zip_loop(capsys):
    expect(run(enumerate_zip_loop, lambda: ([ember.randn(2) for _ in range(3)],
                                            [ember.randn(2) for _ in range(3)]), capsys),
           graphs=2, breaks=1)


def item_in_loop(x):
    total = 0.0
    for i in range(3):
        total = total + (x * i).sum().item()
    return x * total


def test_item_in_loop(capsys):
    cnt, counters, reasons = run(item_in_loop, x3, capsys)
    assert counters["eager_fallback"] == 0, reasons


def comprehension_with_print(xs):
    ys = [print("elem") or t * 2 for t in xs]
    return ys[0] + ys[-1]


def test_comprehension_body_break(capsys):
    # 3.11: the comprehension is a function call, run by CPython at the break; 3.12+: it is
    # inlined and the break resumes inside it. Either way: identical results and output.
    cnt, counters, reasons = run(comprehension_with_print, lambda: ([ember.randn(2) for _ in range(3)],),
                                 capsys)
    assert cnt.frame_count >= 1


def dictcomp_with_print(xs):
    d = {k: print("key", k) or t.cos() for k, t in enumerate(xs)}
    return d[0] * d[len(xs) - 1]


def test_dict_comprehension_body_break(capsys):
    run(dictcomp_with_print, lambda: ([ember.randn(2) for _ in range(3)],), capsys)


def genexp_with_print(xs):
    return sum(print("g") or t for t in xs)


def test_generator_body_break(capsys):
    run(genexp_with_print, lambda: ([ember.randn(2) for _ in range(3)],), capsys)


# ---------------------------------------------------------------------------------- with blocks
def no_grad_break(x):
    y = x * 2
    with ember.no_grad():
        z = y * 3
        print("inside no_grad")
        w = z + y
    return y + 1, z, w, w.requires_grad, z.requires_grad


def test_no_grad_block(capsys):
    res = run(no_grad_break, x3g, capsys)
    expect(res, graphs=2, breaks=1, recompiles=0)


def enable_inside_no_grad(x):
    with ember.no_grad():
        a = x * 2
        with ember.enable_grad():
            b = x * 3
            print("enable_grad inside no_grad")
            c = b + x
        d = c * 2
    e = d + x
    return a, b, c, d, e


def test_nested_grad_blocks(capsys):
    expect(run(enable_inside_no_grad, x3g, capsys), graphs=2, breaks=1)


def set_grad_enabled_block(x):
    with ember.set_grad_enabled(False):
        a = x * 2
        print("set_grad_enabled(False)")
        b = a + x
    return a, b, x * 4


def test_set_grad_enabled_block(capsys):
    expect(run(set_grad_enabled_block, x3g, capsys), graphs=2, breaks=1)


def set_grad_enabled_call(x):
    ember.set_grad_enabled(False)
    a = x * 2
    print("grad off")
    b = a + x
    ember.set_grad_enabled(True)
    return a, b, b * x


def test_set_grad_enabled_as_call(capsys):
    expect(run(set_grad_enabled_call, x3g, capsys), graphs=2, breaks=1)


def no_grad_in_loop(x):
    for i in range(3):
        with ember.no_grad():
            x = x + 1
            if i == 1:
                print("loop no_grad")
        x = x * 2
    return x


def test_no_grad_block_in_loop(capsys):
    expect(run(no_grad_in_loop, x3g, capsys), graphs=2, breaks=1)


def _raises(t):
    raise ValueError("from the break")


def raise_in_no_grad(x):
    with ember.no_grad():
        y = x * 2
        _raises(y)
    return y


def test_exception_at_break_inside_no_grad_restores_grad_mode():
    dynamo.reset()
    cf = ember.compile(raise_in_no_grad, backend=CountingBackend())
    for _ in range(2):
        with pytest.raises(ValueError, match="from the break"):
            cf(ember.randn(3, requires_grad=True))
        assert ember.is_grad_enabled()


def no_grad_break_under_outer_no_grad(x):
    with ember.no_grad():
        y = x * 2
        print("inside")
    return y, ember.is_grad_enabled()


def test_no_grad_entered_with_grad_off(capsys):
    with ember.no_grad():
        expect(run(no_grad_break_under_outer_no_grad, x3g, capsys), graphs=1, breaks=1)


# ---------------------------------------------------------------------------------- closures
def closure_read_after_break(x):
    y = x + 1

    def inner():
        return y * 2
    print("closure")
    return inner() + x


def test_inner_function_defined_before_break(capsys):
    expect(run(closure_read_after_break, x3, capsys), graphs=2, breaks=1, recompiles=0)


def closure_written_before_break(x):
    y = x + 1

    def inner():
        return y * 2
    y = y * 3
    print("closure")
    return inner() + x, y


def test_cell_written_before_break(capsys):
    expect(run(closure_written_before_break, x3, capsys), graphs=2, breaks=1, recompiles=0)


def closure_defined_after_break(x):
    y = x.exp()
    print("before inner")

    def inner(t):
        return t * y
    return inner(x)


def test_inner_function_defined_after_break(capsys):
    expect(run(closure_defined_after_break, x3, capsys), graphs=2, breaks=1)


def closure_written_after_break(x):
    y = x + 1

    def inner():
        return y * 2
    _breaks_here()
    y = y * 3
    return inner()


def _breaks_here():
    _counter[0] += 1
    print("called")


def test_cell_written_after_break_is_compiled(capsys):
    # the resumed code writes a cell it shares with an inner function: the write is replayed
    # into the cell after the resume function's graph (``nonlocal`` writes, session 45), so
    # both sides compile (the resume function ran eagerly before)
    expect(run(closure_written_after_break, x3, capsys), graphs=2, breaks=1)


_counter = [0]


def _returns_new_int():
    _counter[0] += 1
    print("called")
    return _counter[0]


def discarded_result(x):
    y = x * 2
    _returns_new_int()
    return y + 1


def test_discarded_break_result_is_not_guarded(capsys):
    # the call's result (a new int each call) is passed to the resume function and dropped
    # there: no guard on it, so no recompile
    expect(run(discarded_result, x3, capsys, calls=3), graphs=2, breaks=1, recompiles=0)


def make_outer(scale):
    w = ember.randn(4)

    def fn(x):
        y = x * scale + w
        print("free variables")
        return y - w
    return fn


def test_frame_with_free_variables(capsys):
    fn = make_outer(2.5)
    expect(run(fn, x3, capsys), graphs=2, breaks=1, recompiles=0)


def closure_in_loop(x):
    acc = [x]

    def add(t):
        acc.append(acc[-1] + t)
    for i in range(3):
        add(x * i)
        if i == 1:
            print("loop with closure")
    return acc[-1]


def test_closure_in_loop(capsys):
    expect(run(closure_in_loop, x3, capsys), graphs=2, breaks=1)


def recursive_inner(x):
    def power(t, n):
        return t if n == 0 else power(t, n - 1) * t
    print("recursive")
    return power(x, 3)


def test_self_referencing_inner_function(capsys):
    # the cell holding ``power`` is rebuilt (a cycle: the function's closure holds that cell).
    # Known limitation: the inlined ``power`` reads itself through its own closure, which is
    # guarded by identity, so the resume function recompiles each call (still captured)
    cnt, counters, reasons = run(recursive_inner, x3, capsys)
    assert counters["eager_fallback"] == 0 and counters["graph_breaks"] == 1, reasons
    assert cnt.frame_count >= 1


# ---------------------------------------------------------------------------------- .item()
def item_value(x):
    s = x.sum().item()
    return x * s + s


def test_item_value_is_a_graph_input(capsys):
    # a new value each call, no recompile: the float is a 0-d input of the resume graph
    expect(run(item_value, x3, capsys, calls=4), graphs=2, breaks=1, recompiles=0)


def item_branch(x):
    s = x.sum().item()
    if s > 0:
        return x * s
    return x - s


def _signs(*signs):
    """Inputs whose sums have the given signs, one call each."""
    it = iter(signs)
    return lambda: ((ember.rand(3, 4) + 0.1) * next(it),)


def test_item_branch_guards_the_outcome(capsys):
    # the branch on the .item() value guards ``s > 0``, not the value: a new value on the same
    # side reuses the resume graph, the other side compiles it once more
    cnt, counters, reasons = run(item_branch, _signs(1, 1, -1, -1, 1), capsys, calls=5)
    assert counters["recompiles"] == 1 and counters["eager_fallback"] == 0, (counters, reasons)


def running_total(x, total):
    loss = (x * x).mean()
    total += loss.item()
    return x * total, total * 2


def test_item_accumulated_in_python_float(capsys):
    # ``total += loss.item()``: float arithmetic on the unspecialized value stays unspecialized
    # (an expression over the resume function's arguments), so new values do not recompile
    # (the frame's own float argument is specialised as usual: the same one every call here)
    expect(run(running_total, lambda: (ember.randn(3), 0.25), capsys, calls=4),
           graphs=2, breaks=1, recompiles=0)


def item_float64(x):
    s = x.max().item()
    return x.double() / s, x * s


def test_item_with_two_dtypes(capsys):
    expect(run(item_float64, x3, capsys, calls=3), graphs=2, breaks=1, recompiles=0)


# ---------------------------------------------------------------------------------- try blocks
def _maybe_raise(t, fail):
    print("call", fail)
    if fail:
        raise ValueError("raised at the break")
    return t + 1


def only_raiser_eager(reasons):
    """The only frame run eagerly is ``_maybe_raise``'s resume function, which reaches ``raise``."""
    eager = [(w, r) for w, r in reasons if not r.startswith("graph break")]
    assert all("_maybe_raise" in w and "raise statement" in r for w, r in eager), eager
    return True


def try_finally_order(x):
    try:
        y = x * 2
        print("in try")
        y = y + 1
    finally:
        print("finally")
        x = x - 3
    print("after")
    return y * x


def test_try_finally_side_effect_order(capsys):
    # three prints, each a break: the one in the try body runs in a trampoline under the
    # finally handler; the finally body and the rest are resume functions
    expect(run(try_finally_order, x3, capsys), graphs=4, breaks=3)


def try_except_at_break(x, fail):
    try:
        y = x * 2
        y = _maybe_raise(y, fail)
        y = y * 3
    except ValueError as e:
        print("handled", e)
        y = x - 100
    return y.exp()


@pytest.mark.parametrize("fail", [False, True])
def test_try_except_exception_raised_by_the_breaking_call(capsys, fail):
    # the call raising runs the except clause (in the trampoline, eagerly to the end of the frame)
    cnt, counters, reasons = run(try_except_at_break, lambda: (ember.randn(3, 4), fail), capsys)
    assert only_raiser_eager(reasons)


def try_finally_raises(x):
    try:
        y = x * 2
        _maybe_raise(y, True)
    finally:
        print("finally runs once")
    return y


def test_try_finally_exception_propagates(capsys):
    dynamo.reset()
    cf = ember.compile(try_finally_raises, backend=CountingBackend())
    for _ in range(2):
        capsys.readouterr()
        with pytest.raises(ValueError, match="raised at the break"):
            try_finally_raises(ember.randn(3))
        eager_out = capsys.readouterr().out
        with pytest.raises(ValueError, match="raised at the break"):
            cf(ember.randn(3))
        assert capsys.readouterr().out == eager_out == "call True\nfinally runs once\n"


def graph_raises_in_try(x, idx):
    try:
        y = x[idx] * 2
    except IndexError:
        print("index error handled")
        y = x.sum().reshape(1) - 1
    return y + ember.randn(1)


def test_graph_raising_inside_try_reruns_frame_eagerly(capsys):
    # the graph indexes with a tensor: out of range only at run time; the compiled code re-runs
    # the frame eagerly (same RNG state) so the except clause sees the IndexError
    state = {"n": 0}

    def make():
        state["n"] += 1
        return ember.randn(4), ember.tensor([1, 9 if state["n"] % 2 == 0 else 2])
    expect(run(graph_raises_in_try, make, capsys, calls=4), graphs=1, breaks=0, recompiles=0)


def inplace_in_try(x):
    try:
        x.add_(1)
        y = x[x.argmax(0)] * 2      # a tensor index: the graph can raise (graph_raises.py)
    except RuntimeError:
        y = x
    return y


def test_inplace_op_in_try_runs_frame_eagerly(capsys):
    # a graph that mutated its input and can raise cannot be re-run: the frame runs eagerly,
    # with a reason (one that cannot raise needs no re-run: test_graph_raises_s52.py)
    cnt, counters, reasons = run(inplace_in_try, x3, capsys)
    assert cnt.frame_count == 0 and counters["eager_fallback"] >= 1
    assert any("in-place op" in r for _, r in reasons), reasons


def try_in_loop(x):
    for i in range(4):
        try:
            x = x + 1
            if i == 2:
                print("try in loop", i)
        finally:
            x = x * 2
    return x


def test_try_in_loop(capsys):
    expect(run(try_in_loop, x3, capsys), graphs=2, breaks=1)


def try_in_no_grad(x, fail):
    with ember.no_grad():
        try:
            y = x * 2
            y = _maybe_raise(y, fail)
        except ValueError:
            y = x * 5
        z = y + x
    return y, z, z.requires_grad


@pytest.mark.parametrize("fail", [False, True])
def test_try_inside_no_grad(capsys, fail):
    cnt, counters, reasons = run(try_in_no_grad, lambda: (ember.randn(3, requires_grad=True), fail), capsys)
    assert only_raiser_eager(reasons)


def no_grad_in_try(x, fail):
    try:
        with ember.no_grad():
            y = x * 2
            y = _maybe_raise(y, fail)
    except ValueError:
        y = x * 7
    return y, y.requires_grad, ember.is_grad_enabled()


@pytest.mark.parametrize("fail", [False, True])
def test_no_grad_inside_try(capsys, fail):
    cnt, counters, reasons = run(no_grad_in_try, lambda: (ember.randn(3, requires_grad=True), fail), capsys)
    assert only_raiser_eager(reasons)


class _Acc:
    def __init__(self):
        self.k = 3

    def meth(self, a, b):
        return a * self.k + b


def _boom(t, flag):
    print("boom", flag)
    if flag:
        raise KeyError("k")
    return t


def except_continue_finally_in_loop(x, fail_at):
    # a bound method and its first argument wait on the stack while the break call runs; the
    # except clause continues the loop (the handler runs in the trampoline with the loop's
    # iterator at the depth the exception table says) and the finally runs every iteration
    o = _Acc()
    total = x
    for i in range(3):
        try:
            total = o.meth(total, _boom(total, i == fail_at))
        except KeyError:
            total = total - 1
            continue
        finally:
            total = total * 1.5
    return total


@pytest.mark.parametrize("fail_at", [-1, 1])
def test_except_continue_finally_in_loop(capsys, fail_at):
    cnt, counters, reasons = run(except_continue_finally_in_loop, lambda: (ember.randn(3), fail_at), capsys)
    eager = [(w, r) for w, r in reasons if not r.startswith("graph break")]
    assert all("_boom" in w for w, _ in eager), eager


def nested_call_args_in_loop(x):
    out = []
    with ember.no_grad():
        for i in range(3):
            try:
                out.append(_Acc().meth(x, _boom(x * i, False)))
            except KeyError:
                out.append(x)
    return out


def test_pending_calls_on_the_stack_in_loop_try_and_with(capsys):
    cnt, counters, reasons = run(nested_call_args_in_loop, lambda: (ember.randn(3, requires_grad=True),), capsys)
    assert counters["eager_fallback"] == 0, reasons


def nested_try_finally(x, fail):
    try:
        try:
            y = x + 1
            _boom(y, fail)
        finally:
            print("inner finally")
            y = y * 2
    except KeyError:
        y = y - 7
    return y


@pytest.mark.parametrize("fail", [False, True])
def test_nested_try_finally(capsys, fail):
    run(nested_try_finally, lambda: (ember.randn(3), fail), capsys)


class _Base(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class _Child(_Base):
    def forward(self, x):
        y = x * 2
        print("child")
        return super().forward(y) + 1


def test_zero_argument_super_after_break(capsys):
    # the resume function keeps ``self`` as its first argument and ``__class__`` as a free variable
    m = _Child()
    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(m, backend=cnt)
    for _ in range(2):
        x = ember.randn(2, 4)
        assert_same(m(x), cf(x))
    assert cnt.frame_count == 2 and dynamo.counters["graph_breaks"] == 1
    assert not any("super" in r for _, r in dynamo.fallback_reasons), dynamo.fallback_reasons


def item_count(x):
    n = (x > 0).sum().item()
    return x / (n + 1), x * n


def test_int_item_in_float_arithmetic(capsys):
    # an int .item() in arithmetic with a floating tensor is a graph input too (``n + 1`` on it
    # specialises: int results are not kept symbolic) -- one recompile per distinct count at most
    cnt, counters, reasons = run(item_count, lambda: (ember.randn(6),), capsys, calls=4)
    assert counters["eager_fallback"] == 0, reasons


def item_int_index(x):
    k = x.argmax().item()
    return x[k] * 2, x * k


def test_int_item_used_as_index(capsys):
    # used as an index the int is read by value (guarded): correct for every value
    cnt, counters, reasons = run(item_int_index, lambda: (ember.randn(6),), capsys, calls=4)
    assert counters["eager_fallback"] == 0, reasons


def item_int_scale(x):
    n = (x > 0).sum().item()
    return x * n - n


def test_int_item_is_a_graph_input(capsys):
    counts = iter([1, 2, 3, 4, 5])

    def make():
        k = next(counts)
        return (ember.cat([ember.rand(k) + 0.1, -ember.rand(6 - k) - 0.1]),)
    expect(run(item_int_scale, make, capsys, calls=4), graphs=2, breaks=1, recompiles=0)
