"""Random benchmark inputs: ``Fuzzer`` draws parameter sets (``FuzzedParameter``) that satisfy
constraints and builds tensors (``FuzzedTensor``) from them -- sizes, strides (step slicing),
memory layouts (permuted storage) -- so a benchmark covers many shapes, not one.

Draws come from ``numpy.random.RandomState(seed)`` in the same order as PyTorch's fuzzer, so a
seed gives PyTorch's parameters, sizes, steps and dimension orders; tensor values come from
ember's generator, seeded from the same stream, which draws PyTorch's numbers for a seed -- so
the tensors are PyTorch's too.
"""
from __future__ import annotations

import functools
import itertools as it
from collections.abc import Callable
from typing import Any

import numpy as np

import ember

__all__ = ["Fuzzer", "FuzzedParameter", "ParameterAlias", "FuzzedTensor"]

_DISTRIBUTIONS = ("loguniform", "uniform")


class FuzzedParameter:
    """One named parameter: ``uniform`` (ints when both bounds are ints) or ``loguniform`` over
    ``[minval, maxval]``, or a custom ``{value: probability}`` distribution. ``strict=True``
    keeps the first draw when a candidate set is rejected and redrawn."""

    def __init__(self, name: str, minval: int | float | None = None, maxval: int | float | None = None,
                 distribution: str | dict[Any, float] | None = None, strict: bool = False):
        self._name = name
        self._minval = minval
        self._maxval = maxval
        self._distribution = self._check_distribution(distribution)
        self.strict = strict

    @property
    def name(self):
        return self._name

    def sample(self, state):
        if self._distribution == "loguniform":
            return self._loguniform(state)
        if self._distribution == "uniform":
            return self._uniform(state)
        return self._custom_distribution(state)

    def _check_distribution(self, distribution):
        if not isinstance(distribution, dict):
            if distribution not in _DISTRIBUTIONS:
                raise AssertionError(f"Unknown distribution: {distribution}")
            return distribution
        if any(p < 0 for p in distribution.values()):
            raise AssertionError("Probabilities cannot be negative")
        if abs(sum(distribution.values()) - 1) > 1e-5:
            raise AssertionError("Distribution is not normalized")
        if self._minval is not None:
            raise AssertionError("When passing a custom distribution, 'minval' must be None")
        if self._maxval is not None:
            raise AssertionError("When passing a custom distribution, 'maxval' must be None")
        return distribution

    def _loguniform(self, state):
        low = np.log2(self._minval) if self._minval is not None else None
        high = np.log2(self._maxval) if self._maxval is not None else None
        value = int(2 ** state.uniform(low=low, high=high))
        if self._minval is not None and value < self._minval:
            return self._minval
        if self._maxval is not None and value > self._maxval:
            return self._maxval
        return value

    def _uniform(self, state):
        if isinstance(self._minval, int) and isinstance(self._maxval, int):
            return int(state.randint(low=self._minval, high=self._maxval + 1))
        return state.uniform(low=self._minval, high=self._maxval)

    def _custom_distribution(self, state):
        index = state.choice(np.arange(len(self._distribution)), p=tuple(self._distribution.values()))
        return list(self._distribution.keys())[index]


class ParameterAlias:
    """A parameter whose value is another parameter's (e.g. a square matrix: ``k = alias(n)``)."""

    def __init__(self, alias_to):
        self.alias_to = alias_to

    def __repr__(self):
        return f"ParameterAlias[alias_to: {self.alias_to}]"


def dtype_size(dtype) -> int:
    """Bytes per element."""
    if dtype == ember.bool:
        return 1
    if dtype.is_floating_point or dtype.is_complex:
        return int(ember.finfo(dtype).bits / 8)
    return int(ember.iinfo(dtype).bits / 8)


def prod(values, base=1):
    """Product as Python ints (numpy ints would overflow for large allocations)."""
    return functools.reduce(lambda x, y: int(x) * int(y), values, base)


