"""ember.autograd: the reverse-mode engine and its user API (mirrors torch.autograd)."""
from . import forward_ad, functional, graph, profiler
from .anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad
from .function import Function, FunctionCtx, InplaceFunction, NestedIOFunction, once_differentiable
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)
from .graph import Node, saved_tensors_hooks, save_on_cpu
from .gradcheck import gradcheck, gradgradcheck, GradcheckError

from . import profiler_legacy, profiler_util, variable as _variable_module
from ._switches import (_force_original_view_tracking, _unsafe_preserve_version_counter, enforce_grad_layout_policy,
                        is_multithreading_enabled, is_view_replay_enabled, set_multithreading_enabled)
from .graph import SavedTensor
from .variable import Variable
from ..overrides import handle_torch_function, has_torch_function, is_tensor_like
from ..profiler import ProfilerActivity
from ..profiler._kineto_compat import DeviceType, ProfilerConfig, ProfilerState, kineto_available

graph.saved_tensors_hooks = saved_tensors_hooks
graph.Node = Node
from . import _graph_api  # noqa: E402
for _name in _graph_api.__all__:
    setattr(graph, _name, getattr(_graph_api, _name))
del _name


def _is_checkpoint_valid():
    """False while a backward pass runs only part of the graph (``autograd.grad``,
    ``backward(inputs=...)``): a reentrant checkpoint's backward cannot run its own backward then."""
    from .engine import CURRENT_PASS
    return not CURRENT_PASS[3]


def _push_saved_tensors_default_hooks(pack_hook, unpack_hook):
    """Enter a ``saved_tensors_hooks`` pair without a ``with`` block (pair with the pop)."""
    saved_tensors_hooks(pack_hook, unpack_hook).__enter__()


def _pop_saved_tensors_default_hooks():
    if not graph._SavedHooks.stack:
        raise RuntimeError("_pop_saved_tensors_default_hooks(): no saved_tensors_hooks are active")
    graph._SavedHooks.stack.pop()


def _profiler_enabled():
    """Whether an ember profiler is recording (on any thread)."""
    from ..profiler import _ACTIVE
    return bool(_ACTIVE)


def _supported_activities():
    from ..profiler._kineto_compat import supported_activities
    return supported_activities()


def variable(*args, **kwargs):
    """torch's deprecated ``torch.autograd.variable(...)`` function (it shadows the module name,
    as in torch; ``from ember.autograd.variable import Variable`` still imports the module)."""
    raise RuntimeError("torch.autograd.variable(...) is deprecated, use torch.tensor(...) instead")


variable.Variable = Variable     # the name FX-style codegen writes: ember.autograd.variable.Variable

__all__ = ["backward", "grad", "Function", "FunctionCtx", "once_differentiable", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "set_detect_anomaly", "detect_anomaly", "functional", "profiler",
           "graph", "Node", "saved_tensors_hooks", "forward_ad"]
