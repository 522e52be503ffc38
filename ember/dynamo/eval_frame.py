"""Glue between user code and the frame hook: ``optimize`` contexts, wrappers, ``disable``.

The hook is installed only while a compiled function runs: the wrapper sets
this thread's callback, calls the function (whose frame the hook captures)
and restores the previous callback. Frames the function calls while running
eagerly are hooked too (so code between unsupported regions still gets
compiled); ember's own code, the standard library and site-packages are
skipped after one look (per code object, in C)."""
from __future__ import annotations

import functools
import inspect
import itertools
import types

from .._C import _load_eval_frame

_eval_frame = _load_eval_frame()
from .convert_frame import Compiler, force

set_eval_frame = _eval_frame.set_eval_frame


class OptimizeContext:
    def __init__(self, compiler: Compiler):
        self.compiler = compiler
        self._prev = []

    def __enter__(self):
        self._prev.append(set_eval_frame(self.compiler))
        return self

    def __exit__(self, *exc):
        set_eval_frame(self._prev.pop())
        return False

    def __call__(self, fn):
        from ..nn.modules.module import Module
        if isinstance(fn, Module):
            return OptimizedModule(fn, self)
        if not callable(fn):
            raise TypeError(f"ember.compile expects a function or an nn.Module, got {type(fn).__name__}")
        if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn) or \
                inspect.isasyncgenfunction(fn):
            # its body runs later, at each next()/await, outside this call: as in PyTorch, the
            # generator works and runs eagerly (said once in the graph_breaks log)
            from . import logs as _logs
            _logs.get("graph_breaks").info("ember.compile: %s is a generator or coroutine function: it "
                                           "runs eagerly", getattr(fn, "__qualname__", fn))
            return fn
        compiler = self.compiler
        fn = _with_a_local(fn)
        code = getattr(inspect.unwrap(fn), "__code__", None)
        if code is not None:
            force(code)

        @functools.wraps(fn)
        def compiled_fn(*args, **kwargs):
            prev = set_eval_frame(compiler)
            try:
                return fn(*args, **kwargs)
            finally:
                set_eval_frame(prev)

        compiled_fn._ember_orig = fn
        compiled_fn._ember_compiler = compiler
        return compiled_fn


def user_level(fn):
    """``fn``, or for one of ember's own functions compiled directly (``ember.compile(F.gelu)``) a
    one-line caller of it outside ember's files: the frame compiled is then that call, recorded
    as one operator, as when a user's lambda calls it (tracing ember's function's own frame met
    its internal helpers: graph breaks, where torch.compile(F.gelu) is one graph). Only for
    ``ember.compile``: ember's own captures of its functions (export's ``_export_root``) trace
    them as they are."""
    from .variables.builder import is_ember_function
    if not isinstance(fn, (types.FunctionType, types.BuiltinFunctionType)) or not is_ember_function(fn) \
            or getattr(fn, "_ember_compiler", None) is not None:
        return fn                     # (an nn.Module of ember's, nn.Linear(...), stays a module)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "fn")
    glb = {"_ember_target": fn, "__name__": "ember_compile_call"}
    exec(compile("def call(*args, **kwargs):\n    return _ember_target(*args, **kwargs)\n",
                 f"<compiled {name}>", "exec"), glb)
    call = glb["call"]
    functools.update_wrapper(call, fn, updated=())
    del call.__wrapped__              # (inspect.unwrap must find the caller's code)
    return call


def _with_a_local(fn):
    """``fn``, or for a plain function whose frame has no local slot at all (no arguments, no
    local variables, no cells: ``def step(): opt.step()``) the same code with one unused local.
    The frame hook finishes a frame it ran compiled code for by swapping in a stub that returns
    local 0, so it passes frames without locals by -- they ran eagerly, silently: compiling
    ``def step(): opt.step()``, PyTorch's own recipe for compiling an optimizer, did nothing."""
    if type(fn) is not types.FunctionType:
        return fn
    code = fn.__code__
    if code.co_varnames or code.co_cellvars or code.co_freevars:
        return fn
    padded = types.FunctionType(code.replace(co_varnames=("__ember_slot",), co_nlocals=1), fn.__globals__,
                                fn.__name__, fn.__defaults__, fn.__closure__)
    padded.__kwdefaults__ = fn.__kwdefaults__
    functools.update_wrapper(padded, fn, updated=())
    del padded.__wrapped__            # (inspect.unwrap must find the padded code)
    return padded


