"""In-place ops in a frame with a try block: allowed on the trace's own tensors.

A graph that covers code inside a try block re-runs the frame eagerly from its start if it
raises at run time, so that the handler sees the exception (``OutputGraph.compile``). That is
sound only if the graph changed nothing outside. So until session 51, any in-place op in such a
frame sent the whole frame to eager. That was the most frequent fallback in the bytecode
fuzzer's programs.

An in-place op on a tensor the trace made itself (``t = a.clamp(-1, 1); t.relu_()``) changes
nothing the re-run would see: the re-run makes ``t`` again. Writes whose memory is an input's
still refuse. That covers writes through any view of an input, ``out=`` into an input, and
``inplace=True``. Each case is checked here against eager, and so are the input tensors
afterwards.
"""
import pytest

import ember
from ember import dynamo

from ._util import run_and_capture


def _make(body, risky=True):
    # risky: the graph indexes with a tensor, which can raise when it runs (graph_raises.py);
    # a graph that cannot raise needs no re-run, and then writes into inputs are compiled too
    # (test_graph_raises_s52.py)
    last = "(ember.exp(t) + b)[b.argmax(0)]" if risky else "ember.exp(t) + b"
    src = f'''
def f(a, b):
    t = a.clamp(-1, 1)
    try:
        {body}
        u = {last}
    except ValueError:
        u = t
    return u, a, b
'''
    ns = {"ember": ember}
    exec(compile(src, f"<try-inplace {body}>", "exec"), ns)
    return ns["f"]


FRESH = ["t.relu_()", "t += b", "t[0] = 3.0", "t[0].mul_(2)", "ember.nn.functional.relu(t, inplace=True)",
         "t.clamp_(0, 0.5).add_(b)"]
ON_INPUTS = ["a.mul_(2)", "a[0].mul_(2)", "a.t().mul_(2)", "a.reshape(-1).add_(1)", "a.view(-1).add_(1)",
             "a.narrow(0, 0, 1).add_(1)", "a.diagonal().add_(1)", "a.unbind()[0].add_(1)",
             "a.split(1)[0].add_(1)", "a.T.add_(1)", "a.detach().add_(1)", "a.data.add_(1)", "a[1] = 0.0",
             "ember.add(b, 1, out=a)", "ember.nn.functional.relu(a, inplace=True)",
             "a.as_strided((2,), (1,)).add_(1)", "a.permute(1, 0).add_(1)", "a.unsqueeze(0).add_(1)",
             "a.flatten().add_(1)", "a.contiguous().add_(1)", "[a, b][0].add_(1)", "b.add_(1)", "a.copy_(b)",
             "a.zero_()"]


def _run(body, risky=True):
    f = _make(body, risky)
    dynamo.reset()
    a, b = ember.randn(3, 3), ember.randn(3, 3)
    a2, b2 = a.clone(), b.clone()
    got = ember.compile(f, backend="eager")(a, b)
    want = f(a2, b2)
    for g, w in zip(got, want):
        assert ember.allclose(g, w)
    assert ember.equal(a, a2) and ember.equal(b, b2)
    return [r for _, r in dynamo.fallback_reasons if "try block" in r]


@pytest.mark.parametrize("body", FRESH)
def test_inplace_on_the_traces_own_tensors_is_compiled(body):
    assert _run(body) == []
    assert dynamo.counters["eager_fallback"] == 0


@pytest.mark.parametrize("body", ON_INPUTS)
def test_inplace_on_an_input_still_runs_the_frame_eagerly(body):
    assert _run(body), "a write into an input's memory was compiled inside a try block"


@pytest.mark.parametrize("body", ON_INPUTS)
def test_inplace_on_an_input_is_compiled_when_the_graph_cannot_raise(body):
    assert _run(body, risky=False) == []
    assert dynamo.counters["eager_fallback"] == 0


def _index(a, idx):
    t = a.clamp(-1, 1)
    t.relu_()
    t += 1
    try:
        u = t[idx] * 2
    except IndexError:
        u = t * 0 - 1
    return u


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_graph_that_raises_at_run_time_reruns_for_the_handler(backend):
    dynamo.reset()
    cf = ember.compile(_index, backend=backend)
    a = ember.randn(3)
    for idx in ([0, 2], [0, 5], [1, 1]):          # [0, 5] raises IndexError when the graph runs
        i = ember.tensor(idx)
        assert ember.allclose(cf(a, i), _index(a, i))
    assert dynamo.counters["eager_fallback"] == 0 and dynamo.counters["graph_breaks"] == 0


def _prints(a):
    t = a * 2
    t.add_(1)
    print("replayed", t.dim())
    return t.relu_()


def test_replayed_prints_with_inplace_on_own_tensors_need_no_break(capsys):
    want, got, out_eager, out_compiled = run_and_capture(_prints, (ember.randn(4),), capsys)
    assert ember.equal(got, want) and out_compiled == out_eager == "replayed 1\n"
    assert dynamo.counters["graph_breaks"] == 0
