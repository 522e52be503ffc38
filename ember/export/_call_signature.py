"""``preserve_module_call_signature``: keep how a submodule was called, so ``unflatten`` can
give back a submodule callable with its original ``(args, kwargs)`` and result structure.

While the program is captured, the submodule gets a forward pre-hook and a forward hook
(traced by dynamo like any hook) that pass every tensor of its call's inputs and outputs
through ``module_boundary`` -- an opaque identity custom op, so each boundary value is one
node of the exported graph whatever the program does around it. The hooks also record the
pytree specs and the non-tensor leaves of the call. After tracing, the boundary nodes name the
call's flat inputs and outputs (the ``ModuleCallSignature``) and are removed: the exported graph
is the one an export without the option gives."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ..tensor import Tensor
from ..utils._pytree import tree_flatten, tree_unflatten

_OP: List[Any] = []


def _boundary_op():
    """The ``ember_export::module_boundary(x, fqn, kind, index)`` custom op (made once)."""
    if _OP:
        return _OP[0]
    from .. import empty_like
    from ..library import custom_op

    @custom_op("ember_export::module_boundary", mutates_args=(),
               schema="(Tensor x, str fqn, str kind, int index) -> Tensor")
    def module_boundary(x, fqn, kind, index):
        return x.clone()

    @module_boundary.register_fake
    def _(x, fqn, kind, index):
        return empty_like(x)
    _OP.append(module_boundary)
    return module_boundary


def _is_boundary(target, op) -> bool:
    """The custom op itself (dynamo's graph) or the binding aot records for it."""
    return target is op or target is getattr(op, "_binding", None)


class _BoundaryHooks:
    """The two hooks of one preserved submodule (bound methods: dynamo inlines them)."""

    def __init__(self, fqn, record):
        self.fqn, self.record, self.op = fqn, record, _boundary_op()

    def wrap(self, value, kind):
        leaves, spec = tree_flatten(value)
        self.record[kind] = (spec, [(True, None) if isinstance(v, Tensor) else (False, v) for v in leaves])
        new = [self.op(v, self.fqn, kind, i) if isinstance(v, Tensor) else v for i, v in enumerate(leaves)]
        return tree_unflatten(new, spec)

    def pre(self, module, args, kwargs):
        return self.wrap((args, kwargs), "in")

    def post(self, module, args, kwargs, out):
        return self.wrap(out, "out")


class preserve_calls:
    """Install the boundary hooks on the submodules named in ``fqns`` for the capture."""

    def __init__(self, mod, fqns: Sequence[str]):
        if isinstance(fqns, str):
            fqns = (fqns,)
        names = dict(mod.named_modules(remove_duplicate=False))
        for f in fqns:
            if not isinstance(f, str) or not f:
                raise ValueError(f"ember.export: preserve_module_call_signature takes the fully qualified "
                                 f"names of submodules, got {f!r}")
            if f not in names:
                raise ValueError(f"ember.export: preserve_module_call_signature names {f!r}, which is not a "
                                 f"submodule of {type(mod).__name__}")
        self.mod, self.fqns, self.names = mod, tuple(fqns), names
        self.records: Dict[str, Dict[str, Any]] = {f: {} for f in self.fqns}
        self.handles = []

    def __enter__(self):
        for fqn in self.fqns:
            hooks = _BoundaryHooks(fqn, self.records[fqn])
            sub = self.names[fqn]
            self.handles.append(sub.register_forward_pre_hook(hooks.pre, with_kwargs=True))
            self.handles.append(sub.register_forward_hook(hooks.post, with_kwargs=True))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.handles = []
        return False

    def signatures(self, graph):
        """Take the boundary nodes out of ``graph``: fqn -> ``ModuleCallSignature``."""
        from .exported_program import ModuleCallSignature
        from .graph_signature import ConstantArgument, TensorArgument
        op = _boundary_op()
        found: Dict[tuple, Any] = {}
        for n in list(graph.nodes):
            if n.op == "call_function" and _is_boundary(n.target, op):
                x, fqn, kind, index = n.args
                if (fqn, kind, index) in found:
                    raise NotImplementedError(f"ember.export: preserve_module_call_signature: {fqn!r} is called "
                                              f"more than once in the program; preserving the signature of a "
                                              f"module called several times is not supported")
                found[(fqn, kind, index)] = x
                n.replace_all_uses_with(x)
                graph.erase_node(n)
        out = {}
        for fqn in self.fqns:
            rec = self.records[fqn]
            if "in" not in rec or "out" not in rec:
                raise NotImplementedError(f"ember.export: preserve_module_call_signature: {fqn!r} is never called "
                                          f"by the program, so it has no call signature to keep")
            sides = {}
            for kind in ("in", "out"):
                spec, consts = rec[kind]
                args = []
                for i, (is_tensor, c) in enumerate(consts):
                    if not is_tensor:
                        args.append(ConstantArgument("", c))
                        continue
                    node = found.get((fqn, kind, i))
                    if node is None or not hasattr(node, "name"):
                        raise NotImplementedError(
                            f"ember.export: preserve_module_call_signature: {'input' if kind == 'in' else 'output'} "
                            f"{i} of {fqn!r}'s call is not a value of the exported graph (unused, or folded to a "
                            f"constant); its signature cannot be kept")
                    args.append(TensorArgument(node.name))
                sides[kind] = (spec, args)
            out[fqn] = ModuleCallSignature(sides["in"][1], sides["out"][1], sides["in"][0], sides["out"][0])
        return out
