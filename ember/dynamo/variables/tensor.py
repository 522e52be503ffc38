"""Tensors: an FX node plus an example value (see ``example_value.py``)."""
from __future__ import annotations

import operator

from ..._torch_function import DISPATCH_CLASSES as _DISPATCH_CLASSES
from ...tensor import Tensor
from ... import types as _t
from .. import config as _config
from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from ...fx.experimental.symbolic_shapes import SymInt

# Tensor methods whose result is a Python value computed from metadata only.
META_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous",
                "is_floating_point", "element_size", "is_complex", "get_device", "is_signed"}
META_ATTRS = {"shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "is_meta", "requires_grad",
              "itemsize", "layout", "is_sparse", "nbytes"}
# Tensor-valued properties recorded as getattr nodes.
TENSOR_ATTRS = {"T", "mT", "H", "mH", "real"}
# Methods that read data into Python, touch autograd state or storage identity: never traced.
BLOCKED_METHODS = {"item", "tolist", "numpy", "backward", "register_hook", "retain_grad", "data_ptr",
                   "storage_offset", "untyped_storage", "storage", "equal", "allclose", "is_nonzero",
                   "__bool__", "__int__", "__float__", "__index__", "__len__", "__iter__", "__repr__",
                   "__str__", "__format__", "__array__", "__reduce_ex__", "__setstate__", "__deepcopy__",
                   "pin_memory", "share_memory_", "record_stream", "set_", "resize_", "resize_as_",
                   "register_post_accumulate_grad_hook", "is_set_to", "_version", "tensor_split_indices",
                   # a __torch_function__ subclass's handlers would run on fakes at trace time and
                   # the result's class would be lost: eager (ember/_torch_function.py)
                   "as_subclass"}


def _detach_intermediate(tx, tv) -> bool:
    """``y.detach_()`` of a tensor the frame computed (no source: not an input, not reachable
    from outside) that is no view: the tracker -- every reference to the Python object ``y``
    -- becomes ``y.detach()``, which is what the in-place detach does to the object. Views of
    ``y`` taken earlier keep their history, as in eager. False (a graph break, as before) for an
    input or a view, whose autograd state outside the graph would have to change too."""
    if tv.source is not None or tv.cls is not Tensor or getattr(tv.example, "_base", None) is not None:
        return False
    res = tx.output.call_method("detach", [tv], {})
    tv.node, tv.example = res.node, res.example
    return True


def _subclass_method(cls, name):
    """The plain function ``name`` that Tensor subclass ``cls`` defines itself (not one of the
    protocol's routed Tensor methods), or None; the class is guarded by the tensor's guards."""
    import inspect
    import types
    attr = inspect.getattr_static(cls, name, None)
    if isinstance(attr, types.FunctionType) and not attr.__qualname__.startswith("Tensor.") \
            and attr is not inspect.getattr_static(Tensor, name, None):
        return attr
    return None


