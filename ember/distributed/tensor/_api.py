"""``DTensor``: a global tensor laid over a ``DeviceMesh`` -- each rank holds its local piece.

Why a wrapper subclass. A DTensor has the global shape/stride/dtype as metadata and keeps the
rank's real data in ``_local_tensor``; every op reaches ``__torch_dispatch__`` (below autograd,
like torch), where ``_dispatch`` picks placements, redistributes inputs, runs the op on the
local pieces and wraps the results. Autograd therefore records on DTensors and gradients come
out as DTensors. ``from_local`` / ``to_local`` / ``redistribute`` are autograd Functions whose
backward moves the gradient back to the forward's input layout (torch's backward placements).
"""
from __future__ import annotations

import copy

import ember
from ember.tensor import Tensor, Parameter
from ember._torch_function import _disabled_torch_function_impl
from ember.autograd import Function

from ._redistribute import redistribute_local
from ._utils import check_mesh, contiguous_strides, local_shape, normalize_placements
from .placement_types import Partial, Replicate, Shard


class DTensorSpec:
    """A DTensor's layout: mesh, placements, and the global shape and stride."""

    __slots__ = ("mesh", "placements", "shape", "stride")

    def __init__(self, mesh, placements, shape, stride=None):
        self.mesh = mesh
        self.placements = tuple(placements)
        self.shape = tuple(int(s) for s in shape)
        self.stride = tuple(stride) if stride is not None else contiguous_strides(self.shape)

    # a __tensor_flatten__ context ember.compile guards on with ``==`` (ember/dynamo/variables/subclass_inputs.py)
    _ember_guard_ctx = True

    def _key(self):
        return (self.mesh, self.placements, self.shape, self.stride)

    def __eq__(self, other):
        if not isinstance(other, DTensorSpec):
            return NotImplemented
        return self is other or self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"DTensorSpec(mesh={self.mesh}, placements={self.placements}, shape={self.shape})"


