"""``ember.export.draft_export``: an exported program even where ``export`` refuses, plus a report.

``export`` captures with dynamo on fake tensors, so code whose control flow or shapes depend on
tensor *values* (``if x.sum().item() > 0``, ``x[x > 0]``) cannot be captured as one graph.
``draft_export`` first tries ``export``; when that fails on such code it traces the module again
with real values (``make_fx`` in real mode on copies of the state and the example inputs):
Python decisions follow the values observed, i.e. the program is *specialized* to them. To stay
sound, every value read from a tensor during that trace (``.item()``, ``bool(t)``, ``float(t)``,
``.tolist()``) gets a runtime assert in the graph: a call whose tensor holds another value raises
``RuntimeError("Runtime assertion failed ...")`` instead of silently taking the recorded branch.
(Torch asserts the branch condition only; ember, without symbolic scalars here, asserts the value,
which is stricter.)

A ``Dim`` whose range the program narrows or specializes (``ConstraintViolationError``) is
handled as torch's draft mode does: the failure is recorded and the export retried with those
dims as ``Dim.AUTO`` (the program keeps what the code allows).

The result carries ``ep._report`` (:class:`DraftExportReport`): the failures, each with its kind
(``FailureType``), what could not be decided, and the user's source location."""
from __future__ import annotations

import enum
import os
import sys
from typing import Any, Dict, List, Optional

__all__ = ["draft_export", "DraftExportReport", "FailureReport", "FailureType"]


class FailureType(enum.IntEnum):
    MISMATCHED_FAKE_KERNEL = 1
    DATA_DEPENDENT_ERROR = 2
    GUARD_ADDED = 3
    CONSTRAINT_VIOLATION_ERROR = 4

    def __str__(self):
        return self.name


class FailureReport:
    """One issue met while exporting: ``failure_type`` and ``data`` (what, where, how often)."""

    def __init__(self, failure_type: FailureType, data: Dict[str, Any], xfail: bool = False):
        self.failure_type = failure_type
        self.data = data
        self.xfail = xfail

    def __repr__(self):
        return f"FailureReport(failure_type={self.failure_type}, xfail={self.xfail}, data={self.data})"

    def print(self, str_to_filename: Optional[Dict[str, str]] = None) -> str:
        d = self.data
        if self.failure_type == FailureType.DATA_DEPENDENT_ERROR:
            lines = ["Data dependent error.",
                     f"    When exporting, we were unable to evaluate the value of `{d['expr']}`.",
                     f"    This was encountered {d['occurrences']} times.",
                     "    This occurred at the following user stacktrace: "]
            lines += [f"        {s}" for s in d["user_stack"]]
            lines.append("")
            if d.get("specialized"):
                lines.append("    As a result, the values read from tensors were specialized to the ones observed "
                             "during export, and asserts were inserted into the graph:")
                lines += [f"        {w}: {v!r}" for w, v in d["specialized"]]
            lines.append("")
            lines.append("    Please rewrite the data-dependent code (ember.cond, or arithmetic on tensors instead of "
                         "Python values) to export it soundly.")
            return "\n".join(lines)
        if self.failure_type == FailureType.CONSTRAINT_VIOLATION_ERROR:
            return ("Constraint violation error.\n    The specified input dynamic_shapes spec was found to be "
                    "incorrect during tracing.\n    Specifically, this guard was added: " + d["message"] +
                    "\n    The dims involved were exported as Dim.AUTO instead (specialized or narrowed as "
                    "the code requires).")
        return f"{self.failure_type.name}: {d}"


class DraftExportReport:
    """``ep._report``: the failures draft_export met (none: the export was sound)."""

    def __init__(self, failures: List[FailureReport], str_to_filename=None, expressions_created=None,
                 op_profiles=None):
        self.failures = failures
        self.str_to_filename = dict(str_to_filename or {})
        self.expressions_created = dict(expressions_created or {})
        self.op_profiles = dict(op_profiles or {})

    def successful(self) -> bool:
        return len(self.failures) == 0 or all(f.xfail for f in self.failures)

    def __repr__(self):
        return f"DraftExportReport({self.failures})"

    def __str__(self):
        bar = "#" * 99
        if self.successful():
            return f"\n{bar}\nCongratulations: No issues are found during export, and it was able to soundly " \
                   f"produce a graph.\nYou can now change back to ember.export.export()\n{bar}\n"
        parts = [f"\n{bar}\nWARNING: {len(self.failures)} issue(s) found during export, and it was not able to "
                 f"soundly produce a graph.\nPlease follow the instructions to fix the errors.\n{bar}\n"]
        for i, f in enumerate(self.failures):
            parts.append(f"{i + 1}. {f.print(self.str_to_filename)}\n")
        return "\n".join(parts)


