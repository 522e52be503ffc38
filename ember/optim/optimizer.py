"""``Optimizer``: parameter groups, per-parameter state, state_dict round trips, step hooks."""
from __future__ import annotations

import copy
import functools
import warnings
from collections import OrderedDict, defaultdict
from itertools import chain

from ..compiler import is_compiling
from ..tensor import Tensor

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks a hyper-parameter every parameter group must give (no default)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

_global_pre_hooks = OrderedDict()
_global_post_hooks = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    from ..nn.modules.module import RemovableHandle
    handle = RemovableHandle(_global_pre_hooks)
    _global_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    from ..nn.modules.module import RemovableHandle
    handle = RemovableHandle(_global_post_hooks)
    _global_post_hooks[handle.id] = hook
    return handle


def _use_grad_for_differentiable(step):
    """Run ``step`` under no_grad (ember optimizers are not differentiable)."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        from ..autograd import no_grad
        with no_grad():
            return step(self, *args, **kwargs)
    return wrapper


def _get_value(x):
    return x.item() if isinstance(x, Tensor) else x


def _check_foreach_fused(foreach, fused):
    """PyTorch's constructor check of the two implementation flags (Adam, AdamW, SGD, Adagrad)."""
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def _check_unsupported(name, fused=None, differentiable=False):
    if fused:
        raise RuntimeError(f"ember.optim.{name}(fused=True) is not supported: ember has no fused optimizer kernels")
    if differentiable:
        raise RuntimeError(f"ember.optim.{name}(differentiable=True) is not supported")


def _check_adam_hparams(lr, eps, betas, weight_decay):
    """The constructor checks of the Adam family, in PyTorch's order and words."""
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _real(t):
    """``t`` as PyTorch's optimizers update it: a complex tensor as its real view
    (``view_as_real``, trailing dimension of (real, imag) pairs, sharing memory), any other
    tensor unchanged. Updating through the view treats the two parts as independent reals, which
    is what makes the element-wise second moments, maxima and signs of Adam, RMSprop, Adagrad,
    Rprop, ... those of the parts (``grad * grad`` of a complex number would mix them)."""
    if t is not None and t.is_complex():
        from .. import view_as_real
        return view_as_real(t)
    return t


def _init_step(state):
    """The per-parameter step counter: a float32 0-d tensor, as in PyTorch's state dicts."""
    from .. import float32, tensor
    state["step"] = tensor(0.0, dtype=float32)


def _step_tensor(st, traced=False):
    """Increment the step counter ``st`` (a state's ``"step"`` tensor) in place; returns the new
    count as a Python float, or, when ``traced`` (under ``ember.compile``), as a 0-d float64
    tensor: reading the value into Python (``.item()``) would break the graph, and float64 keeps
    the bias corrections computed from it in the double precision of the eager formulas."""
    st.add_(1)
    if traced:
        from .. import float64
        return st.to(float64)
    return st.item()


def _marking_opt_called(step):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        self._opt_called = True
        return step(self, *args, **kwargs)
    wrapper._ember_marks_opt_called = True
    return wrapper