class DTensor(Tensor):
    """A tensor distributed over a DeviceMesh (torch.distributed.tensor.DTensor)."""

    __torch_function__ = _disabled_torch_function_impl

    # what ember.compile reads from a traced DTensor as constants (its layout, guarded for inputs,
    # fixed by sharding propagation for the rest; dynamo/variables/tensor.py)
    _ember_dynamo_meta_attrs = ("placements", "device_mesh")

    @staticmethod
    def __new__(cls, local_tensor, spec, *, requires_grad=False):
        r = Tensor._make_wrapper_subclass(cls, spec.shape, spec.stride, dtype=local_tensor.dtype,
                                          device=local_tensor.device, requires_grad=requires_grad)
        r._local_tensor = local_tensor
        r._spec = spec
        return r

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from ._dispatch import dispatch
        return dispatch(func, args, kwargs or {})

    # ------------------------------------------------------------------ layout
    @property
    def device_mesh(self):
        return self._spec.mesh

    @property
    def placements(self):
        return self._spec.placements

    def __repr__(self):
        return (f"DTensor(local_tensor={self._local_tensor}, device_mesh={self._spec.mesh}, "
                f"placements={self._spec.placements})")

    __str__ = __repr__

    @property
    def data(self):
        """A DTensor sharing the local piece, outside autograd (Tensor.data's alias holds no data here)."""
        return DTensor(self._local_tensor.detach(), self._spec)

    @data.setter
    def data(self, value):
        """``module.to(dtype)`` and friends swap a parameter's data: adopt the new DTensor's piece and layout."""
        if not isinstance(value, DTensor):
            raise TypeError(f"DTensor.data: expected a DTensor, got {type(value).__name__} (distribute it first)")
        if value.shape != self.shape:
            raise RuntimeError(f"DTensor.data: the new value's global shape {tuple(value.shape)} differs from "
                               f"{tuple(self.shape)}")
        self._local_tensor = value._local_tensor
        self._spec = value._spec
        self._data = value._data
        self.dtype = value.dtype
        self.device = value.device

    def __deepcopy__(self, memo):
        """A copy of the local piece under the same layout (the mesh is shared, not copied)."""
        if id(self) in memo:
            return memo[id(self)]
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                               "deepcopy protocol at the moment.")
        out = DTensor.__new__(type(self), self._local_tensor.detach().clone(), self._spec,
                              requires_grad=self.requires_grad)
        memo[id(self)] = out
        if self.grad is not None:
            out.grad = copy.deepcopy(self.grad, memo)
        return out

    def __tensor_flatten__(self):
        """The inner tensor (this rank's piece) and the context: the layout (mesh, placements,
        global shape and stride). Unlike torch's, requires_grad is not part of it: it is the outer
        tensor's own metadata (guarded as such), and a gradient's structure must equal its
        output's whatever the flags."""
        return ["_local_tensor"], self._spec

    @classmethod
    def __tensor_unflatten__(cls, inner_tensors, flatten_spec, outer_size, outer_stride):
        """The DTensor (of this class: a DTensor parameter stays one) made of ``inner_tensors``'
        piece laid out as ``flatten_spec`` says (ember.compile rebuilds DTensors with it)."""
        spec = flatten_spec
        local = inner_tensors["_local_tensor"]
        if outer_size is not None and tuple(outer_size) != spec.shape:
            spec = DTensorSpec(spec.mesh, spec.placements, outer_size,
                               outer_stride if outer_stride is not None else None)
        return DTensor.__new__(cls, local, spec)

    def __coerce_same_metadata_as_tangent__(self, flatten_spec, expected_type=None):
        """This gradient laid out as the compiled graph's output it belongs to was traced
        (``flatten_spec``: that output's layout): the same global value, redistributed (torch's
        hook; a Replicate gradient of a Partial output becomes Partial addends)."""
        if expected_type is not None and expected_type is not type(self) and not issubclass(expected_type, DTensor):
            return None
        spec = flatten_spec
        if spec.shape != self._spec.shape or spec.mesh != self._spec.mesh:
            return None
        if spec.placements == self.placements:
            return self
        local = redistribute_local(self._local_tensor, self._spec.shape, spec.mesh, self.placements, spec.placements)
        return DTensor(local, DTensorSpec(spec.mesh, spec.placements, spec.shape, spec.stride))

    # ------------------------------------------------------------------ conversions
    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False, shape=None, stride=None):
        """A DTensor whose piece on this rank is ``local_tensor``. ``shape``/``stride`` give the global
        metadata when the pieces are uneven; otherwise it is the local shape scaled by the shard
        counts. ``run_check`` makes Replicate pieces agree (each Replicate mesh dim's first rank's piece
        is broadcast)."""
        if not isinstance(local_tensor, Tensor) or isinstance(local_tensor, DTensor):
            raise TypeError(f"DTensor.from_local: expected local_tensor to be a torch.Tensor, got "
                            f"{type(local_tensor).__name__}")
        if device_mesh is None:
            raise ValueError("DTensor.from_local: device_mesh is required (ember has no mesh context manager)")
        mesh = check_mesh(device_mesh, "DTensor.from_local")
        placements = normalize_placements(placements, mesh, local_tensor.ndim, "DTensor.from_local")
        if shape is None:
            gshape = list(local_tensor.shape)
            for i, p in enumerate(placements):
                if isinstance(p, Shard):
                    gshape[p.dim] *= mesh.size(i)
            if stride is not None:
                raise ValueError("DTensor.from_local: stride given without shape; give both or neither")
        else:
            gshape = list(shape)
            if local_shape(gshape, mesh, placements) != tuple(local_tensor.shape):
                raise ValueError(f"DTensor.from_local: local_tensor of shape {tuple(local_tensor.shape)} is not "
                                 f"this rank's piece of global shape {tuple(gshape)} under {placements}")
        spec = DTensorSpec(mesh, placements, gshape, stride)
        if run_check and any(isinstance(p, Replicate) for p in placements):
            local_tensor = _check_replicas(local_tensor, mesh, placements)
        return _FromLocal.apply(local_tensor, spec)

    def to_local(self, *, grad_placements=None):
        """This rank's piece (differentiable: the gradient becomes a DTensor with
        ``grad_placements``, by default this DTensor's placements)."""
        if not ember.is_grad_enabled():
            return self._local_tensor
        if grad_placements is not None:
            grad_placements = normalize_placements(grad_placements, self.device_mesh, self.ndim,
                                                   "DTensor.to_local")
        return _ToLocal.apply(self, grad_placements)

    def redistribute(self, device_mesh=None, placements=None, *, async_op=False, forward_dtype=None,
                     backward_dtype=None):
        """The same global value laid out as ``placements`` (differentiable). ``async_op``: the
        collectives run at once either way (the result is ready when this returns)."""
        if forward_dtype is not None or backward_dtype is not None:
            raise NotImplementedError("ember.distributed.tensor: redistribute with forward_dtype/backward_dtype "
                                      "is not supported")
        mesh = self.device_mesh if device_mesh is None else check_mesh(device_mesh, "DTensor.redistribute")
        if mesh != self.device_mesh:
            raise NotImplementedError("ember.distributed.tensor: redistribute to a different DeviceMesh "
                                      "is not supported")
        if placements is None:
            raise RuntimeError("placements is needed for redistribute!")
        placements = normalize_placements(placements, mesh, self.ndim, "DTensor.redistribute")
        for p in placements:
            if isinstance(p, Partial) and p not in self.placements:
                raise RuntimeError("Can not redistribute to Partial, redistributing to Partial is for internal use only!")
        if placements == self.placements:
            return self
        return _Redistribute.apply(self, placements)

    def full_tensor(self, *, grad_placements=None):
        """The whole global value on every rank (a plain tensor)."""
        rep = self.redistribute(self.device_mesh, [Replicate()] * self.device_mesh.ndim)
        return rep.to_local(grad_placements=grad_placements)

    @classmethod
    def _make_parameter(cls, data, requires_grad):
        """``nn.Parameter(dtensor)``: a DTensor that is also a Parameter (torch keeps the subclass)."""
        out = DTensor.__new__(_DTensorParameter, data._local_tensor.detach(), data._spec,
                              requires_grad=requires_grad)
        return out


