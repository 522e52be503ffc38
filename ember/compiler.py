"""``ember.compiler``: user-level controls of the compiler (mirrors ``torch.compiler``).

* ``reset()``: forget all compiled code (cache entries, skip marks, counters);
* ``disable(fn)``: run ``fn`` eagerly even when called from compiled code (a
  graph break at its call);
* ``list_backends()``: backend names ``ember.compile(backend=...)`` accepts;
* ``is_compiling()``: True while dynamo traces the calling code, False when it runs
  (lets library code pick a graph-friendly formulation, as ``torch.compiler.is_compiling``);
* ``set_stance(stance, force_backend=...)``: how compiled functions behave for a while
  (force eager, never recompile, fail on recompile, eager first call...): see
  ``ember/dynamo/stance.py``;
* ``assume_constant_result(fn)``: calls of ``fn`` are made while tracing, on constant
  arguments, and their result is baked into the compiled code (no guard: the caller vouches
  that it does not change), as ``torch.compiler.assume_constant_result``;
* ``allow_in_graph(fn)`` / ``disallow_in_graph(fn)``: a call of ``fn`` becomes one graph node
  (its body is not traced by dynamo; aot traces through it) / always breaks the graph: see
  ``ember/dynamo/variables/allowed.py``.
"""
from .dynamo import disable, list_backends, reset
from .dynamo.stance import set_stance
from .dynamo.variables.allowed import allow_in_graph, disallow_in_graph

__all__ = ["reset", "disable", "list_backends", "is_compiling", "is_dynamo_compiling", "set_stance",
           "assume_constant_result", "allow_in_graph", "disallow_in_graph"]


def is_compiling() -> bool:
    """False at run time; dynamo folds a call of it to True while tracing."""
    return False


is_compiling._ember_is_compiling = True


is_dynamo_compiling = is_compiling


def assume_constant_result(fn):
    """Mark ``fn`` so that compiled code calls it once, while tracing, and uses the result as a
    constant. Its arguments must be constants there (numbers, strings, shapes of static
    tensors); a call with a tensor argument breaks the graph. Called normally, it just runs."""
    if not callable(fn):
        raise TypeError(f"assume_constant_result expects a callable, got {type(fn).__name__}")
    fn._ember_assume_constant = True
    return fn
