"""``ExportedProgram``: an exported graph with its state, signature and shape constraints.

The graph is a pure function of its placeholders (parameters, buffers, constants, then the
user's flat tensor inputs); ``module()`` wraps it back into an ``nn.Module`` taking the
original ``(args, kwargs)`` structure, checking the inputs against what the export assumed
(structure, dtypes, static sizes, ``Dim`` ranges, the ShapeEnv's guards) before running it,
and writing buffer mutations back into its buffers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .graph_signature import ConstantArgument, ExportGraphSignature, InputKind, OutputKind


@dataclass
class ModuleCallSignature:
    """How a module was called: its flat inputs/outputs (argument specs), the pytree specs of
    ``(args, kwargs)`` and of the result, and ``forward``'s argument names. Recorded for the
    root module and for the submodules named in ``preserve_module_call_signature`` (``unflatten``
    restores their calling conventions from it)."""
    inputs: List[Any]
    outputs: List[Any]
    in_spec: Any
    out_spec: Any
    forward_arg_names: Optional[List[str]] = None


@dataclass
class ModuleCallEntry:
    """One module of the exported model, by fully qualified name (``""``: the root); its
    ``signature`` is recorded for the root and the submodules named in
    ``preserve_module_call_signature`` (None for the others, as torch 2.13)."""
    fqn: str
    signature: Optional[ModuleCallSignature] = None


class ExportedProgram:
    def __init__(self, graph_module, graph_signature: ExportGraphSignature, state_dict: Dict[str, Any],
                 constants: Dict[str, Any], range_constraints, in_spec, out_spec, const_inputs, shape_env,
                 equal_groups=(), example_inputs=None, module_class="Module", input_paths=None,
                 module_call_graph=None, state_aliases=None):
        self._graph_module = graph_module
        self._graph_signature = graph_signature
        self._state_dict = state_dict
        self._constants = constants
        self._range_constraints = dict(range_constraints)
        self._in_spec = in_spec
        self._out_spec = out_spec
        self._const_inputs = list(const_inputs)       # per flat input leaf: its value if not a tensor
        self._shape_env = shape_env
        self._equal_groups = [list(g) for g in equal_groups]
        self._example_inputs = example_inputs
        self._module_class = module_class
        # per flat input leaf: where it is in (args, kwargs), for messages ("args[2]", "kwargs['y']")
        self._input_paths = list(input_paths) if input_paths is not None else [f"input {i}" for i in
                                                                               range(len(self._const_inputs))]
        self._module_call_graph = list(module_call_graph) if module_call_graph is not None else \
            [ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec))]
        # parameters/buffers registered under more than one name: other name -> the signature's
        # (``unflatten`` installs them under every name, as the original module had them)
        self._state_aliases = dict(state_aliases or {})

    @property
    def module_call_graph(self) -> List[ModuleCallEntry]:
        """``[ModuleCallEntry(fqn, signature)]``: the root, then every submodule in
        ``named_modules()`` order (what ``ember.export.unflatten`` rebuilds)."""
        return self._module_call_graph

    # ---- torch's attributes
    @property
    def graph_module(self):
        return self._graph_module

    @property
    def graph(self):
        return self._graph_module.graph

    @property
    def graph_signature(self) -> ExportGraphSignature:
        return self._graph_signature

    @property
    def state_dict(self) -> Dict[str, Any]:
        return self._state_dict

    @property
    def constants(self) -> Dict[str, Any]:
        return self._constants

    @property
    def range_constraints(self):
        return self._range_constraints

    @property
    def example_inputs(self):
        return self._example_inputs

    @property
    def call_spec(self):
        return (self._in_spec, self._out_spec)

    def parameters(self):
        for name in self._graph_signature.parameters:
            yield self._state_dict[name]

    def named_parameters(self):
        for name in self._graph_signature.parameters:
            yield name, self._state_dict[name]

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    def named_buffers(self):
        for s in self._graph_signature.input_specs:
            if s.kind == InputKind.BUFFER:
                yield s.target, (self._state_dict[s.target] if s.persistent else self._constants[s.target])

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Unable to call ExportedProgram directly. You should use `exported_program.module()` "
                           "instead.")

    # ---- running
    def _state_tensor(self, spec):
        if spec.kind == InputKind.PARAMETER:
            return self._state_dict[spec.target]
        if spec.kind == InputKind.BUFFER:
            return self._state_dict[spec.target] if spec.persistent else self._constants[spec.target]
        return self._constants[spec.target]

    def module(self):
        """An ``nn.Module`` running the program: parameters and buffers under their original
        names (``state_dict()`` keys as the exported module's), forward taking the original
        ``(args, kwargs)``."""
        return _unlifted_module_class()(self)

    def run_decompositions(self, decomp_table: Optional[dict] = None) -> "ExportedProgram":
        """A new program whose graph is decomposed to ember's prims (``decomp_table``: op ->
        function, default ``default_decompositions()``; an op missing from the table stays whole),
        traced again functionally."""
        from ._trace import _placeholder, _trace_functional
        from ..fx.graph import Graph
        from ..fx.graph_module import GraphModule
        from ..ops import api as _api
        from .decomp_utils import CustomDecompTable
        if decomp_table is None:
            from ..prims.table import decomposition_table
            decomp_table = decomposition_table()
        elif isinstance(decomp_table, CustomDecompTable):
            decomp_table = decomp_table.materialize()
        elif isinstance(decomp_table, dict):
            from .decomp_utils import _key
            decomp_table = {_key(k): v for k, v in decomp_table.items()}
        else:
            raise TypeError(f"run_decompositions: decomp_table must be a dict (or default_decompositions()), "
                            f"got {type(decomp_table).__name__}")
        gm = self._graph_module
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        examples = []
        env = self._shape_env
        for n in phs:
            v = n.meta["val"]
            shape = [int(env.hint(d)) if env is not None and hasattr(d, "expr") else int(d) for d in v.shape]
            examples.append(_api.ones(shape, dtype=v.dtype))
        gm.meta["dynamic"] = env is not None and any(hasattr(d, "expr") for n in phs for d in n.meta["val"].shape)
        if gm.meta["dynamic"]:
            gm.meta["shape_env"] = env
            for n in phs:
                n.meta["example_value"] = n.meta["val"]
        joint = _trace_functional(gm, examples, decompositions=decomp_table)
        g = Graph()
        val = {}
        new_phs = [n for n in joint.gm.graph.nodes if n.op == "placeholder"]
        for old, new in zip(phs, new_phs):
            p = _placeholder(g, old.name)
            p.meta["val"] = old.meta["val"]
            val[new] = p
        consts = {}
        for n in joint.gm.graph.nodes:
            if n.op in ("placeholder", "output"):
                continue
            if n.op == "get_attr":
                v = joint.gm
                for part in n.target.split("."):
                    v = getattr(v, part)
                consts[n.target] = v
            val[n] = g.node_copy(n, lambda a: val[a])
        outs = joint.gm.graph.output_node.args[0][0]
        g.output(tuple(val[o] if hasattr(o, "op") else o for o in outs))
        from ..ops._aten_convert import convert_graph
        convert_graph(g)        # ops kept whole (not in the table) as aten overloads; prims stay
        new_gm = GraphModule(consts, g)
        from .._higher_order_ops.cond_op import export_branches
        export_branches(new_gm)    # a cond's branch subgraphs, converted as the graph's own nodes
        new_gm.meta["shape_env"] = env
        # output names follow the new graph's nodes
        from .graph_signature import OutputSpec, TensorArgument
        new_outs = list(g.output_node.args[0])
        specs, k = [], 0
        for s in self._graph_signature.output_specs:
            if isinstance(s.arg, ConstantArgument):
                specs.append(s)
            else:
                specs.append(OutputSpec(s.kind, TensorArgument(new_outs[k].name), s.target))
                k += 1
        sig = ExportGraphSignature(list(self._graph_signature.input_specs), specs)
        # a kept submodule signature names nodes of the old graph, which the new one renames: it
        # is dropped, and unflatten refuses the program rather than cut the graph at wrong values
        calls = [ModuleCallEntry(e.fqn) if e.fqn and e.signature is not None else e for e in self._module_call_graph]
        out = ExportedProgram(new_gm, sig, self._state_dict, self._constants, self._range_constraints,
                              self._in_spec, self._out_spec, self._const_inputs, env, self._equal_groups,
                              self._example_inputs, self._module_class, self._input_paths,
                              module_call_graph=calls, state_aliases=self._state_aliases)
        out._dropped_signatures = sorted(e.fqn for e in self._module_call_graph if e.fqn and e.signature is not None) \
            or getattr(self, "_dropped_signatures", [])
        return out

    def _prims_only(self):
        hit = getattr(self, "_prims_cache", None)
        if hit is None:
            hit = self._prims_cache = any(
                n.op == "call_function" and (getattr(n.target, "__module__", "") or "").startswith("ember.prims")
                for n in self._graph_module.graph.nodes)
        return hit

    # ---- checks
    def _check_inputs(self, leaves):
        """Raise ``AssertionError("Guard failed: ...")`` (torch's type) for inputs outside what the
        export covers: tensor/non-tensor positions, dtypes, static sizes, Dim ranges, equalities
        and every size guard the trace recorded."""
        from ..tensor import Tensor
        user_specs = [s for s in self._graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
        phs = {n.name: n for n in self._graph_module.graph.nodes if n.op == "placeholder"}
        values, where_of = {}, {}
        derived = []          # dims declared as an expression of a Dim (``2 * dx``): checked last
        k = 0
        for i, (leaf, const) in enumerate(zip(leaves, self._const_inputs)):
            if const is not None or not isinstance(leaf, Tensor):
                if isinstance(leaf, Tensor) or leaf != const:
                    raise AssertionError(f"Guard failed: {self._input_paths[i]} == {const!r} (the value it had at export, "
                                         f"which the program was specialised to), but got {leaf!r}")
                continue
            name = user_specs[k].arg.name
            k += 1
            v = phs[name].meta["val"]
            if leaf.dtype != v.dtype:
                raise AssertionError(f"Guard failed: {name}.dtype == {v.dtype} (got {leaf.dtype})")
            if leaf.ndim != len(v.shape):
                raise AssertionError(f"Guard failed: {name}.dim() == {len(v.shape)} (got {leaf.ndim})")
            for d, (want, got) in enumerate(zip(v.shape, leaf.shape)):
                src = f"{name}.size()[{d}]"
                if not hasattr(want, "expr"):
                    if int(want) != got:
                        raise AssertionError(f"Guard failed: {src} == {int(want)} (got {got})")
                    continue
                sym = want.expr
                if not sym.is_Symbol:
                    derived.append((src, sym, got))
                    continue
                if sym in values and sym.is_Symbol:
                    if values[sym] != got:
                        raise AssertionError(f"Guard failed: {src} == {where_of[sym]} (got {got} and "
                                             f"{values[sym]})")
                    continue
                if sym.is_Symbol:
                    values[sym] = got
                    where_of[sym] = src
                    r = self._range_constraints.get(sym)
                    if r is not None:
                        if got < r.lower:
                            raise AssertionError(f"Guard failed: {src} >= {r.lower} (got {got})")
                        if got > r.upper:
                            raise AssertionError(f"Guard failed: {src} <= {r.upper} (got {got})")
        self._check_derived(derived, values, where_of)
        for group in self._equal_groups:
            sizes = {}
            for name, d in group:
                for leaf_name, t in self._named_user_leaves(leaves).items():
                    if leaf_name == name:
                        sizes[f"{name}.size()[{d}]"] = t.shape[d]
            if len(set(sizes.values())) > 1:
                items = list(sizes.items())
                raise AssertionError(f"Guard failed: {items[1][0]} == {items[0][0]} (declared the same Dim; "
                                     f"got {items[1][1]} and {items[0][1]})")
        env = self._shape_env
        if env is not None and values:
            import sympy
            sub = {s: sympy.Integer(v) for s, v in values.items()}
            for gd in env.guards:
                if not gd.free_symbols <= set(sub):
                    continue
                if not bool(gd.xreplace(sub)):
                    text = str(gd)
                    for s, w in where_of.items():
                        text = text.replace(str(s), w)
                    raise AssertionError(f"Guard failed: {text} (a decision the exported program took on these "
                                         f"sizes; export again with other example sizes or constraints)")

    def _check_derived(self, derived, values, where_of):
        """Dims declared as ``A * s + B`` of a Dim's symbol ``s`` (``2 * dx``): each must equal its
        expression of the size the root Dim's own dim has (export requires the root to be the
        size of some input dimension, so ``values`` holds it)."""
        import sympy
        for src, expr, got in derived:
            (sym,) = expr.free_symbols
            want = int(expr.xreplace({sym: sympy.Integer(values[sym])}))
            if want != got:
                text = str(expr).replace(str(sym), where_of[sym])
                raise AssertionError(f"Guard failed: {src} == {text} (got {got}, expected {want})")

    def _named_user_leaves(self, leaves):
        from ..tensor import Tensor
        user_specs = [s for s in self._graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
        out, k = {}, 0
        for leaf, const in zip(leaves, self._const_inputs):
            if const is None and isinstance(leaf, Tensor):
                out[user_specs[k].arg.name] = leaf
                k += 1
        return out

    # ---- printing
    def __str__(self):
        code = self._readable_graph()
        sig = "\n".join("    " + ln if ln else "" for ln in str(self._graph_signature).split("\n"))
        rc = "{" + ", ".join(f"{k}: {v!r}" for k, v in self._range_constraints.items()) + "}"
        return f"ExportedProgram:\n{code}\nGraph signature: \n{sig}\nRange constraints: {rc}\n"

    __repr__ = __str__

    def _readable_graph(self):
        """``class GraphModule(ember.nn.Module): def forward(self, p_fc_weight: "f32[3, 4]", ...)``:
        the generated code with each placeholder and node annotated with its dtype and shape."""
        lines = _readable_lines(self._graph_module, "GraphModule")
        return "\n".join("    " + ln if ln else "" for ln in lines) + "\n"


def _readable_lines(gm, cls_name):
    """The lines of ``_readable_graph`` for ``gm``; a cond's branch graphs follow as nested
    classes (``class true_graph_0(ember.nn.Module):``), as torch prints them."""
    lines = [f"class {cls_name}(ember.nn.Module):"]
    params = ", ".join(f'{n.name}: "{_ann(n)}"' for n in gm.graph.nodes if n.op == "placeholder")
    lines.append(f"    def forward(self, {params}):")
    body = [ln for ln in gm.code.strip("\n").split("\n")[1:] if ln.strip()]
    anns = {n.name: _ann(n) for n in gm.graph.nodes if n.op not in ("placeholder", "output")}
    for ln in body:
        s = ln.strip()
        head = s.split(" = ", 1)[0] if " = " in s else None
        if head is not None and head in anns and anns[head]:
            s = f'{head}: "{anns[head]}" = {s.split(" = ", 1)[1]}'
        lines.append("        " + s)
    from .._higher_order_ops.cond_op import cond_nodes
    for node, tgm, fgm in cond_nodes(gm):
        for attr, sub in zip(node.args[1:3], (tgm, fgm)):
            lines.append("")
            lines.extend("    " + ln if ln else "" for ln in _readable_lines(sub, attr.target))
    return lines


_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8", "complex64": "c64",
          "complex128": "c128"}


def _ann(node) -> str:
    from ..tensor import Tensor
    v = node.meta.get("val")
    if isinstance(v, (tuple, list)):
        return ""
    if not isinstance(v, Tensor):
        return "Sym(" + str(v) + ")" if v is not None and hasattr(v, "expr") else ""
    dt = getattr(v.dtype, "name", str(v.dtype))
    return f"{_SHORT.get(dt, dt)}[{', '.join(str(d) for d in v.shape)}]"


_CLS = []


def _unlifted_module_class():
    if _CLS:
        return _CLS[0]
    from ..nn.modules.module import Module
    from ..nn.parameter import Parameter

    class ExportedModule(Module):
        """What ``ExportedProgram.module()`` returns (torch's unlifted GraphModule)."""

        def __init__(self, ep):
            super().__init__()
            self.__dict__["_ep"] = ep
            self.__dict__["_graph"] = ep.graph_module
            for spec in ep.graph_signature.input_specs:
                if spec.kind == InputKind.PARAMETER:
                    t = ep.state_dict[spec.target]
                    _install(self, spec.target, t if isinstance(t, Parameter) else Parameter(t), "param")
                elif spec.kind == InputKind.BUFFER:
                    _install(self, spec.target, ep._state_tensor(spec), "buffer", spec.persistent)

        # the graph was traced in one training mode (batch statistics or running ones, dropout on or
        # off): flipping ``training`` here would change nothing it computes -- torch refuses it too
        def train(self, mode=True):
            raise NotImplementedError("Calling train() is not supported yet.")

        def eval(self):
            raise NotImplementedError("Calling eval() is not supported yet.")

        @property
        def graph(self):
            return self._graph.graph

        @property
        def code(self):
            return self._graph.code

        def forward(self, *args, **kwargs):
            from ..autograd.grad_mode import no_grad
            from ..tensor import Tensor
            from ..utils._pytree import tree_flatten
            ep = self._ep
            leaves, spec = tree_flatten((args, kwargs))
            if spec != ep._in_spec:
                try:
                    leaves = ep._in_spec.flatten_up_to((args, kwargs))
                except ValueError as e:
                    raise TypeError(f"Trying to flatten user inputs with exported input tree spec: \n{ep._in_spec}\n"
                                    f"but actually got inputs with tree spec of: \n{spec}.\n({e})") from None
            ep._check_inputs(leaves)
            flat = []
            user = iter(t for t, c in zip(leaves, ep._const_inputs) if c is None and isinstance(t, Tensor))
            for s in ep.graph_signature.input_specs:
                if s.kind == InputKind.USER_INPUT:
                    flat.append(next(user))
                elif s.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                    flat.append(_get(self, s.target))
                else:
                    flat.append(ep.constants[s.target])
            if ep._prims_only():
                # prims have no derivative formulas: a decomposed program runs without autograd
                with no_grad():
                    outs = self._graph(*flat)
            else:
                outs = self._graph(*flat)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            user_outs, k = [], 0
            names = {s.arg.name: t for s, t in zip(ep.graph_signature.input_specs, flat)}
            for s in ep.graph_signature.output_specs:
                if isinstance(s.arg, ConstantArgument):
                    user_outs.append(s.arg.value)
                    continue
                v = outs[k]
                k += 1
                if s.kind == OutputKind.USER_OUTPUT:
                    user_outs.append(v)
                elif s.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
                    with no_grad():
                        _get(self, s.target).copy_(v)
                elif s.kind == OutputKind.USER_INPUT_MUTATION:
                    with no_grad():
                        names[s.target].copy_(v)
            return ep._out_spec.unflatten(user_outs)

    _CLS.append(ExportedModule)
    return ExportedModule


def _install(root, fqn, t, kind, persistent=True):
    from ..nn.modules.module import Module
    *path, leaf = fqn.split(".")
    mod = root
    for p in path:
        sub = mod._modules.get(p)
        if sub is None:
            sub = Module()
            mod.add_module(p, sub)
        mod = sub
    if kind == "param":
        mod.register_parameter(leaf, t)
    else:
        mod.register_buffer(leaf, t, persistent=persistent)


def _get(root, fqn):
    mod = root
    *path, leaf = fqn.split(".")
    for p in path:
        mod = mod._modules[p]
    return getattr(mod, leaf)
