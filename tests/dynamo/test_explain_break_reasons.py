"""``explain(fn)(...).break_reasons``: torch's GraphCompileReason fields (reason, user_stack,
graph_break) on ember's records, which still unpack as (where, reason, source_line)."""
import traceback

import ember
from ember.dynamo import reset


def _line(fn, text):
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_break_reason_fields_as_torch():
    reset()

    def f(x):
        y = x.sin()
        z = y.sum().item()
        return y.cos() + z
    out = ember._dynamo.explain(f)(ember.randn(4))
    assert out.graph_break_count == 1 and len(out.break_reasons) == 1
    r = out.break_reasons[0]
    assert "item()" in r.reason and r.graph_break is True
    stack = r.user_stack
    assert all(isinstance(s, traceback.FrameSummary) for s in stack)
    assert (stack[-1].filename, stack[-1].lineno, stack[-1].name) == (__file__, _line(f, "z = y.sum()"), "f")
    assert stack[-1].line == "z = y.sum().item()"
    where, reason, src = r                     # ember's tuple form
    assert reason == r.reason and src == "z = y.sum().item()" and where.startswith("f (")
    reset()
