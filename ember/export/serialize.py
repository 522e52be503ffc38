"""``ember.export.save`` / ``load``: an ExportedProgram as one file.

The graph is stored with the aot cache's graph pickler (``ember/aot/cache.py``: nodes by name,
ops by name, fake tensors by layout, symbolic sizes as sympy expressions), the state as numpy
arrays, and the rest (signature, pytree specs, range constraints, guards) as plain pickles.
Symbolic sizes are rebound on load to a fresh ShapeEnv holding the same symbols."""
from __future__ import annotations

import io
import os
import pickle

#: the pickle protocol ``save`` writes with by default (torch's constant and value)
DEFAULT_PICKLE_PROTOCOL = 2

FORMAT = ("ember.export", 2)     # 2: pytree specs by serialized type name, module_call_graph
_READABLE = (("ember.export", 1), FORMAT)


def _tensor_record(t):
    import numpy as np
    from ..nn.parameter import Parameter
    arr = np.array(t.detach()._data)
    dt = t.dtype.name
    if dt == "bfloat16":
        arr = arr.view(np.uint16)
    return {"array": arr, "dtype": dt, "requires_grad": bool(t.requires_grad), "param": isinstance(t, Parameter)}


def _tensor_from(rec):
    from .. import types as _t
    from ..nn.parameter import Parameter
    from ..tensor import _make
    arr = rec["array"]
    if rec["dtype"] == "bfloat16":
        arr = arr.view(_t.bfloat16.np)
    t = _make(arr.copy())
    if rec["param"]:
        return Parameter(t, requires_grad=rec["requires_grad"])
    return t.requires_grad_(True) if rec["requires_grad"] else t


def save(ep, f, *, pickle_protocol: int = DEFAULT_PICKLE_PROTOCOL) -> None:
    """Write ``ep`` to ``f`` (a path or a binary file object)."""
    from ..aot.cache import graph_blob
    from .exported_program import ExportedProgram
    from .pytree_types import spec_to_record
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"ember.export.save() expects an ExportedProgram, got {type(ep).__name__}")
    gm = ep.graph_module
    env = ep._shape_env
    saved_meta = dict(gm.meta)
    gm.meta.pop("shape_env", None)     # (rebuilt on load from the symbols and guards below)
    # placeholders named like a builtin (``input``) are stored under a plain name: the graph
    # pickler rebuilds nodes through FX's namespace, which refuses builtin names
    builtin_named = [n for n in gm.graph.nodes if n.op == "placeholder" and _is_builtin_name(n.name)]
    for n in builtin_named:
        n.name = n.target = n.name + _BUILTIN_SUFFIX
    try:
        blob = graph_blob(gm, symbolic=env is not None)
    finally:
        for n in builtin_named:
            n.name = n.target = n.name[:-len(_BUILTIN_SUFFIX)]
        gm.meta.clear()
        gm.meta.update(saved_meta)
    if blob is None:
        raise RuntimeError("ember.export.save: the graph cannot be serialized (see the ember.aot log for why)")
    rec = {
        "format": FORMAT,
        "graph": blob,
        "signature": ep.graph_signature,
        "state_dict": {k: _tensor_record(v) for k, v in ep.state_dict.items()},
        "constants": {k: _tensor_record(v) for k, v in ep.constants.items()},
        "range_constraints": ep.range_constraints,
        "in_spec": spec_to_record(ep._in_spec),
        "out_spec": spec_to_record(ep._out_spec),
        "const_inputs": ep._const_inputs,
        "symbols": {str(s): v for s, v in env.var_to_val.items()} if env is not None else None,
        "guards": list(env.guards) if env is not None else [],
        "equal_groups": ep._equal_groups,
        "module_class": ep._module_class,
        "input_paths": ep._input_paths,
        "module_call_graph": [_entry_record(e) for e in ep.module_call_graph],
        "state_aliases": ep._state_aliases,
    }
    if not isinstance(pickle_protocol, int) or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"ember.export.save: pickle_protocol must be an int in [2, {pickle.HIGHEST_PROTOCOL}], "
                         f"got {pickle_protocol!r}")
    data = pickle.dumps(rec, protocol=pickle_protocol)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)


