"""Tensor-parallel styles: how one module's parameters and activations are laid out.

A style is applied with ``distribute_module``: its partition function shards the parameters,
and its input/output functions turn plain activations into DTensors of the layout the sharded
computation needs and back (``use_local_output``)."""
from __future__ import annotations

from functools import partial

import ember.nn as nn

from .._api import DTensor, distribute_tensor
from .._module import distribute_module
from ..placement_types import Placement, Replicate, Shard


class ParallelStyle:
    """Base of the tensor-parallel styles (``_apply(module, device_mesh)`` parallelizes a module)."""

    src_data_rank = 0

    def _apply(self, module, device_mesh):
        raise NotImplementedError(f"{type(self).__name__} must implement _apply")


def _as_dtensor(x, mesh, layout, desired):
    """Activation ``x`` as a DTensor of ``desired`` layout (a plain tensor is this rank's piece
    under ``layout``)."""
    if not isinstance(x, DTensor):
        x = DTensor.from_local(x, mesh, (layout,), run_check=False)
    if desired is not None and x.placements != (desired,):
        x = x.redistribute(mesh, (desired,))
    return x


def _check_layout(layout, what):
    if layout is not None and not isinstance(layout, Placement):
        raise TypeError(f"{what}: expected a Placement (Shard/Replicate), got {layout!r}")
    return layout


def _distribute_param(module, name, mesh, placements, src_data_rank):
    p = getattr(module, name)
    if p is None or isinstance(p, DTensor):
        return
    module.register_parameter(name, nn.Parameter(
        distribute_tensor(p.data, mesh, placements, src_data_rank=src_data_rank), requires_grad=p.requires_grad))


class _LinearStyle(ParallelStyle):
    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = (_check_layout(input_layouts, type(self).__name__) or self._default_in,)
        self.output_layouts = (_check_layout(output_layouts, type(self).__name__) or self._default_out,)
        self.use_local_output = use_local_output

    def _prepare_input(self, desired, mod, inputs, mesh):
        x = inputs[0]
        x = _as_dtensor(x, mesh, self.input_layouts[0], desired)
        return (x,) + tuple(inputs[1:])

    def _prepare_output(self, mod, outputs, mesh):
        if outputs.placements != self.output_layouts:
            outputs = outputs.redistribute(mesh, self.output_layouts)
        return outputs.to_local() if self.use_local_output else outputs

    def _apply(self, module, device_mesh):
        if device_mesh.ndim != 1:
            raise ValueError(f"{type(self).__name__}: tensor parallelism needs a 1-D DeviceMesh, got "
                             f"{device_mesh.ndim}-D (slice the TP dim out of it: mesh['tp'])")
        if isinstance(module, nn.Linear):
            partition, desired = self._partition_linear, self._linear_input
        elif isinstance(module, nn.Embedding):
            partition, desired = self._partition_embedding, self._embedding_input
        else:
            raise NotImplementedError(f"{type(self).__name__} currently only support nn.Linear and nn.Embedding!")
        return distribute_module(module, device_mesh, partition,
                                 partial(self._prepare_input, desired), self._prepare_output)

    def __repr__(self):
        return (f"{type(self).__name__}(input_layouts={self.input_layouts}, output_layouts={self.output_layouts}, "
                f"use_local_output={self.use_local_output})")


class ColwiseParallel(_LinearStyle):
    """Linear: weight Shard(0) (output features), bias Shard(0); input Replicate, output Shard(-1).
    Embedding: weight Shard(1) (embedding dim)."""

    _default_in = Replicate()
    _default_out = Shard(-1)
    _linear_input = Replicate()
    _embedding_input = Replicate()

    def _partition_linear(self, name, module, mesh):
        for pname in ("weight", "bias"):
            _distribute_param(module, pname, mesh, [Shard(0)], self.src_data_rank)

    def _partition_embedding(self, name, module, mesh):
        _distribute_param(module, "weight", mesh, [Shard(1)], self.src_data_rank)


class RowwiseParallel(_LinearStyle):
    """Linear: weight Shard(1) (input features), bias Replicate; input Shard(-1), output
    Replicate (the partial sums reduced). Embedding: weight Shard(0) (vocabulary)."""

    _default_in = Shard(-1)
    _default_out = Replicate()
    _linear_input = Shard(-1)
    _embedding_input = Replicate()

    def _partition_linear(self, name, module, mesh):
        _distribute_param(module, "weight", mesh, [Shard(1)], self.src_data_rank)
        _distribute_param(module, "bias", mesh, [Replicate()], self.src_data_rank)

    def _partition_embedding(self, name, module, mesh):
        _distribute_param(module, "weight", mesh, [Shard(0)], self.src_data_rank)


