"""``Module``: the base class of every layer.

A module keeps three ordered registries — ``_parameters``, ``_buffers`` and
``_modules`` — filled by attribute assignment (``self.w = Parameter(...)``)
or the explicit ``register_*`` calls. Traversal (``named_parameters``,
``named_modules``, ...), ``state_dict`` / ``load_state_dict``, device and
dtype moves, hooks and ``repr`` follow PyTorch's semantics.
"""
from __future__ import annotations

import itertools
import warnings
import weakref
from collections import OrderedDict, namedtuple

from ...tensor import Parameter, Tensor

__all__ = ["Module", "RemovableHandle", "register_module_forward_pre_hook", "register_module_forward_hook"]


class RemovableHandle:
    """Returned by ``register_*_hook``: ``remove()`` unregisters the hook (also a context manager)."""

    _next_id = itertools.count()

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(RemovableHandle._next_id)
        if extra_dict is None:
            extra_dict = ()
        elif isinstance(extra_dict, dict):
            extra_dict = (extra_dict,)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self):
        d = self.hooks_dict_ref()
        if d is not None and self.id in d:
            del d[self.id]
        for ref in self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


# ---------------------------------------------------------------------- global module hooks
# torch.nn.modules.module.register_module_forward_pre_hook / register_module_forward_hook: run
# for every module call, before the module's own hooks (tools that watch a whole model -- a
# module tracker, a FLOP counter -- without touching it). ember.compile runs a module call
# eagerly while any is registered (dynamo/variables/objects.py guards these dicts).
_global_forward_pre_hooks: "OrderedDict" = OrderedDict()
_global_forward_hooks: "OrderedDict" = OrderedDict()
_global_forward_hooks_with_kwargs: "OrderedDict" = OrderedDict()
_global_forward_hooks_always_called: "OrderedDict" = OrderedDict()
_global_backward_hooks: "OrderedDict" = OrderedDict()     # (no global backward hooks in ember yet)


def register_module_forward_pre_hook(hook):
    """``hook(module, args) -> None or new args`` before every module's forward."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with ``with_kwargs``)
    after every module's forward; a non-None result replaces the output. ``always_call``: also
    when the forward raised."""
    handle = RemovableHandle(_global_forward_hooks, extra_dict=[_global_forward_hooks_with_kwargs,
                                                                _global_forward_hooks_always_called])
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def add_hook(store, hook, prepend=False):
    """Register ``hook`` in the ordered dict ``store`` (first if ``prepend``); return its handle."""
    handle = RemovableHandle(store)
    store[handle.id] = hook
    if prepend:
        store.move_to_end(handle.id, last=False)
    return handle


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * n + line for line in lines)


def _copy_into(dst, src):
    """Copy ``src``'s values into ``dst`` in place (broadcasting, casting), bumping its version."""
    from ... import no_grad
    if hasattr(Tensor, "copy_"):
        with no_grad():
            dst.copy_(src)
        return
    arr = src._data
    if src.device != dst.device:
        arr = src.to(dst.device)._data
    dst._data[...] = arr.astype(dst._data.dtype, copy=False)
    dst._bump_version()


def _zero_(t):
    if hasattr(Tensor, "zero_"):
        t.zero_()
    else:
        t._data[...] = 0
        t._bump_version()


# ---------------------------------------------------------------------- backward hooks
def _backward_hook_functions():
    """Identity autograd Functions that let a module observe (and replace) its gradients."""
    from ...autograd import Function

    class _OutputHook(Function):
        @staticmethod
        def forward(ctx, state, *tensors):
            ctx.state = state
            return tuple(t.detach() if isinstance(t, Tensor) else t for t in tensors)

        @staticmethod
        def backward(ctx, *grads):
            state = ctx.state
            grads = state.on_grad_output(grads)
            return (None,) + tuple(grads)

    class _InputHook(Function):
        @staticmethod
        def forward(ctx, state, *tensors):
            ctx.state = state
            return tuple(t.detach() if isinstance(t, Tensor) else t for t in tensors)

        @staticmethod
        def backward(ctx, *grads):
            grads = ctx.state.on_grad_input(grads)
            return (None,) + tuple(grads)

    return _OutputHook, _InputHook


