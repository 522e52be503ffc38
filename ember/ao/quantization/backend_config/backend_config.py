"""The vocabulary a backend uses to say what it can run quantized: ``DTypeConfig`` (which
dtypes an op may take and give), ``BackendPatternConfig`` (one op or fused chain of ops: how
its inputs and outputs are observed, which fused / QAT / reference module stands for it) and
``BackendConfig`` (all the patterns of one backend). FX graph mode quantization reads these
to decide where observers go (``prepare_fx``) and what becomes quantized (``convert_fx``)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["BackendConfig", "BackendPatternConfig", "DTypeConfig", "DTypeWithConstraints", "ObservationType"]

# the dict-form keys, as torch spells them (to_dict / from_dict round-trip with torch's dicts)
_INPUT_DTYPE, _OUTPUT_DTYPE, _WEIGHT_DTYPE, _BIAS_DTYPE, _IS_DYNAMIC = (
    "input_dtype", "output_dtype", "weight_dtype", "bias_dtype", "is_dynamic")
_NAME, _CONFIGS = "name", "configs"
_PATTERN, _PATTERN_COMPLEX, _OBSERVATION_TYPE, _DTYPE_CONFIGS = (
    "pattern", "pattern_complex_format", "observation_type", "dtype_configs")
_ROOT_MODULE, _QAT_MODULE, _REFERENCE_MODULE, _FUSED_MODULE, _FUSER_METHOD = (
    "root_module", "qat_module", "reference_quantized_module_for_root", "fused_module", "fuser_method")
_ROOT_NODE_GETTER, _EXTRA_INPUTS_GETTER, _NUM_TENSOR_ARGS, _INPUT_TYPE_TO_INDEX = (
    "root_node_getter", "extra_inputs_getter", "num_tensor_args_to_observation_type", "input_type_to_index")


class ObservationType(Enum):
    """How a pattern's output is observed relative to its input."""
    OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT = 0     # conv, linear, add ...: own output qparams
    OUTPUT_SHARE_OBSERVER_WITH_INPUT = 1           # view, relu, max_pool, cat ...: the input's qparams
    INPUT_OUTPUT_NOT_OBSERVED = 2                  # size, shape ...: no tensor output to observe


@dataclass
class DTypeWithConstraints:
    """A dtype plus the limits a backend puts on the quantization parameters used with it
    (``None``: no limit)."""
    dtype: object = None
    quant_min_lower_bound: int | float | None = None
    quant_max_upper_bound: int | float | None = None
    scale_min_lower_bound: int | float | None = None
    scale_max_upper_bound: int | float | None = None
    scale_exact_match: float | None = None
    zero_point_exact_match: int | None = None


def _as_constrained(value):
    if value is None or isinstance(value, DTypeWithConstraints):
        return value if value is not None else DTypeWithConstraints()
    return DTypeWithConstraints(dtype=value)


class DTypeConfig:
    """The dtypes of one supported combination: input / output activation, weight, bias, and
    whether the activation is quantized dynamically (at run time)."""

    def __init__(self, input_dtype=None, output_dtype=None, weight_dtype=None, bias_dtype=None, is_dynamic=None):
        self.input_dtype_with_constraints = _as_constrained(input_dtype)
        self.output_dtype_with_constraints = _as_constrained(output_dtype)
        self.weight_dtype_with_constraints = _as_constrained(weight_dtype)
        self.bias_dtype = bias_dtype
        self.is_dynamic = is_dynamic

    @property
    def input_dtype(self):
        return self.input_dtype_with_constraints.dtype

    @property
    def output_dtype(self):
        return self.output_dtype_with_constraints.dtype

    @property
    def weight_dtype(self):
        return self.weight_dtype_with_constraints.dtype

    def __repr__(self):
        return (f"DTypeConfig(input_dtype_with_constraints={self.input_dtype_with_constraints}, "
                f"output_dtype_with_constraints={self.output_dtype_with_constraints}, "
                f"weight_dtype_with_constraints={self.weight_dtype_with_constraints}, "
                f"bias_dtype={self.bias_dtype}, is_dynamic={self.is_dynamic})")

    @classmethod
    def from_dict(cls, dtype_config_dict):
        """From ``{"input_dtype": ..., "output_dtype": ..., "weight_dtype": ..., "bias_dtype": ...,
        "is_dynamic": ...}`` (dtypes or DTypeWithConstraints; every key optional)."""
        for key in (_INPUT_DTYPE, _OUTPUT_DTYPE, _WEIGHT_DTYPE):
            value = dtype_config_dict.get(key)
            if value is not None and not isinstance(value, DTypeWithConstraints) and not _is_dtype(value):
                raise ValueError(f"Expected {key} to be a torch.dtype or DTypeWithConstraints, got "
                                 f"{type(value).__name__}")
        return cls(dtype_config_dict.get(_INPUT_DTYPE), dtype_config_dict.get(_OUTPUT_DTYPE),
                   dtype_config_dict.get(_WEIGHT_DTYPE), dtype_config_dict.get(_BIAS_DTYPE),
                   dtype_config_dict.get(_IS_DYNAMIC))

    def to_dict(self):
        out = {}
        for key, value in ((_INPUT_DTYPE, self.input_dtype_with_constraints),
                           (_OUTPUT_DTYPE, self.output_dtype_with_constraints),
                           (_WEIGHT_DTYPE, self.weight_dtype_with_constraints)):
            if value.dtype is not None:
                out[key] = value
        if self.bias_dtype is not None:
            out[_BIAS_DTYPE] = self.bias_dtype
        if self.is_dynamic is not None:
            out[_IS_DYNAMIC] = self.is_dynamic
        return out