class TensorVariable(VariableTracker):
    def __init__(self, node, example, source=None, cls=Tensor):
        self.node = node
        self.example = example
        self.source = source
        if cls is Tensor and example.__class__ in _DISPATCH_CLASSES:
            cls = example.__class__       # an op's result that is a wrapper subclass (subclass_inputs.py)
        self.cls = cls
        node.meta["example_value"] = example

    def python_type(self):
        return self.cls

    def truthy(self, tx):
        raise Unsupported("data-dependent control flow: the truth value of a tensor depends on its data")

    def as_proxy(self):
        return self.node

    @property
    def ndim(self):
        return self.example.ndim

    def unpack(self, tx):
        if self.example.ndim == 0:
            raise Unsupported("iterating over a 0-d tensor")
        res = tx.output.call_method("unbind", [self, ConstantVariable(0)], {})
        return res.items

    def var_getattr(self, tx, name):
        ex = self.example
        if self.cls is not Tensor and self.cls is not type(ex):
            own = _subclass_method(self.cls, name)    # a method a __torch_function__ subclass defines
            if own is not None:
                from .functions import UserFunctionVariable, UserMethodVariable
                return UserMethodVariable(UserFunctionVariable(own), self)
        if name == "shape":
            return size_variable(ex.shape)
        if name == "__class__":
            # ``x.__class__ is ember.Tensor``: as ``type(x)`` (the class the trace knows)
            from .objects import ClassVariable
            return ClassVariable(self.python_type())
        if name in getattr(self.cls, "_ember_dynamo_meta_attrs", ()):
            # layout metadata a wrapper subclass fixes per trace (DTensor.placements / device_mesh)
            v = getattr(ex, name)
            return tuple_of_constants(v) if type(v) is tuple else ConstantVariable(v)
        if name in META_ATTRS:
            return ConstantVariable(getattr(ex, name))
        if name in TENSOR_ATTRS:
            return tx.output.call_function(getattr, [self, ConstantVariable(name)], {})
        if name in BLOCKED_METHODS and callable(getattr(type(ex), name, None)):
            return TensorMethodVariable(self, name)   # calling it is unsupported (a graph break there)
        if name == "grad" and self.source is not None:
            return _input_grad(tx, self)
        if name == "data":
            # x.data: x's memory as a tensor that does not require grad, like x.detach() (an
            # in-place write through it reaches x; aot writes it back)
            return TensorMethodVariable(self, "detach").call_function(tx, [], {})
        if name in ("grad_fn", "is_leaf") and not ex.requires_grad:
            # a tensor that does not require grad (guarded for inputs, traced for the rest) has
            # no grad_fn and is a leaf (zero_grad(set_to_none=False) asks)
            return ConstantVariable(None if name == "grad_fn" else True)
        if name in ("grad", "data", "grad_fn", "is_leaf", "_base", "_version", "names"):
            raise Unsupported(f"Tensor.{name} is autograd/storage state")
        attr = getattr(type(ex), name, None)
        if attr is None or isinstance(attr, property):
            raise Unsupported(f"Tensor attribute {name}")
        return TensorMethodVariable(self, name)

    def call_method(self, tx, name, args, kwargs):
        return TensorMethodVariable(self, name).call_function(tx, args, kwargs)

    def reconstruct(self, out):
        return out.tensor_output(self)

    def __repr__(self):
        return f"TensorVariable({self.node.name}, {tuple(self.example.shape)}, {self.example.dtype})"


class TensorMethodVariable(VariableTracker):
    def __init__(self, tensor, name):
        self.tensor, self.name = tensor, name

    def call_function(self, tx, args, kwargs):
        name = self.name
        if name == "item" and _config.capture_scalar_outputs:
            from .sym_scalar import capture_item     # a symbolic scalar instead of a break
            return capture_item(tx, self.tensor, args, kwargs)
        if name == "register_hook":
            from .tensor_hooks import register_hook        # captured when the hook is pure
            return register_hook(tx, self.tensor, args, kwargs)
        if name == "backward":
            from .engine_inputs import check_engine_inputs
            check_engine_inputs(args[3] if len(args) > 3 else kwargs.get("inputs"), "Tensor.backward()")
        if name in BLOCKED_METHODS:
            raise Unsupported(f"Tensor.{name}() reads tensor data or autograd state")
        if name == "detach_" and not args and not kwargs and _detach_intermediate(tx, self.tensor):
            return self.tensor
        if name == "type" and not args and not kwargs:
            return ConstantVariable(self.tensor.example.type())     # 'torch.FloatTensor': metadata
        if name in META_METHODS:
            if not all(a.is_python_constant() for a in list(args) + list(kwargs.values())):
                raise Unsupported(f"Tensor.{name} with non-constant arguments")
            if name in ("numel", "nelement") and not args and not kwargs:
                n = 1
                for s in self.tensor.example.shape:   # keeps a symbolic product symbolic
                    n = n * s
                return ConstantVariable(n)
            res = getattr(self.tensor.example, name)(*[a.as_python_constant() for a in args],
                                                     **{k: v.as_python_constant() for k, v in kwargs.items()})
            if isinstance(res, tuple):
                return size_variable(res) if name == "size" else tuple_of_constants(res)
            return ConstantVariable(res)
        if name in ("requires_grad_", "detach_") and _autograd_noop(self.tensor.example, name, args, kwargs):
            # zero_grad(set_to_none=False): g.requires_grad_(False) on a gradient that has no
            # grad: nothing changes (one that would change breaks the graph: output_graph._call)
            return self.tensor
        scaled = _scaled_by_unspec(tx, self.tensor, name, args, kwargs)
        if scaled is not None:
            return scaled
        if name == "__getitem__":
            return tx.output.call_function(operator.getitem, [self.tensor] + list(args), kwargs)
        if name == "__setitem__":
            tx.output.call_function(operator.setitem, [self.tensor] + list(args), kwargs, returns_none=True)
            return ConstantVariable(None)
        return tx.output.call_method(name, [self.tensor] + list(args), kwargs)

    def __repr__(self):
        return f"TensorMethodVariable({self.name})"