_HOOK_FNS = None


class _BackwardHookState:
    def __init__(self, module, hooks, pre_hooks, n_inputs):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.n_inputs = n_inputs
        self.grad_output = None
        self.input_wrapped = False

    def on_grad_output(self, grads):
        grads = tuple(grads)
        for hook in self.pre_hooks:
            res = hook(self.module, grads)
            if res is not None:
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grads):
                    raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got "
                                       f"{len(res)}, but expected {len(grads)}")
                grads = res
        self.grad_output = grads
        if not self.input_wrapped:
            # no input requires grad: the hooks see grad_input of None values
            self._run_hooks((None,) * self.n_inputs)
        return grads

    def on_grad_input(self, grads):
        return self._run_hooks(tuple(grads))

    def _run_hooks(self, grad_input):
        for hook in self.hooks:
            res = hook(self.module, grad_input, self.grad_output)
            if res is not None:
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_input):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got "
                                       f"{len(res)}, but expected {len(grad_input)}")
                grad_input = res
        return grad_input


def _tensor_positions(seq):
    return [i for i, v in enumerate(seq) if isinstance(v, Tensor)]


# ---------------------------------------------------------------------- Module

def _typename(obj):
    """``ember.typename`` (``ember.FloatTensor`` for a tensor, ``int`` for an int), as torch's messages."""
    from ... import typename
    return typename(obj)


class _HookWithModule:
    """A load-state-dict pre-hook registered through the public API: called with its module
    first (the internal hooks are not)."""

    def __init__(self, hook, module):
        self.hook = hook
        self.module = module

    def __call__(self, *args, **kwargs):
        return self.hook(self.module, *args, **kwargs)