def _is_dtype(value):
    import ember
    return isinstance(value, ember.dtype)


class BackendPatternConfig:
    """One pattern the backend can run quantized: a module type, a function, a method name,
    or a tuple of those (a chain run in that order, e.g. ``(nn.Linear, nn.ReLU)``)."""

    def __init__(self, pattern=None):
        self.pattern = pattern
        self.observation_type = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
        self.dtype_configs = []
        self.root_module = None
        self.qat_module = None
        self.reference_quantized_module = None
        self.fused_module = None
        self.fuser_method = None
        self._root_node_getter = None
        self._extra_inputs_getter = None
        self._num_tensor_args_to_observation_type = {}
        self._input_type_to_index = {}
        self._pattern_complex_format = None

    def __repr__(self):
        shown = {k: v for k, v in self.__dict__.items()
                 if (not isinstance(v, (list, dict)) and v is not None) or (isinstance(v, (list, dict)) and v)}
        return f"BackendPatternConfig({shown})"

    def set_pattern(self, pattern):
        """The pattern in execution order (``(nn.Conv2d, nn.BatchNorm2d, nn.ReLU)``)."""
        if self._pattern_complex_format is not None:
            raise ValueError("Only one of 'pattern' or 'pattern_complex_format' can be set")
        self.pattern = pattern
        return self

    def set_observation_type(self, observation_type):
        self.observation_type = observation_type
        return self

    def add_dtype_config(self, dtype_config):
        self.dtype_configs.append(dtype_config)
        return self

    def set_dtype_configs(self, dtype_configs):
        self.dtype_configs = list(dtype_configs)
        return self

    def set_root_module(self, root_module):
        """The float module class at the root of the pattern (nn.Linear for (nn.Linear, nn.ReLU))."""
        self.root_module = root_module
        return self

    def set_qat_module(self, qat_module):
        self.qat_module = qat_module
        return self

    def set_reference_quantized_module(self, reference_quantized_module):
        """The reference quantized module ``convert_to_reference_fx`` swaps in for the root module."""
        self.reference_quantized_module = reference_quantized_module
        return self

    def set_fused_module(self, fused_module):
        self.fused_module = fused_module
        return self

    def set_fuser_method(self, fuser_method):
        """``fuser_method(is_qat, *modules)`` -> the fused module (``fuse_fx`` calls it)."""
        self.fuser_method = fuser_method
        return self

    def _set_root_node_getter(self, root_node_getter):
        self._root_node_getter = root_node_getter
        return self

    def _set_extra_inputs_getter(self, extra_inputs_getter):
        self._extra_inputs_getter = extra_inputs_getter
        return self

    def _set_num_tensor_args_to_observation_type(self, num_tensor_args_to_observation_type):
        self._num_tensor_args_to_observation_type = num_tensor_args_to_observation_type
        return self

    def _set_input_type_to_index(self, input_type_to_index):
        """Where the non-activation inputs sit: ``{"weight": 1, "bias": 2}`` for ``F.linear``."""
        self._input_type_to_index = input_type_to_index
        return self

    def _set_pattern_complex_format(self, pattern):
        """The legacy reversed nested form (``(nn.ReLU, (nn.BatchNorm2d, nn.Conv2d))``)."""
        if self.pattern is not None:
            raise ValueError("Only one of 'pattern' or 'pattern_complex_format' can be set")
        self._pattern_complex_format = pattern
        return self

    @classmethod
    def from_dict(cls, backend_pattern_config_dict):
        """From the dict form (the keys of ``to_dict``); dtype configs may be dicts or DTypeConfigs."""
        conf = cls()
        if _PATTERN in backend_pattern_config_dict:
            conf.set_pattern(backend_pattern_config_dict[_PATTERN])
        if _OBSERVATION_TYPE in backend_pattern_config_dict:
            conf.set_observation_type(backend_pattern_config_dict[_OBSERVATION_TYPE])
        for d in backend_pattern_config_dict.get(_DTYPE_CONFIGS, []):
            if isinstance(d, DTypeConfig):
                conf.add_dtype_config(d)
            elif isinstance(d, dict):
                conf.add_dtype_config(DTypeConfig.from_dict(d))
            else:
                raise ValueError(f"Expected a list of DTypeConfigs or dictionaries in "
                                 f"'{_DTYPE_CONFIGS}', got '{type(d)}'")
        conf.set_root_module(backend_pattern_config_dict.get(_ROOT_MODULE))
        conf.set_qat_module(backend_pattern_config_dict.get(_QAT_MODULE))
        conf.set_reference_quantized_module(backend_pattern_config_dict.get(_REFERENCE_MODULE))
        conf.set_fused_module(backend_pattern_config_dict.get(_FUSED_MODULE))
        conf.set_fuser_method(backend_pattern_config_dict.get(_FUSER_METHOD))
        conf._set_root_node_getter(backend_pattern_config_dict.get(_ROOT_NODE_GETTER))
        conf._set_extra_inputs_getter(backend_pattern_config_dict.get(_EXTRA_INPUTS_GETTER))
        conf._set_num_tensor_args_to_observation_type(backend_pattern_config_dict.get(_NUM_TENSOR_ARGS, {}))
        conf._set_input_type_to_index(backend_pattern_config_dict.get(_INPUT_TYPE_TO_INDEX, {}))
        if _PATTERN_COMPLEX in backend_pattern_config_dict:
            conf._set_pattern_complex_format(backend_pattern_config_dict[_PATTERN_COMPLEX])
        return conf

    def to_dict(self):
        out = {_OBSERVATION_TYPE: self.observation_type,
               _DTYPE_CONFIGS: [c.to_dict() for c in self.dtype_configs]}
        if self.pattern is not None:
            out[_PATTERN] = self.pattern
        for key, value in ((_ROOT_MODULE, self.root_module), (_QAT_MODULE, self.qat_module),
                           (_REFERENCE_MODULE, self.reference_quantized_module), (_FUSED_MODULE, self.fused_module),
                           (_FUSER_METHOD, self.fuser_method), (_ROOT_NODE_GETTER, self._root_node_getter),
                           (_EXTRA_INPUTS_GETTER, self._extra_inputs_getter),
                           (_PATTERN_COMPLEX, self._pattern_complex_format)):
            if value is not None:
                out[key] = value
        if self._num_tensor_args_to_observation_type:
            out[_NUM_TENSOR_ARGS] = self._num_tensor_args_to_observation_type
        if self._input_type_to_index:
            out[_INPUT_TYPE_TO_INDEX] = self._input_type_to_index
        return out

    def _chain(self):
        """The pattern as a tuple in execution order (the complex format unnested); a pattern
        that is not a plain chain raises."""
        if self.pattern is not None:
            return self.pattern if isinstance(self.pattern, tuple) else (self.pattern,)
        p = self._pattern_complex_format
        if p is None:
            return ()
        out = []
        while isinstance(p, tuple):
            if len(p) != 2:
                raise NotImplementedError(f"ember.ao.quantization.quantize_fx: the pattern {p!r} (not a chain of "
                                          "single-input ops) is not supported")
            out.append(p[0])
            p = p[1]
        out.append(p)
        return tuple(reversed(out))