# ---------------------------------------------------------------------------- real-value capture
_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_location():
    """``File f, lineno n, in fn`` and the source line of the innermost frame outside ember."""
    import linecache
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_EMBER_DIR + os.sep):
        f = f.f_back
    if f is None:
        return "<unknown>", []
    code = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    head = f"File {f.f_code.co_filename}, lineno {f.f_lineno}, in {f.f_code.co_name}"
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}", [head, f"    {code}"]


def _same(got, want) -> bool:
    if isinstance(want, float) and want != want:
        return isinstance(got, float) and got != got
    return type(got) is type(want) and got == want


def _assert_value(t, expected, where, how):
    """Runtime assert of a draft-exported program: tensor ``t`` holds the value it held at export
    (read with ``how``: ``item`` or ``tolist``), which the program was specialized to."""
    from ..tensor import Tensor
    got = Tensor.item(t) if how == "item" else Tensor.tolist(t)
    ok = _same(got, expected) if how == "item" else got == expected
    if not ok:
        raise RuntimeError(f"Runtime assertion failed: the tensor read at {where} ({how}()) was {expected!r} when "
                           f"draft_export ran, and the exported program is specialized to that value; got {got!r}")


class _track_reads:
    """While inside: each ``Tensor.item()`` / ``.tolist()`` of a tensor the real-mode tracer
    follows puts an ``_assert_value`` node in its graph and is logged as ``(where, value)``."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        from ..aot.joint import _active_tracer
        from ..tensor import Tensor
        self.saved = (Tensor.item, Tensor.tolist)
        orig_item, orig_tolist = self.saved
        log = self.log

        def read(how, orig):
            def method(t):
                v = orig(t)
                tracer = _active_tracer()
                if tracer is not None:
                    where, stack = _user_location()
                    log.append((where, stack, v, how))
                    node = tracer.graph.call_function(_assert_value, (tracer._map_value(t), v, where, how))
                    tracer.graph.impure_targets.add(_assert_value)
                    del node
                return v
            method.__name__ = how
            return method
        Tensor.item = read("item", orig_item)
        Tensor.tolist = read("tolist", orig_tolist)
        return self

    def __exit__(self, *exc):
        from ..tensor import Tensor
        Tensor.item, Tensor.tolist = self.saved
        return False


def _real_capture(log):
    """A ``capture`` for ``_trace._export``: the functional graph of the module call traced on real
    values (see the module docstring)."""
    def capture(mod, args, kwargs):
        from types import SimpleNamespace
        from ..autograd.grad_mode import no_grad
        from ..fx.experimental.proxy_tensor import make_fx
        from ..nn.utils.stateless import functional_call
        from ..ops import api as _api
        from ..tensor import Tensor
        from ..utils._pytree import tree_flatten, tree_unflatten
        params, buffers = dict(mod.named_parameters()), dict(mod.named_buffers())
        names = list(params) + list(buffers)
        state = list(params.values()) + list(buffers.values())
        leaves, spec = tree_flatten((args, kwargs))
        user_at = [i for i, v in enumerate(leaves) if isinstance(v, Tensor)]
        ex_inputs = state + [leaves[i] for i in user_at]
        box = {}

        def forward_only(flat):
            lv = list(leaves)
            for j, i in enumerate(user_at):
                lv[i] = flat[len(state) + j]
            a, k = tree_unflatten(lv, spec)
            out = functional_call(mod, dict(zip(names, flat[:len(state)])), a, k)
            box["out"] = tree_flatten(out)
            return tuple(x for x in box["out"][0] if isinstance(x, Tensor))

        copies = [t.detach().clone() for t in ex_inputs]     # the trace runs the ops: not on the real state
        with no_grad(), _track_reads(log):
            gm = make_fx(forward_only, tracing_mode="real", functionalize=True)(copies)
        _annotate(gm, [t.detach().clone() for t in ex_inputs])
        out_leaves, out_spec = box["out"]
        sentinels, result = [], []
        for x in out_leaves:
            if isinstance(x, Tensor):
                s = _api.empty(0)
                sentinels.append(s)
                result.append(s)
            else:
                result.append(x)
        joint = SimpleNamespace(gm=gm, mutated_inputs=list(gm.meta["mutated_inputs"]))
        return gm, ex_inputs, tuple(sentinels), tree_unflatten(result, out_spec), joint
    return capture


def _annotate(gm, inputs):
    """``meta["val"]`` (a fake of the value's layout) on every node of the real-mode graph, as the
    fake-mode trace of ``export`` leaves it: printing and later passes (ember.onnx) read it."""
    from ..autograd.grad_mode import no_grad
    from ..fx.interpreter import Interpreter
    from ..tensor import Tensor
    from ._trace import _fake_like

    def fake(v):
        if isinstance(v, Tensor):
            return _fake_like(v)
        if isinstance(v, (tuple, list)):
            return type(v)(fake(x) for x in v)
        return v

    class _Annotator(Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if n.op not in ("output",) and "val" not in n.meta:
                n.meta["val"] = fake(out)
            return out
    with no_grad():
        _Annotator(gm).run(*inputs)


def _data_dependent(err) -> bool:
    text = str(err)
    keys = ("item()", "tensor data", "data-dependent", "depends on tensor data", "tolist", "value of a tensor",
            "nonzero", "boolean-mask", "output shape depends")
    return any(k in text for k in keys)


def _relax(dynamic_shapes):
    """``dynamic_shapes`` with every named Dim / Dim.DYNAMIC as Dim.AUTO, keeping its bounds
    (``Dim("b", max=10)`` -> ``Dim.AUTO(min=0, max=10)``: the program still never sees more)."""
    from .dynamic_shapes import Dim, _DimHint, int_oo
    if isinstance(dynamic_shapes, dict):
        return {k: _relax(v) for k, v in dynamic_shapes.items()}
    if isinstance(dynamic_shapes, (tuple, list)):
        return type(dynamic_shapes)(_relax(v) for v in dynamic_shapes)
    if isinstance(dynamic_shapes, Dim):
        return Dim.AUTO(min=dynamic_shapes.min, max=None if dynamic_shapes.max >= int_oo else dynamic_shapes.max)
    if isinstance(dynamic_shapes, _DimHint) and dynamic_shapes.is_dynamic:
        return Dim.AUTO(min=dynamic_shapes.min, max=dynamic_shapes.max) if not dynamic_shapes._factory else Dim.AUTO
    return dynamic_shapes


def draft_export(mod, args, kwargs=None, *, dynamic_shapes=None, preserve_module_call_signature=(),
                 strict=False, prefer_deferred_runtime_asserts_over_guards=False):
    """``export`` that does not give up on data-dependent code or wrong Dims; see the module
    docstring. The program's ``_report`` lists what had to be assumed."""
    import warnings
    from ..dynamo.exc import Unsupported
    from . import _trace
    from .errors import ConstraintViolationError
    from .shapes_collection import AdditionalInputs, ShapesCollection
    failures: List[FailureReport] = []
    if isinstance(dynamic_shapes, (AdditionalInputs, ShapesCollection)):
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    try:
        ep = _trace.export(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                           preserve_module_call_signature=preserve_module_call_signature)
    except ConstraintViolationError as e:
        failures.append(FailureReport(FailureType.CONSTRAINT_VIOLATION_ERROR, {"message": str(e)}))
        ep = _trace.export(mod, args, kwargs, dynamic_shapes=_relax(dynamic_shapes), strict=strict,
                           preserve_module_call_signature=preserve_module_call_signature)
    except Unsupported as e:
        if not _data_dependent(e):
            raise
        if dynamic_shapes is not None:
            raise NotImplementedError(f"ember.export.draft_export: data-dependent code with dynamic_shapes is not "
                                      f"supported (the fallback trace specializes every size); export with static "
                                      f"shapes. The capture failed with: {e}") from e
        reason = str(e).split(" which export needs: ", 1)[-1]
        log: list = []
        from .. import compiler
        compiler._EXPORT_DEPTH += 1
        try:
            ep = _trace._export(mod, args, kwargs or {}, None, preserve_module_call_signature,
                                capture=_real_capture(log))
        finally:
            compiler._EXPORT_DEPTH -= 1
        where = reason.rsplit(" (at ", 1)
        expr = where[0]
        stack = [f"at {where[1].rstrip(')')}"] if len(where) == 2 else []
        if log:
            stack = log[0][1]
        failures.append(FailureReport(FailureType.DATA_DEPENDENT_ERROR, {
            "expr": expr, "occurrences": max(1, len(log)), "user_stack": stack,
            "specialized": [(w, v) for w, _s, v, _h in log]}))
    ep._report = DraftExportReport(failures)
    if failures:
        warnings.warn(f"draft_export: {len(failures)} issue(s) found during export, and it was not able to soundly "
                      f"produce a graph. Inspect them with `print(ep._report)`.", UserWarning, stacklevel=2)
    return ep