class Module:
    """Base class for all neural network modules; subclasses implement ``forward``."""

    dump_patches = False
    _version = 1
    training: bool
    call_super_init = False
    _compiled_call_impl = None
    _no_global_hooks = False     # fx.GraphModule: ember's own graph calls (aot tracing) skip global hooks

    def __init__(self, *args, **kwargs):
        if self.call_super_init is False and (args or kwargs):
            if kwargs:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                                f"'{next(iter(kwargs))}'")
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but "
                            f"{len(args) + 1} were given")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = OrderedDict()
        d["_forward_hooks_always_called"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    def forward(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ------------------------------------------------------------------ registration
    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(ember Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(ember.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                             f"created explicitly. To express '{name}' as a function of another Tensor, "
                             "compute the value in the forward() method.")
        self._parameters[name] = param

    def add_module(self, name, module):
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    def register_module(self, name, module):
        self.add_module(name, module)

    # ------------------------------------------------------------------ lookup by path
    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target, module, strict=False):
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        atoms = target.split(".")
        parent = self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]) and not isinstance(getattr(parent, atoms[-1]), Module):
            raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return getattr(mod, name)

    # ------------------------------------------------------------------ attribute protocol
    def __getattr__(self, name):
        d = self.__dict__
        if "_parameters" in d:
            p = d["_parameters"]
            if name in p:
                return p[name]
        if "_buffers" in d:
            b = d["_buffers"]
            if name in b:
                return b[name]
        if "_modules" in d:
            m = d["_modules"]
            if name in m:
                return m[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        def remove_from(*dicts_or_sets):
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(ember.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = self.__dict__.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                    "(ember.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = self.__dict__.get("_buffers")
                is_buf = isinstance(value, Tensor) and value.__dict__.get("_is_buffer", False)
                if is_buf or (buffers is not None and name in buffers):
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        "(ember.nn.Buffer, ember.Tensor or None expected)")
                    if is_buf:
                        persistent = value.__dict__.get("_buffer_persistent", True)
                    else:
                        persistent = name not in self._non_persistent_buffers_set
                    if buffers is None:
                        raise AttributeError("cannot assign buffer before Module.__init__() call")
                    remove_from(self.__dict__, self._parameters, self._modules)
                    self.register_buffer(name, value, persistent)
                else:
                    object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        module_attrs = dir(self.__class__)
        attrs = list(self.__dict__.keys())
        parameters = list(self._parameters.keys())
        modules = list(self._modules.keys())
        buffers = list(self._buffers.keys())
        keys = module_attrs + attrs + parameters + modules + buffers
        keys = [key for key in keys if not key[0].isdigit()]
        return sorted(set(keys))

    def __setstate__(self, state):
        self.__dict__.update(state)
        for k, default in (("_forward_pre_hooks_with_kwargs", OrderedDict()), ("_forward_hooks_with_kwargs", OrderedDict()),
                           ("_forward_hooks_always_called", OrderedDict()), ("_backward_pre_hooks", OrderedDict()),
                           ("_state_dict_pre_hooks", OrderedDict()),
                           ("_load_state_dict_post_hooks", OrderedDict()),
                           ("_non_persistent_buffers_set", set())):
            if k not in self.__dict__:
                self.__dict__[k] = default

    # ------------------------------------------------------------------ hooks
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        handle = RemovableHandle(self._forward_hooks, extra_dict=[self._forward_hooks_with_kwargs,
                                                                  self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output) -> tuple | None``; ``grad_input`` covers the tensor
        positional inputs of ``forward`` (``None`` where an input needs no gradient)."""
        return add_hook(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output) -> tuple | None``, run before the gradient w.r.t. inputs exists."""
        return add_hook(self._backward_pre_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        raise RuntimeError("ember.nn.Module.register_backward_hook (the deprecated non-full backward hook) is "
                           "not supported; use register_full_backward_hook")

    def register_state_dict_pre_hook(self, hook):
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook):
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    _register_state_dict_hook = register_state_dict_post_hook

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """torch's internal form: ``hook(state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)``, with the module prepended when ``with_module``."""
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = _HookWithModule(hook, self) if with_module else hook
        return handle

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)``, as torch's public API (the module comes first)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    # ------------------------------------------------------------------ calling
    def _call_impl(self, *args, **kwargs):
        forward = self.forward
        glob = (_global_forward_pre_hooks or _global_forward_hooks) and not self._no_global_hooks
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                or self._backward_pre_hooks or glob):
            return forward(*args, **kwargs)

        called_always = False
        result = None
        pre_hooks = list(self._forward_pre_hooks.items())
        post_hooks = list(self._forward_hooks.items())
        always = self._forward_hooks_always_called
        with_kw = self._forward_hooks_with_kwargs
        if glob:
            pre_hooks = list(_global_forward_pre_hooks.items()) + pre_hooks
            post_hooks = list(_global_forward_hooks.items()) + post_hooks
            always = {**_global_forward_hooks_always_called, **always}
            with_kw = {**_global_forward_hooks_with_kwargs, **with_kw}
        try:
            for hook_id, hook in pre_hooks:
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    res = hook(self, args, kwargs)
                    if res is not None:
                        if isinstance(res, tuple) and len(res) == 2:
                            args, kwargs = res
                        else:
                            raise RuntimeError("forward pre-hook must return None or a tuple of "
                                               f"(new_args, new_kwargs), but got {res}.")
                else:
                    res = hook(self, args)
                    if res is not None:
                        args = res if isinstance(res, tuple) else (res,)

            bw_state = None
            if (self._backward_hooks or self._backward_pre_hooks):
                from ... import is_grad_enabled
                if is_grad_enabled():
                    bw_state = _BackwardHookState(self, list(self._backward_hooks.values()),
                                                  list(self._backward_pre_hooks.values()),
                                                  len(_tensor_positions(args)))
                    args = self._wrap_inputs(bw_state, args)

            result = forward(*args, **kwargs)

            for hook_id, hook in post_hooks:
                if hook_id in always:
                    called_always = True
                if hook_id in with_kw:
                    res = hook(self, args, kwargs, result)
                else:
                    res = hook(self, args, result)
                if res is not None:
                    result = res

            if bw_state is not None:
                result = self._wrap_outputs(bw_state, result)
            return result
        except Exception:
            if always and not called_always:
                for hook_id, hook in post_hooks:
                    if hook_id in always:
                        try:
                            if hook_id in with_kw:
                                hook(self, args, kwargs, result)
                            else:
                                hook(self, args, result)
                        except Exception:
                            pass
            raise

    def _wrap_inputs(self, state, args):
        global _HOOK_FNS
        if _HOOK_FNS is None:
            _HOOK_FNS = _backward_hook_functions()
        pos = _tensor_positions(args)
        if not any(args[i].requires_grad for i in pos):
            return args
        state.input_wrapped = True
        new = _HOOK_FNS[1].apply(state, *[args[i] for i in pos])
        new = new if isinstance(new, tuple) else (new,)
        args = list(args)
        for i, t in zip(pos, new):
            args[i] = t
        return tuple(args)

    def _wrap_outputs(self, state, result):
        global _HOOK_FNS
        if _HOOK_FNS is None:
            _HOOK_FNS = _backward_hook_functions()
        single = isinstance(result, Tensor)
        seq = (result,) if single else result
        if not isinstance(seq, (tuple, list)):
            return result
        pos = [i for i in _tensor_positions(seq) if seq[i].requires_grad]
        if not pos:
            return result
        new = _HOOK_FNS[0].apply(state, *[seq[i] for i in pos])
        new = new if isinstance(new, tuple) else (new,)
        out = list(seq)
        for i, t in zip(pos, new):
            out[i] = t
        if single:
            return out[0]
        return type(seq)(out) if isinstance(seq, tuple) and type(seq) is tuple else (
            type(seq)(*out) if isinstance(seq, tuple) else out)

    def __call__(self, *args, **kwargs):
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def compile(self, *args, **kwargs):
        """Compile this module's call with ``ember.compile`` (in place, like ``torch.nn.Module.compile``)."""
        try:
            from ...dynamo import compile as _compile
        except ImportError:
            raise RuntimeError("ember.compile is not available yet (ember.dynamo has not landed), so "
                               "Module.compile() cannot run") from None
        self._compiled_call_impl = _compile(self._call_impl, *args, **kwargs)

    # ------------------------------------------------------------------ traversal
    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [
            (prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix=prefix, recurse=recurse,
                                       remove_duplicate=remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix=prefix, recurse=recurse,
                                       remove_duplicate=remove_duplicate)

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_children(self):
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    # ------------------------------------------------------------------ modes
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                _zero_(g)

    def apply(self, fn):
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ devices and dtypes
    def _apply(self, fn, recurse=True):
        from ... import no_grad
        if recurse:
            for module in self.children():
                module._apply(fn)
        for key, param in self._parameters.items():
            if param is None:
                continue
            with no_grad():
                new = fn(param)
            if new is not param:
                # keep the Parameter object (optimizers hold it); swap its storage
                param.data = new
            if param.grad is not None:
                with no_grad():
                    g = fn(param.grad)
                if g is not param.grad:
                    param._grad = g
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    def to(self, *args, **kwargs):
        from ... import types as _t
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, _t.dtype):
                dtype = a
            elif isinstance(a, (str, _t.device)):
                device = a
            elif isinstance(a, bool):
                pass
            else:
                raise TypeError(f"to() received an invalid combination of arguments: {a!r}")
        if dtype is not None:
            dtype = _t.as_dtype(dtype)
            if not (dtype.is_floating_point or dtype.is_complex):
                raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but got "
                                f"desired dtype={dtype}")
            if dtype.is_complex:
                warnings.warn("Complex modules are a new feature under active development whose design may change, "
                              "and some modules might not work as expected when using complex tensors as "
                              "parameters or buffers.", stacklevel=2)

        def convert(t):
            # floating and complex tensors take the dtype; integer / bool buffers keep theirs
            cast = t.is_floating_point() or t.is_complex()
            if memory_format is not None and t.dim() in (4, 5):
                # as torch: 4-d and 5-d parameters and buffers take the memory format
                return t.to(device=device, dtype=dtype if cast else None, memory_format=memory_format)
            if dtype is not None and cast:
                return t.to(device=device, dtype=dtype)
            if device is not None:
                return t.to(device=device)
            return t

        def convert_checked(t):
            try:
                return convert(t)
            except NotImplementedError as e:
                if t.device.type == "meta" and str(e) == "Cannot copy out of meta tensor; no data!":
                    raise NotImplementedError(
                        f"{e} Please use ember.nn.Module.to_empty() instead of ember.nn.Module.to() when "
                        "moving module from meta to a different device.") from None
                raise

        return self._apply(convert_checked)

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type):
        return self._apply(lambda t: t.type(dst_type))

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    def to_empty(self, *, device=None, recurse=True):
        from ... import empty_like
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def share_memory(self):
        """Move every parameter (and its grad) and buffer into shared memory in place
        (``Tensor.share_memory_``): processes the module is sent to through
        ``ember.multiprocessing`` then update the same weights (Hogwild)."""
        for m in self.modules():
            for t in list(m._parameters.values()) + list(m._buffers.values()):
                if t is not None:
                    t.share_memory_()
                    if t._grad is not None:
                        t._grad.share_memory_()
        return self

    # ------------------------------------------------------------------ state dict
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        extra = type(self).get_extra_state
        if extra is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if args:
            # legacy positional form: state_dict(destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, local_metadata)
            if res is not None:
                destination = res
        return destination

    def get_extra_state(self):
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        from ... import no_grad
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items())
                       if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected ember.Tensor or '
                                  f'Tensor-like object from checkpoint but received {type(input_param)}')
                continue
            if tuple(input_param.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {input_param.shape} "
                                  f"from checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                if assign:
                    if isinstance(param, Parameter):
                        new = input_param if isinstance(input_param, Parameter) else Parameter(
                            input_param, requires_grad=param.requires_grad)
                        setattr(self, name, new)
                    else:
                        setattr(self, name, input_param)
                else:
                    if param.device.type == "meta" and input_param.device.type != "meta":
                        warnings.warn(f"for {key}: copying from a non-meta parameter in the checkpoint to a meta "
                                      "parameter in the current model, which is a no-op. (Did you mean to pass "
                                      "`assign=True` to assign items in the state dictionary to their "
                                      "corresponding key in the module instead of copying them in place?)")
                    with no_grad():
                        _copy_into(param, input_param)
            except Exception as ex:  # pragma: no cover - mirrors torch's message
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model '
                                  f"are {param.shape} and whose dimensions in the checkpoint are "
                                  f"{input_param.shape}, an exception occurred : {ex.args}.")
        extra_key = prefix + "_extra_state"
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_key:
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True, missing_keys,
                                         unexpected_keys, error_msgs, assign)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_sd = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                    load(child, child_sd, child_prefix)
            incompatible = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                out = hook(module, incompatible)
                if out is not None:
                    raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not "
                                         "expected to return new values, if incompatible_keys need to be "
                                         "modified, it should be done inplace.")

        load(self, state_dict)
        del load
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self.__class__.__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ------------------------------------------------------------------ printing
    def _get_name(self):
        return self.__class__.__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        extra_lines = []
        extra_repr = self.extra_repr()
        if extra_repr:
            extra_lines = extra_repr.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        return main_str + ")"