_BUILTIN_SUFFIX = "__builtin_name"


def _is_builtin_name(name):
    import builtins
    return name in builtins.__dict__


def _shape_env(symbols, guards):
    import sympy
    from ..fx.experimental.symbolic_shapes import ShapeEnv
    env = ShapeEnv(duck_shape=False)
    for i, (name, val) in enumerate(symbols.items()):
        s = sympy.Symbol(name, integer=True, positive=True)
        env.var_to_val[s] = val
        env.var_to_sources[s] = []
        env._shifted[s] = sympy.Symbol(f"_t{i + 1}", integer=True, nonnegative=True) + 2
    for g in guards:
        env._add_guard(g)
    return env


def load(f):
    """Read an ExportedProgram written by :func:`save` (a path or a binary file object)."""
    from ..aot.cache import _load_graph
    from .exported_program import ExportedProgram
    from .pytree_types import spec_from_record
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    try:
        rec = pickle.loads(data)
    except Exception as e:  # noqa: BLE001
        raise RuntimeError(f"ember.export.load: not an exported program file ({type(e).__name__}: {e})") from e
    if not isinstance(rec, dict) or rec.get("format") not in _READABLE:
        raise RuntimeError(f"ember.export.load: not an ember.export file of format {FORMAT} "
                           f"(found {rec.get('format') if isinstance(rec, dict) else type(rec).__name__})")
    # format 1 (before session 27) pickled the pytree specs themselves and had no module_call_graph
    spec = spec_from_record if rec["format"] == FORMAT else (lambda s: s)
    env = _shape_env(rec["symbols"], rec["guards"]) if rec["symbols"] is not None else None
    gm = _load_graph(rec["graph"], env)
    from ._trace import _rename_placeholder
    renamed = False
    for n in list(gm.graph.nodes):
        if n.op == "placeholder" and n.name.endswith(_BUILTIN_SUFFIX):
            _rename_placeholder(gm.graph, n, n.name[:-len(_BUILTIN_SUFFIX)])
            renamed = True
    if renamed:
        gm.recompile()
    gm.meta["shape_env"] = env
    rc = {}
    if env is not None:
        by_name = {str(s): s for s in env.var_to_val}
        rc = {by_name.get(str(k), k): v for k, v in rec["range_constraints"].items()}
    calls = rec.get("module_call_graph")
    return ExportedProgram(gm, rec["signature"], {k: _tensor_from(v) for k, v in rec["state_dict"].items()},
                           {k: _tensor_from(v) for k, v in rec["constants"].items()}, rc,
                           spec(rec["in_spec"]), spec(rec["out_spec"]),
                           rec["const_inputs"], env, rec["equal_groups"],
                           module_class=rec["module_class"], input_paths=rec["input_paths"],
                           module_call_graph=[_entry_from(e) for e in calls] if calls is not None else None,
                           state_aliases=rec.get("state_aliases"))


def _entry_record(entry):
    """A ModuleCallEntry with its pytree specs in picklable form (see ``pytree_types``)."""
    from .pytree_types import spec_to_record
    sig = entry.signature
    if sig is None:
        return (entry.fqn, None)
    return (entry.fqn, (sig.inputs, sig.outputs, spec_to_record(sig.in_spec), spec_to_record(sig.out_spec),
                        sig.forward_arg_names))


def _entry_from(rec):
    from .exported_program import ModuleCallEntry, ModuleCallSignature
    from .pytree_types import spec_from_record
    fqn, sig = rec
    if sig is None:
        return ModuleCallEntry(fqn)
    inputs, outputs, in_spec, out_spec, names = sig
    return ModuleCallEntry(fqn, ModuleCallSignature(inputs, outputs, spec_from_record(in_spec),
                                                    spec_from_record(out_spec), names))


del io