# x.add(y, alpha=a), x.addcmul(t1, t2, value=a), ...: the kwarg that scales the other operand(s)
_SCALED_KWARG = {"add": "alpha", "add_": "alpha", "sub": "alpha", "sub_": "alpha", "addcmul": "value",
                 "addcmul_": "value", "addcdiv": "value", "addcdiv_": "value"}


def _scaled_by_unspec(tx, tensor, name, args, kwargs):
    """``p.add_(d, alpha=-lr)`` with ``lr`` an unspecialized number (a scheduled learning rate):
    the op takes a Python number there, so reading it would specialise the graph on its value.
    Traced as the same arithmetic with the number a graph input instead: ``p.add_(d * -lr)``,
    ``x.addcmul(t1, t2, value=v)`` as ``x.add((t1 * t2) * v)``, ``addcdiv`` with ``t1 / t2``
    (the eager kernels compute ``x + v * (t1 op t2)`` in the tensors' dtype: the same values)."""
    from ..output_graph import UnspecFloatVariable
    key = _SCALED_KWARG.get(name)
    v = kwargs.get(key) if key else None
    if not isinstance(v, UnspecFloatVariable) or v._guarded or not tensor.example.dtype.is_floating_point:
        return None
    n_ops = 1 if name.startswith(("add_", "add", "sub")) and not name.startswith("addc") else 2
    if len(args) != n_ops or set(kwargs) != {key} or not all(isinstance(a, TensorVariable) for a in args):
        return None
    out = tx.output
    other = args[0]
    if n_ops == 2:
        other = out.call_method("mul" if name.startswith("addcmul") else "div", [args[0], args[1]], {})
    other = out.call_method("mul", [other, v], {})
    base = "sub" if name.startswith("sub") else "add"
    return out.call_method(base + ("_" if name.endswith("_") else ""), [tensor, other], {})


def _autograd_noop(ex, name, args, kwargs) -> bool:
    """Whether ``ex.requires_grad_(flag)`` / ``ex.detach_()`` leaves ``ex`` as it is."""
    if name == "detach_":
        return not args and not kwargs and not ex.requires_grad and ex.grad_fn is None
    vals = list(args) + list(kwargs.values())
    if len(vals) > 1 or (kwargs and set(kwargs) != {"requires_grad"}):
        return False
    if vals and not vals[0].is_python_constant():
        return False
    flag = vals[0].as_python_constant() if vals else True
    return bool(flag) == bool(ex.requires_grad) and ex.grad_fn is None


def _input_grad(tx, tv):
    """``x.grad`` of a graph input: read through ``x``'s source at run time (a tensor input, or
    None, guarded like any outside value); an optimizer's step reads every parameter's grad."""
    from ..source import AttrSource
    from .builder import wrap
    out = tx.output
    for src, t in zip(out.input_sources, out.input_values):
        if src == tv.source:
            written = out.attr_overlay.get((id(t), "grad"))
            if written is not None:
                return written           # assigned earlier in the frame (p.grad = None)
            return wrap(tx, t.grad, AttrSource(src, "grad"))
    raise Unsupported("Tensor.grad of a tensor that is not a graph input")


def size_variable(shape):
    from .lists import TupleVariable
    # a symbolic size (SymInt) stays symbolic: arithmetic on it folds into size expressions,
    # decisions on it record ShapeEnv guards, and passed to an op it becomes a sym_size node
    return TupleVariable([ConstantVariable(s if isinstance(s, SymInt) else int(s)) for s in shape],
                         cls=_t.Size)


def tuple_of_constants(t):
    from .lists import TupleVariable
    return TupleVariable([ConstantVariable(v) for v in t])
