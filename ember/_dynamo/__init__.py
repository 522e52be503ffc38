"""``ember._dynamo``: the names PyTorch code reaches through ``torch._dynamo`` (``reset()``,
``config.cache_size_limit``, ``explain``, ``mark_dynamic``, ``graph_break()`` ...), so that such
code runs unchanged under ``import ember as torch``. Everything here is ``ember.dynamo``'s own
machinery; ``config`` translates PyTorch's knob names (see ``ember/_dynamo/config.py``)."""
from ..compiler import allow_in_graph, assume_constant_result, disallow_in_graph, is_compiling, set_stance
from ..dynamo import (BackendCompilerFailed, FullGraphError, RecompileLimitExceeded, Unsupported, compile,
                      disable, explain, graph_break, list_backends, lookup_backend, mark_dynamic, mark_static,
                      mark_static_address, optimize, register_backend, reset)
from . import config, utils


def maybe_mark_dynamic(t, index):
    """As ``mark_dynamic``: ember's marks never raise when the program specialises the size
    (a guard keeps the entry exact), which is what the "maybe" asks for."""
    return mark_dynamic(t, index)


__all__ = ["allow_in_graph", "disallow_in_graph", "assume_constant_result", "is_compiling", "set_stance", "compile", "disable", "explain", "graph_break",
           "list_backends", "lookup_backend", "mark_dynamic", "maybe_mark_dynamic", "mark_static",
           "mark_static_address", "optimize",
           "register_backend", "reset", "config", "utils", "Unsupported", "FullGraphError",
           "RecompileLimitExceeded", "BackendCompilerFailed"]
