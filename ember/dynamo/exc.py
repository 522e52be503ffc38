"""Exceptions of the capture layer.

``Unsupported`` is the one signal the translator uses for "I cannot model
this": the frame then runs eagerly (and the reason is logged), so an
unsupported construct can never produce a wrong answer."""


class Unsupported(Exception):
    """Something the symbolic interpreter cannot trace; the frame falls back to eager."""

    def __init__(self, msg, where=None):
        super().__init__(msg)
        self.msg = msg
        self.where = where   # "file:line" of the user's instruction, filled in by the translator
        self.break_index = None   # top-level instruction index where a graph break can be made
        self.no_break = False     # set when a break itself is impossible (run the frame eagerly)

    def __str__(self):
        return f"{self.msg} (at {self.where})" if self.where else self.msg


def graph_break(msg: str = ""):
    """Does nothing when run; under ``ember.compile`` the graph breaks here (as
    ``torch._dynamo.graph_break()``): for tests and for splitting a graph on purpose. ``msg``
    is the reason logged for the break."""


def skip_frame(msg: str = ""):
    """Does nothing when run; under ``ember.compile`` the frame calling it is not compiled at all
    (as ``torch._dynamo.skip_frame()``): it runs eagerly, and frames it calls are still captured."""


def step_unsupported(msg: str = ""):
    """Does nothing when run; under ``ember.compile`` the graph traced so far is compiled and the
    rest of the frame, from this call on, runs eagerly (as ``torch._dynamo.step_unsupported()``)."""


class ForbiddenInGraph(AssertionError):
    """A function marked with ``ember._dynamo.forbid_in_graph`` was reached while tracing: raised
    from the compile (torch raises AssertionError "Attempt to trace forbidden callable ...")."""


class SkipFrame(Exception):
    """The frame is not worth compiling (no tensor ops); run it eagerly, without a warning."""


class BackendCompilerFailed(RuntimeError):
    """The backend raised while compiling a captured graph."""


class FullGraphError(RuntimeError):
    """``fullgraph=True`` and the frame could not be captured as one graph."""


class RecompileLimitExceeded(Warning):
    """A code object exceeded ``config.recompile_limit`` cache entries; it now runs eagerly."""


class FailOnRecompileLimitHit(RuntimeError):
    """``ember.compile(fullgraph=True, recompile_limit=n)``: a function needed an n+1-th
    compile (torch's ``FailOnRecompileLimitHit``)."""


class RecompileError(RuntimeError):
    """``config.error_on_recompile``: a guard failed and the function would be compiled again."""


class AliasedDynamicView(Exception):
    """An input shares memory with a view input that was given symbolic sizes (and so traced as
    memory of its own): the frame is traced again with view inputs kept static."""


class ObservedException(Unsupported):
    """An exception the traced program raises by Python semantics known while tracing (a
    ``raise`` statement, a dict/list/attribute miss, a failing conversion of constants).

    The translator unwinds to the handler the frame's exception table names (inlined callers'
    too), exactly as CPython would; one that no traced frame handles is an ``Unsupported`` like
    any other (graph break / the frame runs eagerly, where the program raises it for real).
    ``exc`` is the ``ExceptionVariable`` raised."""

    def __init__(self, exc, msg=None):
        super().__init__(msg or f"{exc.describe()} (the program raises)")
        self.exc = exc


from .._user_errors import UserError  # noqa: E402,F401 - (defined outside the package: ember.cond raises it)
