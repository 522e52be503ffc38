"""``ember.dynamo.explain(fn)(*args)``: what capture did with a call.

It compiles ``fn`` with a recording backend, runs it once on ``args`` and
returns an :class:`ExplainOutput` (also printable): graphs, ops per graph,
frames that ran eagerly with the reason and the user's file:line and source
line, guards and compile times."""
from __future__ import annotations

import linecache
import re

from .convert_frame import Compiler, fallback_reasons
from .eval_frame import OptimizeContext


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


def _wrapper_frame():
    import os
    from . import eval_frame
    return f"{eval_frame._call_module.__code__.co_name} ({os.path.abspath(eval_frame.__file__)}:"


_WRAPPER_FRAME = _wrapper_frame()


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
        for where, reason in fallback_reasons[start:]:
            if where.startswith(_WRAPPER_FRAME):
                # ember.compile(module)'s own call frame: the module's forward, entered next as a
                # frame of its own, reports the same break again (once is what the user wrote)
                continue
            src = ""
            m = re.search(r"\(at (.*):(\d+) in ", reason)
            if m:
                src = linecache.getline(m.group(1), int(m.group(2))).strip()
            breaks.append((where, reason.split("\n")[0], src))
        out = ExplainOutput(graphs, compiler.graphs, breaks, result)
        return out
    return run