class BackendConfig:
    """Every pattern one backend can run quantized, keyed by pattern (a later config for the
    same pattern replaces the earlier)."""

    def __init__(self, name=""):
        self.name = name
        self._pattern_complex_format_to_config = {}

    def __repr__(self):
        return f"BackendConfig({self.__dict__})"

    def set_name(self, name):
        self.name = name
        return self

    def set_backend_pattern_config(self, config):
        key = config.pattern if config.pattern is not None else ("complex", config._pattern_complex_format)
        self._pattern_complex_format_to_config[key] = config
        return self

    def set_backend_pattern_configs(self, configs):
        for c in configs:
            self.set_backend_pattern_config(c)
        return self

    @property
    def configs(self):
        return list(self._pattern_complex_format_to_config.values())

    @classmethod
    def from_dict(cls, backend_config_dict):
        conf = cls(backend_config_dict.get(_NAME, ""))
        for d in backend_config_dict.get(_CONFIGS, []):
            if isinstance(d, BackendPatternConfig):
                conf.set_backend_pattern_config(d)
            elif isinstance(d, dict):
                conf.set_backend_pattern_config(BackendPatternConfig.from_dict(d))
            else:
                raise ValueError(f"Expected backend_config_dict['{_CONFIGS}'] to be a dictionary")
        return conf

    def to_dict(self):
        return {_NAME: self.name, _CONFIGS: [c.to_dict() for c in self.configs]}
