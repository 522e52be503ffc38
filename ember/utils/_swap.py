"""``ember.utils.swap_tensors(t1, t2)``: exchange two tensors' contents in place, keeping each
Python object's identity -- what ``nn.Module._apply`` / ``load_state_dict(assign=...)`` use so
that references held elsewhere (an optimizer's parameter list) see the new tensor.

An ember tensor is its slots (the backend array, dtype, device, version counter), its
``__dict__`` (autograd state: requires_grad, grad, grad_fn, hooks, AccumulateGrad link, user
attributes) and its class; swapping all three swaps everything. Like torch, a tensor that a
weakref points to cannot be swapped (the weakref would silently follow the other contents).
"""
from __future__ import annotations

import copyreg
import weakref

_TENSOR_SLOTS = ("_data", "dtype", "device", "_vc")
_POISONED = ("Trying to execute AccumulateGrad node that was poisoned by swap_tensors this can happen when you try "
             "to run backward on a tensor that was swapped. For a module m with "
             "`torch.__future__.set_swap_module_params_on_conversion(True)` you should not change the device or "
             "dtype of the module (e.g. `m.cpu()` or `m.half()`) between running forward and backward. To resolve "
             "this, please only change the device/dtype before running forward (or after both forward and "
             "backward).")


def _poison_accumulate_node(t):
    """A graph recorded before the swap would accumulate into the swapped object: its leaf's
    AccumulateGrad node refuses to run instead (torch's behaviour)."""
    ref = t.__dict__.get("_acc")
    node = ref() if ref is not None else None
    if node is not None:
        def error_pre_hook(grad_outputs):
            raise RuntimeError(_POISONED)
        node.register_prehook(error_pre_hook)
        t.__dict__.pop("_acc", None)


def swap_tensors(t1, t2) -> None:
    """Swap ``t1`` and ``t2`` (classes, attributes and data) in place; see the module."""
    from ..tensor import Tensor
    for name, t in (("t1", t1), ("t2", t2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"swap_tensors(): expected {name} to be a Tensor, got {type(t).__name__}")
        if weakref.getweakrefs(t):
            raise RuntimeError(f"Cannot swap {name} because it has weakref associated with it")
    slots1 = set(copyreg._slotnames(type(t1)))
    slots2 = set(copyreg._slotnames(type(t2)))
    if slots1 != slots2:
        raise RuntimeError("Cannot swap t1 and t2 if they have different slots")

    def swap_attr(name):
        tmp = getattr(t1, name)
        setattr(t1, name, getattr(t2, name))
        setattr(t2, name, tmp)

    _poison_accumulate_node(t1)
    _poison_accumulate_node(t2)
    swap_attr("__class__")
    swap_attr("__dict__")
    # the subclass slots, then the tensor's own (its "TensorImpl")
    for slot in sorted(slots1 - set(_TENSOR_SLOTS) - {"__dict__", "__weakref__"}) + list(_TENSOR_SLOTS):
        has1, has2 = hasattr(t1, slot), hasattr(t2, slot)
        if has1 and has2:
            swap_attr(slot)
        elif has1:
            setattr(t2, slot, getattr(t1, slot))
            delattr(t1, slot)
        elif has2:
            setattr(t1, slot, getattr(t2, slot))
            delattr(t2, slot)
