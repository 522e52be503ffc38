"""``ember.compiler``: user-level controls of the compiler (mirrors ``torch.compiler``).

* ``reset()``: forget all compiled code (cache entries, skip marks, counters);
* ``disable(fn)``: run ``fn`` eagerly even when called from compiled code
  (a function marked this way makes a calling frame that would inline it run
  eagerly, since graph breaks are not implemented yet);
* ``list_backends()``: backend names ``ember.compile(backend=...)`` accepts.
"""
from .dynamo import disable, list_backends, reset

__all__ = ["reset", "disable", "list_backends"]
