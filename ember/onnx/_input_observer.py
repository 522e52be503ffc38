"""``ember.onnx.InputObserver``: learn export inputs and dynamic shapes from real calls.

``with observer(model): model(x1); model(x2)`` records the arguments of the first
``store_n_calls`` calls of ``model.forward``; afterwards ``infer_arguments()`` gives example
inputs (the first call's) and ``infer_dynamic_shapes()`` marks every tensor dimension whose
size differed between the calls as ``Dim.DYNAMIC`` -- ready for ``ember.export.export`` or
``ember.onnx.export``, as torch.onnx.InputObserver.

Supported: calls passing the same arguments (same positions, same keyword names, tensors in
the same nested structure). PyTorch also aligns calls whose argument sets differ (a
``generate`` loop adding ``past_key_values``...); ember refuses those with a clear error."""
from __future__ import annotations

import contextlib
import inspect
import time

__all__ = ["InputObserver"]


class InputObserver:
    def __init__(self, value_if_missing=None):
        self.value_if_missing = dict(value_if_missing or {})
        self.info = None            # [(args, kwargs)] of the recorded calls
        self._latencies = []
        self._outputs = []

    def num_obs(self) -> int:
        """How many calls were recorded."""
        return 0 if not self.info else len(self.info)

    @contextlib.contextmanager
    def __call__(self, model, store_n_calls: int = 3, method_name: str = "forward"):
        if not hasattr(model, method_name):
            raise ValueError(f"Model type {model} does not have a method {method_name!r}.")
        original = getattr(model, method_name)
        had_own = method_name in vars(model)
        if self.info is None:
            self.info = []
        limit = len(self.info) + store_n_calls

        def observed(*args, **kwargs):
            record = len(self.info) < limit
            if record:
                self.info.append((args, dict(kwargs)))
            begin = time.perf_counter()
            out = original(*args, **kwargs)
            if record:
                self._latencies.append(time.perf_counter() - begin)
                self._outputs.append(out)
            return out
        observed.__signature__ = inspect.signature(original)
        setattr(model, method_name, observed)
        try:
            yield self
        finally:
            if had_own:
                setattr(model, method_name, original)
            else:
                delattr(model, method_name)

    def _check_captured(self):
        if not self.info:
            raise RuntimeError("No inputs were captured.")

    def _structure(self):
        from ..utils._pytree import tree_flatten
        self._check_captured()
        flats = [tree_flatten((args, kwargs)) for args, kwargs in self.info]
        spec = flats[0][1]
        for i, (_, other) in enumerate(flats[1:], 1):
            if other != spec:
                raise NotImplementedError(
                    f"ember.onnx.InputObserver: call {i} passed different arguments than call 0 ({other} vs {spec}); "
                    "aligning calls with different argument sets is not supported")
        return [leaves for leaves, _ in flats], spec

    def infer_arguments(self, index_or_args_or_kwargs=None, flat: bool = False):
        """Example inputs for export: the first recorded call's (``index_or_args_or_kwargs``:
        another call's index). A tuple of positional arguments when the calls passed no
        keywords, else a dict naming every argument."""
        self._structure()
        index = 0 if index_or_args_or_kwargs is None else index_or_args_or_kwargs
        if not isinstance(index, int):
            raise NotImplementedError("ember.onnx.InputObserver.infer_arguments: only a call index is supported")
        args, kwargs = self.info[index]
        if flat:
            from ..utils._pytree import tree_leaves
            return tree_leaves((args, kwargs))
        if not kwargs:
            return tuple(args)
        if args:
            self._named(args, kwargs)
        return dict(kwargs)

    def _named(self, args, kwargs):
        raise NotImplementedError("ember.onnx.InputObserver: calls mixing positional and keyword arguments are "
                                  "not supported by infer_arguments; pass all by keyword or all by position")

    def infer_dynamic_shapes(self, set_batch_dimension_for=None):
        """Per argument (a tuple, or a dict for keyword calls), per tensor ``{dim: Dim.DYNAMIC}``
        for each dimension whose size changed between the recorded calls; tensors whose
        dimension 0 is to be a batch dimension regardless: ``set_batch_dimension_for`` True
        (all) or a set of argument positions / names."""
        from ..export import Dim
        from ..tensor import Tensor
        from ..utils._pytree import tree_unflatten
        all_leaves, spec = self._structure()
        first_args, first_kwargs = self.info[0]
        n_args = len(first_args)
        # which argument (position or name) each leaf belongs to
        owner = []
        from ..utils._pytree import tree_leaves
        for i, a in enumerate(first_args):
            owner += [i] * len(tree_leaves(a))
        for k, v in first_kwargs.items():
            owner += [k] * len(tree_leaves(v))
        shapes = []
        for j, leaf in enumerate(all_leaves[0]):
            if not isinstance(leaf, Tensor):
                shapes.append(None)
                continue
            dyn = {}
            sizes = [tuple(call[j].shape) for call in all_leaves if isinstance(call[j], Tensor)]
            if any(len(s) != len(sizes[0]) for s in sizes):
                raise NotImplementedError(f"ember.onnx.InputObserver: argument {owner[j]!r} changed its number of "
                                          f"dimensions between calls ({sizes}); not supported")
            for d in range(len(sizes[0])):
                if len({s[d] for s in sizes}) > 1:
                    dyn[d] = Dim.DYNAMIC
            batch = set_batch_dimension_for is True or (
                isinstance(set_batch_dimension_for, (set, list, tuple)) and owner[j] in set_batch_dimension_for)
            if batch and len(sizes[0]) > 0:
                dyn[0] = Dim.DYNAMIC
                dyn = dict(sorted(dyn.items()))
            shapes.append(dyn)
        args_shapes, kwargs_shapes = tree_unflatten(shapes, spec)
        if not first_kwargs:
            return tuple(args_shapes)
        if n_args:
            self._named(first_args, first_kwargs)
        return dict(kwargs_shapes)

    def check_discrepancies(self, *args, **kwargs):
        raise NotImplementedError("ember.onnx.InputObserver.check_discrepancies (running an exported ONNX model "
                                  "against the recorded outputs) is not supported")