class _DTensorParameter(DTensor, Parameter):
    """What ``nn.Parameter(DTensor)`` makes: a DTensor that modules register as a parameter."""

    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, data=None, requires_grad=True):
        return DTensor._make_parameter(data, requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + DTensor.__repr__(self)

    def __deepcopy__(self, memo):
        return DTensor.__deepcopy__(self, memo)


def _check_replicas(local, mesh, placements):
    """torch's run_check: along each Replicate mesh dim the line's first rank's piece is broadcast,
    so the replicas agree (a differing piece is replaced, not refused)."""
    from . import _collectives as C
    import ember.distributed as dist
    out = local.detach().clone().contiguous()
    for i, p in enumerate(placements):
        if isinstance(p, Replicate) and mesh.size(i) > 1:
            C._record(C.BROADCAST)
            dist.broadcast(out, group=mesh.get_group(i), group_src=0)
    if local.requires_grad:
        with ember.no_grad():
            local.copy_(out)
        return local
    return out


class _FromLocal(Function):
    @staticmethod
    def forward(ctx, local, spec):
        ctx.spec = spec
        return DTensor(local, spec, requires_grad=False)

    @staticmethod
    def backward(ctx, grad):
        spec = ctx.spec
        if not isinstance(grad, DTensor):
            return grad, None
        local = grad._local_tensor
        if grad.placements != spec.placements:
            local = redistribute_local(local, grad._spec.shape, spec.mesh, grad.placements, spec.placements,
                                       is_backward=True)
        return local, None


class _ToLocal(Function):
    @staticmethod
    def forward(ctx, dt, grad_placements):
        ctx.spec = dt._spec
        ctx.grad_placements = grad_placements
        return dt._local_tensor.view_as(dt._local_tensor)

    @staticmethod
    def backward(ctx, grad):
        spec = ctx.spec
        placements = ctx.grad_placements or spec.placements
        return DTensor(grad.contiguous(), DTensorSpec(spec.mesh, placements, spec.shape)), None


class _Redistribute(Function):
    @staticmethod
    def forward(ctx, dt, placements):
        ctx.spec = dt._spec
        local = redistribute_local(dt._local_tensor, dt._spec.shape, dt.device_mesh, dt.placements, placements)
        return DTensor(local, DTensorSpec(dt.device_mesh, placements, dt._spec.shape))

    @staticmethod
    def backward(ctx, grad):
        spec = ctx.spec
        # a Partial input gets a Replicate gradient (torch: converting back to Partial is useless)
        target = tuple(Replicate() if isinstance(p, Partial) else p for p in spec.placements)
        if grad.placements == target:
            return grad, None
        local = redistribute_local(grad._local_tensor, spec.shape, spec.mesh, grad.placements, target)
        return DTensor(local, DTensorSpec(spec.mesh, target, spec.shape)), None


# ---------------------------------------------------------------------- creation
def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0):
    """``tensor`` (the whole value, on every rank) laid out as ``placements``: the value of the
    rank at index ``src_data_rank`` of every mesh dim's group is broadcast first (None: use each
    rank's own -- they must agree)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"distribute_tensor: expected tensor to be a torch.Tensor, got {type(tensor).__name__}")
    if device_mesh is None:
        raise ValueError("distribute_tensor: device_mesh is required (ember has no mesh context manager)")
    mesh = check_mesh(device_mesh, "distribute_tensor")
    if isinstance(tensor, DTensor):
        if tensor.device_mesh != mesh:
            raise ValueError(f"Cannot distribute a DTensor with device mesh {tensor.device_mesh} to a different "
                             f"device mesh {mesh}.")
        p = normalize_placements(placements, mesh, tensor.ndim, "distribute_tensor")
        if p != tensor.placements:
            raise ValueError(f"Cannot distribute a DTensor with placements {tensor.placements} to a different "
                             f"placements {p}. do you want to call `redistribute` instead?")
        return tensor
    placements = normalize_placements(placements, mesh, tensor.ndim, "distribute_tensor")
    for p in placements:
        if isinstance(p, Partial):
            raise RuntimeError("distribute_tensor: Partial placements are not supported (torch refuses them too)")
    requires_grad = tensor.requires_grad
    full = tensor.detach()
    with ember.no_grad():
        if src_data_rank is not None:
            coord = _coordinate_of(mesh, src_data_rank)
            from . import _collectives as C
            full = C.broadcast_from(full, mesh, coord)
        local = redistribute_local(full.contiguous(), tuple(full.shape), mesh,
                                   [Replicate()] * mesh.ndim, placements)
        if local is full or local is tensor:
            local = local.clone()
    spec = DTensorSpec(mesh, placements, tuple(full.shape), tuple(tensor.stride()))
    out = DTensor(local.detach(), spec, requires_grad=requires_grad)
    return out


def _coordinate_of(mesh, group_rank):
    """torch's src_data_rank is a rank within each mesh dim's group (0: the first of every line)."""
    if not isinstance(group_rank, int) or isinstance(group_rank, bool):
        raise TypeError(f"distribute_tensor: src_data_rank must be an int or None, got {group_rank!r}")
    for d in range(mesh.ndim):
        if not 0 <= group_rank < mesh.size(d):
            raise ValueError(f"distribute_tensor: src_data_rank {group_rank} is out of range for mesh dim {d} "
                             f"of size {mesh.size(d)}")
    return tuple(group_rank for _ in range(mesh.ndim))


def _check_layout(layout, what):
    if layout is not None and layout is not ember.strided:
        raise NotImplementedError(f"ember.distributed.tensor.{what}: only layout=torch.strided is supported, "
                                  f"got {layout}")


def _factory(fill, what):
    def make(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None, **kw):
        if kw:
            raise TypeError(f"{what}() got an unexpected keyword argument '{sorted(kw)[0]}'")
        _check_layout(layout, what)
        if len(size) == 1 and isinstance(size[0], (list, tuple, ember.Size)):
            size = tuple(size[0])
        size = tuple(int(s) for s in size)
        if device_mesh is None:
            raise ValueError(f"ember.distributed.tensor.{what}: device_mesh is required")
        mesh = check_mesh(device_mesh, what)
        placements = normalize_placements(placements, mesh, len(size), what)
        lshape = local_shape(size, mesh, placements)
        dt = ember.get_default_dtype() if dtype is None else dtype
        local = fill(lshape, dt)
        for i, p in enumerate(placements):
            if isinstance(p, Partial):
                raise RuntimeError(f"ember.distributed.tensor.{what}: Partial placements are not supported")
        return DTensor(local, DTensorSpec(mesh, placements, size), requires_grad=requires_grad)
    make.__name__ = what
    make.__doc__ = (f"A DTensor of global ``size`` made by ``ember.{what}`` on each rank's local piece "
                    "(random ones draw each piece from that rank's generator).")
    return make


zeros = _factory(lambda s, d: ember.zeros(s, dtype=d), "zeros")
ones = _factory(lambda s, d: ember.ones(s, dtype=d), "ones")
empty = _factory(lambda s, d: ember.empty(s, dtype=d), "empty")


def _random(draw, what):
    """Random factories draw the global value from the mesh's first rank's generator and cut it,
    so replicas agree and the result equals ``ember.<draw>(size)`` on that rank."""
    def make(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None):
        if len(size) == 1 and isinstance(size[0], (list, tuple, ember.Size)):
            size = tuple(size[0])
        _check_layout(layout, what)
        rep = _factory(lambda s, d: draw(s, dtype=d), what)(size, dtype=dtype, device_mesh=device_mesh)
        mesh = rep.device_mesh
        placements = normalize_placements(placements, mesh, rep.ndim, what)
        from . import _collectives as C
        with ember.no_grad():
            full = C.broadcast_from(rep._local_tensor, mesh, _coordinate_of(mesh, 0))
            local = redistribute_local(full, tuple(full.shape), mesh, rep.placements, placements)
            if local is full:
                local = local.clone()
        return DTensor(local, DTensorSpec(mesh, placements, rep.shape), requires_grad=requires_grad)
    make.__name__ = what
    return make


rand = _random(ember.rand, "rand")
randn = _random(ember.randn, "randn")


def full(size, fill_value, *, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None):
    return _factory(lambda s, d: ember.full(s, fill_value, dtype=d), "full")(
        size, requires_grad=requires_grad, dtype=dtype, layout=layout, device_mesh=device_mesh,
        placements=placements)
