"""``ember.compiler``: user-level controls of the compiler (mirrors ``torch.compiler``).

* ``reset()``: forget all compiled code (cache entries, skip marks, counters);
* ``disable(fn)``: run ``fn`` eagerly even when called from compiled code
  (a function marked this way makes a calling frame that would inline it run
  eagerly, since graph breaks are not implemented yet);
* ``list_backends()``: backend names ``ember.compile(backend=...)`` accepts;
* ``is_compiling()``: True while dynamo traces the calling code, False when it runs
  (lets library code pick a graph-friendly formulation, as ``torch.compiler.is_compiling``).
"""
from .dynamo import disable, list_backends, reset

__all__ = ["reset", "disable", "list_backends", "is_compiling"]


def is_compiling() -> bool:
    """False at run time; dynamo folds a call of it to True while tracing."""
    return False


is_compiling._ember_is_compiling = True