class Optimizer:
    """Base class: ``param_groups`` (list of dicts with ``params`` and hyper-parameters) and ``state``
    (a dict from parameter to its state dict)."""

    def __init_subclass__(cls, **kwargs):
        """A ``step`` defined by a user's optimizer class (not ember's, whose steps go through
        :meth:`_run_step`) is wrapped to set ``_opt_called``, the flag the lr schedulers' step-order
        warning reads (PyTorch wraps every optimizer's ``step`` for it)."""
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if callable(step) and not cls.__module__.startswith("ember.optim") \
                and not getattr(step, "_ember_marks_opt_called", False):
            cls.step = _marking_opt_called(step)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()
        if isinstance(params, Tensor):
            # named as PyTorch's torch.typename names a tensor: by its legacy type ("ember.DoubleTensor")
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {params.type()}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    # group options an optimizer pickled by an older version may lack: (name, default) pairs
    # filled in by __setstate__ (PyTorch spells this out in each optimizer's __setstate__)
    _setstate_defaults = ()

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                     "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                self.__dict__[name] = OrderedDict()
        for group in self.__dict__.get("param_groups", ()):
            for k, v in self._setstate_defaults:
                group.setdefault(k, v)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += "\n"
            s += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        s += ")"
        return s

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        extracted, names = [], []
        for p in param_group["params"]:
            if isinstance(p, tuple) and len(p) == 2:
                names.append(p[0])
                extracted.append(p[1])
            else:
                extracted.append(p)
        if names:
            if len(names) != len(extracted):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        param_group["params"] = extracted
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                f"{type(param).__module__}.{type(param).__name__}")
            if not self.defaults.get("differentiable", None) and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        param_set = set()
        for group in self.param_groups:
            param_set.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                raise ValueError("all optimizer param groups should be with/without names.")
        if not param_set.isdisjoint({id(p) for p in param_group["params"]}):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ------------------------------------------------------------------ grads
    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
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
                    g.zero_()

    # ------------------------------------------------------------------ stepping
    def step(self, closure=None):
        raise NotImplementedError(f"{type(self).__name__}.step is not implemented")

    def _run_step(self, closure):
        """Shared ``step`` body: hooks around ``self._step(closure)``."""
        self._opt_called = True   # read by the lr schedulers' step-order warning
        for hook in chain(_global_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            res = hook(self, (closure,) if closure is not None else (), {})
            if res is not None:
                raise RuntimeError(f"{hook} must return None or a tuple of (new_args, new_kwargs), but got {res}.")
        loss = None
        if closure is not None:
            from ..autograd import enable_grad
            with enable_grad():
                loss = closure()
        from ..autograd import no_grad
        with no_grad():
            for group in self.param_groups:
                self._check_sparse_grads(group)
                self._check_capturable(group)
                self._update_group(group)
        for hook in chain(self._optimizer_step_post_hooks.values(), _global_post_hooks.values()):
            hook(self, (closure,) if closure is not None else (), {})
        return loss

    def _update_group(self, group):
        raise NotImplementedError

    # PyTorch's error for a sparse gradient (``nn.Embedding(sparse=True)``) where the update has no
    # sparse form; None where the optimizer takes sparse gradients (SGD, Adagrad, SparseAdam)
    _sparse_grad_error = None

    def _check_sparse_grads(self, group):
        # (not traced: ember.compile refuses sparse tensors, so the frame would run eagerly and
        # check here; the loop over every parameter would only lengthen a compiled step's trace)
        if self._sparse_grad_error and not is_compiling() and \
                any(p.grad is not None and p.grad.is_sparse for p in group["params"]):
            raise RuntimeError(self._sparse_grad_error)

    # capturable=True: what PyTorch's device check names, and whether its list has "xla"
    _capturable_what = "params and state_steps"
    _capturable_xla = True

    def _check_capturable(self, group):
        """``capturable=True`` (CUDA-graph capturable state) needs every stepped parameter on a
        graph-capturing device; PyTorch asserts it at each eager step (``ember.compile`` leaves
        it to the compiler, as ``torch.compile`` does). On CPU that is PyTorch's AssertionError,
        with its message, instead of silently taking a flag that cannot apply."""
        if not group.get("capturable") or is_compiling():
            return
        devices = ["cuda", "xpu", "hpu", "privateuseone"] + (["xla"] if self._capturable_xla else [])
        if any(p.grad is not None and p.device.type not in devices for p in group["params"]):
            raise AssertionError(f"If capturable=True, {self._capturable_what} must be on supported devices: "
                                 f"{devices}.")

    def register_step_pre_hook(self, hook):
        from ..nn.modules.module import RemovableHandle
        handle = RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        from ..nn.modules.module import RemovableHandle
        handle = RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    def register_state_dict_pre_hook(self, hook, prepend=False):
        from ..nn.modules.module import add_hook
        return add_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        from ..nn.modules.module import add_hook
        return add_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        from ..nn.modules.module import add_hook
        return add_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        from ..nn.modules.module import add_hook
        return add_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # ------------------------------------------------------------------ state dict
    def state_dict(self):
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}``; parameters are
        numbered in group order. State tensors are references, not copies (as in PyTorch)."""
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        param_mappings = {}
        start_index = 0

        def pack_group(group):
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        sd = {"state": packed_state, "param_groups": param_groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            res = hook(self, sd)
            if res is not None:
                sd = res
        return sd

    @staticmethod
    def _process_value_according_to_param_policy(param, value, param_id, param_groups, key=None):
        if key == "step":
            return value
        if param.is_floating_point() and value.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)

    def load_state_dict(self, state_dict):
        state_dict = state_dict.copy()
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            res = hook(self, state_dict)
            if res is not None:
                state_dict = res
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        param_lens = (len(g["params"]) for g in groups)
        saved_lens = (len(g["params"]) for g in saved_groups)
        if any(p_len != s_len for p_len, s_len in zip(param_lens, saved_lens)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, param_id=None, key=None):
            if isinstance(value, Tensor):
                return Optimizer._process_value_according_to_param_policy(param, value, param_id, groups, key)
            if isinstance(value, dict):
                return {k: cast(param, v, param_id, key=k) for k, v in value.items()}
            if isinstance(value, (list, tuple)) and not isinstance(value, str):
                return type(value)(cast(param, v, param_id, key=key) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v, param_id=k)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)


def _addcdiv_(p, t1, t2, value):
    """``p.addcdiv_(t1, t2, value=value)`` where ``value`` may be a 0-d tensor (computed from the
    traced step count under ``ember.compile``, or from a tensor ``lr``/``betas``), which
    ``addcdiv_`` does not take. Eagerly its number is read, as PyTorch reads a tensor passed as a
    Scalar; traced (``.item()`` would break the graph), the same arithmetic as separate ops
    (``p + value * (t1 / t2)``, ``value`` converted to ``p``'s dtype)."""
    if isinstance(value, Tensor):
        if not is_compiling():
            return p.addcdiv_(t1, t2, value=value.item())
        return p.add_((t1 / t2).mul_(value))
    return p.addcdiv_(t1, t2, value=value)


def _add_(p, t, alpha):
    """``p.add_(t, alpha=alpha)`` where ``t`` may be a sparse COO gradient or buffer, and ``alpha``
    a 0-d tensor (``-lr`` for ``lr=ember.tensor(...)``).

    Sparse (SGD and Adagrad take ``nn.Embedding(sparse=True)``'s gradients, as PyTorch's):
    ember.sparse has no in-place dense += sparse, so the sparse tensor is made dense first; the
    rows it does not hold add zero, and duplicate indices are summed before the add (PyTorch adds
    them one by one, so the two can differ in the last bit).

    Tensor ``alpha``: eagerly its number is read (as PyTorch reads a tensor Scalar); under
    ``ember.compile`` it multiplies instead (``p + t * alpha``, PyTorch's compiled SGD form), since
    ``.item()`` would break the graph -- and a scheduler changing the tensor then needs no
    recompile."""
    if t.is_sparse:
        t = t.to_dense()
    if isinstance(alpha, Tensor):
        if not is_compiling():
            return p.add_(t, alpha=alpha.item())
        return p.add_(t * alpha)
    return p.add_(t, alpha=alpha)


def _addcmul_(p, t1, t2, value):
    """``p.addcmul_(t1, t2, value=value)``, ``value`` possibly a 0-d tensor (``1 - beta2`` for
    ``betas`` given as tensors, as PyTorch allows): as :func:`_addcdiv_`."""
    if isinstance(value, Tensor):
        if not is_compiling():
            return p.addcmul_(t1, t2, value=value.item())
        return p.add_((t1 * t2).mul_(value))
    return p.addcmul_(t1, t2, value=value)