class FuzzedTensor:
    """A tensor built from a parameter set: ``size`` / ``steps`` entries are ints or parameter
    names; a step ``s`` allocates ``s`` times the size and slices every ``s``-th element; with
    probability ``1 - probability_contiguous`` the storage is laid out in a random dimension
    order. Sets whose element count or allocation break the limits are rejected."""

    def __init__(self, name: str, size: tuple[str | int, ...], steps: tuple[str | int, ...] | None = None,
                 probability_contiguous: float = 0.5, min_elements: int | None = None,
                 max_elements: int | None = None, max_allocation_bytes: int | None = None,
                 dim_parameter: str | None = None, roll_parameter: str | None = None, dtype=ember.float32,
                 cuda=False, tensor_constructor: Callable | None = None):
        self._name = name
        self._size = size
        self._steps = steps
        self._probability_contiguous = probability_contiguous
        self._min_elements = min_elements
        self._max_elements = max_elements
        self._max_allocation_bytes = max_allocation_bytes
        self._dim_parameter = dim_parameter
        self._dtype = dtype
        self._cuda = cuda
        self._tensor_constructor = tensor_constructor

    @property
    def name(self):
        return self._name

    @staticmethod
    def default_tensor_constructor(size, dtype, **kwargs):
        if dtype.is_floating_point or dtype.is_complex:
            return ember.rand(tuple(size), dtype=dtype, device="cpu")
        return ember.randint(1, 127, tuple(size), dtype=dtype, device="cpu")

    def _make_tensor(self, params, state):
        size, steps, allocation_size = self._get_size_and_steps(params)
        constructor = self._tensor_constructor or self.default_tensor_constructor
        raw = constructor(size=allocation_size, dtype=self._dtype, **params)
        if self._cuda:
            raw = raw.cuda()
        dim = len(size)
        order = np.arange(dim)
        if state.rand() > self._probability_contiguous:
            while dim > 1 and np.all(order == np.arange(dim)):
                order = state.permutation(raw.dim())
            raw = raw.permute(tuple(int(i) for i in order)).contiguous()
            raw = raw.permute(tuple(int(i) for i in np.argsort(order)))
        tensor = raw[tuple(slice(0, n * s, s) for n, s in zip(size, steps))]
        properties = {
            "numel": int(tensor.numel()),
            "order": order,
            "steps": steps,
            "is_contiguous": tensor.is_contiguous(),
            "dtype": str(self._dtype),
        }
        return tensor, properties

    def _get_size_and_steps(self, params):
        dim = params[self._dim_parameter] if self._dim_parameter is not None else len(self._size)

        def resolve(values):
            """Parameter names -> values; truncated or padded with 1s to ``dim`` entries."""
            values = tuple(params.get(v, v) for v in values)
            return values[:dim] + (1,) * max(dim - len(values), 0)

        size = resolve(self._size)
        steps = resolve(self._steps or ())
        return size, steps, tuple(n * s for n, s in zip(size, steps))

    def satisfies_constraints(self, params) -> bool:
        size, _, allocation_size = self._get_size_and_steps(params)
        num_elements = prod(size)
        if num_elements < 0:
            raise AssertionError("Computed number of elements is negative")
        allocation_bytes = prod(allocation_size, base=dtype_size(self._dtype))

        def exceeds(value, limit):
            return value is not None and limit is not None and value > limit

        return not (exceeds(num_elements, self._max_elements) or exceeds(self._min_elements, num_elements)
                    or exceeds(allocation_bytes, self._max_allocation_bytes))


class Fuzzer:
    """Draws parameter sets and tensors: ``take(n)`` yields ``(tensors, tensor_properties,
    params)`` triples. A candidate set is redrawn (up to 1000 times) until every callable in
    ``constraints`` and every tensor's limits accept it; ``rejection_rate`` reports how often."""

    def __init__(self, parameters, tensors, constraints: list[Callable] | None = None, seed: int | None = None):
        if seed is None:
            seed = int(np.random.RandomState().randint(0, 2 ** 32 - 1, dtype=np.int64))
        self._seed = seed
        self._parameters = Fuzzer._unpack(parameters, FuzzedParameter)
        self._tensors = Fuzzer._unpack(tensors, FuzzedTensor)
        self._constraints = constraints or ()
        overlap = {p.name for p in self._parameters} & {t.name for t in self._tensors}
        if overlap:
            raise ValueError(f"Duplicate names in parameters and tensors: {overlap}")
        self._rejections = 0
        self._total_generated = 0

    @staticmethod
    def _unpack(values, cls):
        return tuple(it.chain.from_iterable([[v] if isinstance(v, cls) else v for v in values]))

    def take(self, n):
        state = np.random.RandomState(self._seed)
        ember.manual_seed(int(state.randint(low=0, high=2 ** 63, dtype=np.int64)))
        for _ in range(n):
            params = self._generate(state)
            tensors, properties = {}, {}
            for t in self._tensors:
                tensors[t.name], properties[t.name] = t._make_tensor(params, state)
            yield tensors, properties, params

    @property
    def rejection_rate(self):
        return self._rejections / self._total_generated if self._total_generated else 0.0

    def _generate(self, state):
        strict_params: dict[str, Any] = {}
        for _ in range(1000):
            candidate = {}
            for p in self._parameters:
                if p.strict:
                    if p.name not in strict_params:
                        strict_params[p.name] = p.sample(state)
                    candidate[p.name] = strict_params[p.name]
                else:
                    candidate[p.name] = p.sample(state)
            candidate = self._resolve_aliases(candidate)
            self._total_generated += 1
            if not all(f(candidate) for f in self._constraints):
                self._rejections += 1
                continue
            if not all(t.satisfies_constraints(candidate) for t in self._tensors):
                self._rejections += 1
                continue
            return candidate
        raise ValueError("Failed to generate a set of valid parameters.")

    @staticmethod
    def _resolve_aliases(params):
        params = dict(params)
        pending = sum(isinstance(v, ParameterAlias) for v in params.values())
        while pending:
            for k in list(params):
                v = params[k]
                if isinstance(v, ParameterAlias):
                    params[k] = params[v.alias_to]
            now = sum(isinstance(v, ParameterAlias) for v in params.values())
            if now == pending:
                raise ValueError(f"ParameterAlias cycle detected\n{params}")
            pending = now
        return params
