"""``ember.dynamo.explain(fn)(*args)``: what capture did with a call.

It compiles ``fn`` with a recording backend, runs it once on ``args`` and
returns an :class:`ExplainOutput` (also printable): graphs, ops per graph,
frames that ran eagerly with the reason and the user's file:line and source
line, guards and compile times."""
from __future__ import annotations

import linecache
import re
import traceback
from typing import List, NamedTuple

from .convert_frame import Compiler, fallback_reasons
from .eval_frame import OptimizeContext


class GraphCompileReason(NamedTuple):
    """One frame (or part of one) that ran eagerly, and why: torch's ``GraphCompileReason``
    fields (``reason``, ``user_stack``, ``graph_break``) on ember's record, which is also the
    tuple ``(where, reason, source_line)`` it always was (``for where, reason, src in ...``)."""
    where: str            # the frame: "f (file.py:12)"
    reason: str           # first line of the reason, ending "(at file.py:14 in f)" when known
    source_line: str      # the user's source line at the break ("" when unknown)

    @property
    def user_stack(self) -> List[traceback.FrameSummary]:
        """The user's frames at the break, innermost last (torch's ``user_stack``)."""
        out = []
        for at in _AT.findall(self.reason):
            m = re.match(r"(.*):(\d+) in (.*)$", at)
            if m:
                out.append(traceback.FrameSummary(m.group(1), int(m.group(2)), m.group(3)))
        return out

    @property
    def graph_break(self) -> bool:
        return True


class ExplainOutput:
    def __init__(self, graphs, infos, breaks, result):
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.infos = infos
        self.break_reasons = breaks
        self.graph_break_count = len(breaks)
        self.ops_per_graph = [[n for n in g.graph.nodes if n.op in ("call_function", "call_method")]
                              for g in graphs]
        self.op_count = sum(len(o) for o in self.ops_per_graph)
        self.guards = [i.get("guards", "") for i in infos]
        self.compile_times = [i.get("compile_time", 0.0) for i in infos]
        self.result = result

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"Graph {i}: {len(ops)} ops, compiled in {self.compile_times[i] * 1e3:.1f} ms")
            lines.append(f"  Ops: {', '.join(_op_name(n) for n in ops)}")
            lines.append("  Guards:")
            lines.extend("    " + g for g in self.guards[i].splitlines())
        if self.break_reasons:
            lines.append("Break Reasons (frames run eagerly):")
            for where, reason, src in self.break_reasons:
                lines.append(f"  {where}: {reason}")
                if src:
                    lines.append(f"    {src}")
        return "\n".join(lines)

    __repr__ = __str__


_AT = re.compile(r"\(at ([^()]*:\d+ in [^()]*)\)")


def _duplicate_of_inner(where, reason, later):
    """A break recorded for one of ember's own frames (ember.compile's module-call wrapper,
    ``Module._call_impl``) that the frame it called, entered next as a frame of its own, reports
    again at the same place (one of the ``later`` records): listed once, by the inner frame."""
    import os
    from .convert_frame import _EMBER_DIR
    m = re.search(r"\((.*):\d+\)$", where)
    if not m or not os.path.abspath(m.group(1)).startswith(_EMBER_DIR):
        return False
    at = _AT.findall(reason)
    if not at:
        return False
    return any(w != where and at[-1] in _AT.findall(r) for w, r in later)


def _op_name(n):
    t = n.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def explain(fn):
    def run(*args, **kwargs):
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        compiler = Compiler(backend, name="explain")
        start = len(fallback_reasons)
        result = OptimizeContext(compiler)(fn)(*args, **kwargs)
        breaks = []
        records = fallback_reasons[start:]
        for i, (where, reason) in enumerate(records):
            if _duplicate_of_inner(where, reason, records[i + 1:]):
                continue
            src = ""
            m = re.search(r"\(at (.*):(\d+) in ", reason)
            if m:
                src = linecache.getline(m.group(1), int(m.group(2))).strip()
            breaks.append(GraphCompileReason(where, reason.split("\n")[0], src))
        out = ExplainOutput(graphs, compiler.graphs, breaks, result)
        return out
    return run
