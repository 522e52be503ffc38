"""ember.autograd: the reverse-mode engine and its user API (mirrors torch.autograd)."""
from . import forward_ad, functional, graph, profiler
from .anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad
from .function import Function, FunctionCtx, InplaceFunction, once_differentiable
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)
from .graph import Node, saved_tensors_hooks, save_on_cpu
from .gradcheck import gradcheck, gradgradcheck, GradcheckError

graph.saved_tensors_hooks = saved_tensors_hooks
graph.Node = Node

__all__ = ["backward", "grad", "Function", "FunctionCtx", "once_differentiable", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "set_detect_anomaly", "detect_anomaly", "functional", "profiler",
           "graph", "Node", "saved_tensors_hooks", "forward_ad"]