class SequenceParallel(ParallelStyle):
    """Norm/dropout layers run on sequence shards: parameters Replicate, input and output
    Shard(sequence_dim)."""

    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False):
        self.sequence_sharding = (Shard(sequence_dim),)
        self.use_local_output = use_local_output

    def _partition(self, name, module, mesh):
        for pname, p in list(module.named_parameters(recurse=False)):
            _distribute_param(module, pname, mesh, [Replicate()], self.src_data_rank)

    def _prepare_input(self, mod, inputs, mesh):
        x = inputs[0]
        if isinstance(x, DTensor):
            if x.placements != self.sequence_sharding:
                x = x.redistribute(mesh, self.sequence_sharding)
        else:
            x = DTensor.from_local(x, mesh, self.sequence_sharding, run_check=False)
        return (x,) + tuple(inputs[1:])

    def _prepare_output(self, mod, outputs, mesh):
        return outputs.to_local() if self.use_local_output else outputs

    def _apply(self, module, device_mesh):
        return distribute_module(module, device_mesh, self._partition, self._prepare_input, self._prepare_output)


def _layouts(x):
    if x is None:
        return None
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


class PrepareModuleInput(ParallelStyle):
    """Convert a module's positional (and keyword) inputs to DTensors of the desired layouts."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None, input_kwarg_layouts=None,
                 desired_input_kwarg_layouts=None, use_local_output=False):
        self.input_layouts = _layouts(input_layouts)
        self.desired_input_layouts = _layouts(desired_input_layouts)
        if (self.input_layouts is None) != (self.desired_input_layouts is None) or (
                self.input_layouts is not None and len(self.input_layouts) != len(self.desired_input_layouts)):
            raise AssertionError("input_layouts and desired_input_layouts should have same length!")
        self.input_kwarg_layouts = dict(input_kwarg_layouts or {})
        self.desired_input_kwarg_layouts = dict(desired_input_kwarg_layouts or {})
        if set(self.input_kwarg_layouts) != set(self.desired_input_kwarg_layouts):
            raise AssertionError("input_kwarg_layouts and desired_input_kwarg_layouts should have same keys!")
        self.use_local_output = use_local_output

    def _one(self, x, layout, desired, mesh):
        if layout is None or x is None:
            return x
        if not isinstance(x, DTensor):
            from ember.tensor import Tensor
            if not isinstance(x, Tensor):
                raise TypeError(f"PrepareModuleInput: expected a tensor input for layout {layout}, got "
                                f"{type(x).__name__}")
            x = DTensor.from_local(x, mesh, (layout,), run_check=False)
        if desired is not None and x.placements != (desired,):
            x = x.redistribute(mesh, (desired,))
        return x.to_local() if self.use_local_output else x

    def _prepare_args(self, inputs, mesh):
        if self.input_layouts is None:
            return inputs
        if len(inputs) != len(self.input_layouts):
            raise ValueError(f"PrepareModuleInput: module inputs and input_layouts should have same length! "
                             f"got {len(inputs)} inputs and {len(self.input_layouts)} layouts")
        return tuple(self._one(x, l, d, mesh) for x, l, d in
                     zip(inputs, self.input_layouts, self.desired_input_layouts))

    def _apply(self, module, device_mesh):
        if self.input_kwarg_layouts:
            def hook(mod, args, kwargs):
                args = self._prepare_args(args, device_mesh)
                kwargs = {k: (self._one(v, self.input_kwarg_layouts[k], self.desired_input_kwarg_layouts[k],
                                        device_mesh) if k in self.input_kwarg_layouts else v)
                          for k, v in kwargs.items()}
                return args, kwargs
            module.register_forward_pre_hook(hook, with_kwargs=True)
        else:
            module.register_forward_pre_hook(lambda mod, args: self._prepare_args(args, device_mesh))
        return module


class PrepareModuleOutput(ParallelStyle):
    """Convert a module's outputs (DTensors, or plain pieces of ``output_layouts``) to the desired layouts."""

    def __init__(self, *, output_layouts, desired_output_layouts, use_local_output=True):
        self.output_layouts = _layouts(output_layouts)
        self.desired_output_layouts = _layouts(desired_output_layouts)
        if len(self.output_layouts) != len(self.desired_output_layouts):
            raise AssertionError("output_layouts and desired_output_layouts should have same length!")
        self.use_local_output = use_local_output

    def _prepare(self, outputs, mesh):
        single = not isinstance(outputs, (tuple, list))
        outs = (outputs,) if single else tuple(outputs)
        if len(outs) != len(self.output_layouts):
            raise ValueError("module outputs and output_layouts should have same length!")
        res = []
        for x, layout, desired in zip(outs, self.output_layouts, self.desired_output_layouts):
            if layout is not None:
                if not isinstance(x, DTensor):
                    x = DTensor.from_local(x, mesh, (layout,), run_check=False)
                if x.placements != (desired,):
                    x = x.redistribute(mesh, (desired,))
                if self.use_local_output:
                    x = x.to_local()
            res.append(x)
        return res[0] if single else type(outputs)(res)

    def _apply(self, module, device_mesh):
        module.register_forward_hook(lambda mod, inputs, outputs: self._prepare(outputs, device_mesh))
        return module