def _optimized_module_class():
    from ..nn.modules.module import Module

    class OptimizedModule(Module):
        """What ``ember.compile(module)`` returns: calls run the module under the hook.

        Attributes, parameters and ``state_dict`` are the original module's
        (under ``_orig_mod``, as in PyTorch)."""

        def __init__(self, mod, ctx):
            super().__init__()
            self._orig_mod = mod
            fwd = getattr(type(mod), "forward", None)
            if hasattr(fwd, "__code__"):
                force(fwd.__code__)
            self.__dict__["_ember_ctx"] = ctx
            self.__dict__["_ember_call"] = ctx(_own_call_module())

        def forward(self, *args, **kwargs):
            return self.__dict__["_ember_call"](self._orig_mod, *args, **kwargs)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.__dict__["_modules"]["_orig_mod"], name)

        # Writes go to the original module, as in PyTorch: ``cm.scale = 2.0`` or
        # ``cm.weight = Parameter(...)`` change what the compiled code reads (guarded there). Set
        # on the wrapper instead, the compiled calls kept reading the module's old value (a silent
        # wrong answer) and a replaced parameter raised "attribute 'weight' already exists".
        @property
        def training(self):
            return self._orig_mod.training

        def __setattr__(self, name, value):
            if name in _WRAPPER_ATTRIBUTES or (name != "training" and hasattr(type(self), name)):
                return super().__setattr__(name, value)
            setattr(self._orig_mod, name, value)

        def __delattr__(self, name):
            if name in _WRAPPER_ATTRIBUTES or hasattr(type(self), name):
                return super().__delattr__(name)
            delattr(self._orig_mod, name)

        def __len__(self):
            return len(self._orig_mod)

        def __dir__(self):
            own = list(self._orig_mod.__dir__())
            return own + [a for a in super().__dir__() if a not in own]

    return OptimizedModule


# what ember.compile's module wrapper keeps for itself; every other attribute write goes to _orig_mod
_WRAPPER_ATTRIBUTES = frozenset({"_orig_mod", "_ember_ctx", "_ember_call", "forward"})


def _call_module(mod, *args, **kwargs):
    return mod(*args, **kwargs)


_WRAPPER_IDS = itertools.count()


def _own_call_module():
    """``_call_module`` with a code object of its own, for one ``ember.compile(module)`` wrapper.

    Why. The frame state kept per code object (automatic-dynamic sizes, unspecialised numbers,
    the ``*_then_compile`` stances' first call) was shared by every compiled module through the
    one ``_call_module`` code: a model compiled after another whose batch size changed started
    with dynamic sizes. PyTorch keys that state by the compiled forward's code; here each wrapper
    gets its own (an unused constant makes the code unequal to the others: code objects hash by
    value)."""
    code = _call_module.__code__
    code = code.replace(co_consts=code.co_consts + (f"<ember.compile wrapper {next(_WRAPPER_IDS)}>",))
    return types.FunctionType(code, _call_module.__globals__, _call_module.__name__)


def is_module_call_code(code) -> bool:
    """Whether ``code`` is a compiled module wrapper's call (``_own_call_module``)."""
    return code.co_name == "_call_module" and code.co_filename == _call_module.__code__.co_filename


class _Lazy:
    cls = None


def OptimizedModule(mod, ctx):  # noqa: N802 - a factory standing in for the class
    if _Lazy.cls is None:
        _Lazy.cls = _optimized_module_class()
    return _Lazy.cls(mod, ctx)


def disable(fn=None, recursive=True):
    """Run ``fn`` (and everything it calls) without capture; usable as a decorator."""
    if fn is None:
        return functools.partial(disable, recursive=recursive)

    @functools.wraps(fn)
    def disabled_fn(*args, **kwargs):
        prev = set_eval_frame(None)
        try:
            return fn(*args, **kwargs)
        finally:
            set_eval_frame(prev)

    disabled_fn._ember_dynamo_disable = True
    return disabled_fn
