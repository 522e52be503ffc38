"""``torch._dynamo.exc``: the exceptions ember's compiler raises, under torch's names where the
meaning is the same, so ``except torch._dynamo.exc.Unsupported`` catches what it should.

* ``Unsupported``: a construct dynamo cannot trace (ember runs the frame eagerly, or raises it
  under ``config.raise_on_unsupported``);
* ``BackendCompilerFailed``: a backend raised while compiling a graph;
* ``FullGraphError`` (ember's): ``fullgraph=True`` / ``error_on_graph_break(True)`` and a break;
* ``RecompileError``: ``config.error_on_recompile`` and a recompile;
* ``FailOnRecompileLimitHit``: the recompile limit with ``fullgraph=True`` and ``recompile_limit``
  or ``config.fail_on_recompile_limit_hit``;
* ``SkipFrame``: the frame is not compiled (internal: ember runs it eagerly);
* ``UserError``: an error in the program found while tracing (``cond`` branches that disagree);
* ``ObservedException``: the traced program raises (handled inside the trace);
* ``RecompileLimitExceeded`` (ember's, a Warning): the limit was hit, the code runs eagerly;
* ``ForbiddenInGraph`` (an AssertionError, as torch raises): a ``forbid_in_graph`` function was
  called while tracing.
"""
from ..dynamo.exc import (BackendCompilerFailed, FailOnRecompileLimitHit, ForbiddenInGraph, FullGraphError,
                          ObservedException, RecompileError, RecompileLimitExceeded, SkipFrame, Unsupported,
                          UserError)

__all__ = ["BackendCompilerFailed", "FailOnRecompileLimitHit", "ForbiddenInGraph", "FullGraphError",
           "ObservedException", "RecompileError", "RecompileLimitExceeded", "SkipFrame", "Unsupported", "UserError"]
