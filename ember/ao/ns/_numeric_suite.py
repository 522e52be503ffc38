"""Eager-mode numeric suite: where does a quantized model lose accuracy against its float one?

* ``compare_weights(float_sd, quantized_sd)``: each quantized weight (``<m>.weight``, a packed
  linear's ``<m>._packed_params._packed_params`` or a dynamic RNN's ``_all_weight_values``) next
  to its float weight, keyed by the quantized state-dict key.
* ``compare_model_outputs(float_model, q_model, *data)``: ``OutputLogger``s (attached with
  ``prepare`` and a logger "qconfig") record each comparable module's outputs in both models;
  the result pairs them by module name (``"<m>.stats"``).
* ``compare_model_stub(float_model, q_model, module_swap_list, *data)``: each quantized module
  whose float counterpart's type is in ``module_swap_list`` becomes a ``Shadow`` that also runs
  the float module on the dequantized inputs, and a ``ShadowLogger`` records both outputs.

Keys and the structure of the returned dicts are torch's (``torch.ao.ns._numeric_suite``).
"""
from __future__ import annotations

from ember import nn

__all__ = ["compare_weights", "get_logger_dict", "Logger", "ShadowLogger", "OutputLogger", "Shadow",
           "prepare_model_with_stubs", "compare_model_stub", "get_matching_activations", "prepare_model_outputs",
           "compare_model_outputs"]


def _non_leaf_allow_list():
    """Module types with children that still get an output logger (their output is one tensor)."""
    from ember.ao.nn import quantized as nnq
    from ember.ao.nn.quantized import dynamic as nnqd
    return {nnqd.Linear, nnq.Linear, nnqd.LSTM, nn.LSTM}


def _find_match(str_list, key_str, postfix):
    """The key of ``str_list`` naming the same module as ``key_str`` (whose last part must be
    ``postfix``): module paths compared with the dots removed, one trailing part (or two) of the
    candidate dropped; a ``_packed_params`` key may also drop its own last two parts."""
    parts = key_str.split(".")
    if parts[-1] != postfix:
        return None
    candidates = ["".join(parts[:-1])]
    if postfix == "_packed_params":
        candidates.append("".join(parts[:-2]))
    for i, match_string in enumerate(candidates):
        if i == 1 and len(match_string) == 0:
            return None
        for s2 in str_list:
            s2_parts = s2.split(".")
            if match_string == "".join(s2_parts[:-1]) or match_string == "".join(s2_parts[:-2]):
                return s2
    return None


def _rnn_hh_weight(saved):
    """The recurrent (hidden-to-hidden) quantized weight of a dynamic RNN layer's saved parameters."""
    if isinstance(saved, tuple):                 # ember's saved form: (w_ih, w_hh, b_ih, b_hh, ...)
        return saved[1]
    return saved.__getstate__()[0][4][1].__getstate__()[0][0]


def compare_weights(float_dict, quantized_dict):
    """``{quantized key: {"float": float weight, "quantized": quantized weight}}``.

    For a dynamic RNN layer the entry holds the hidden-to-hidden weights (torch fills it with the
    input-to-hidden pair first and overwrites it with the hidden-to-hidden one)."""
    weight_dict = {}
    for key in quantized_dict:
        match_key = _find_match(float_dict, key, "weight")
        if match_key is not None:
            weight_dict[key] = {"float": float_dict[match_key], "quantized": quantized_dict[key]}
            continue
        match_key = _find_match(float_dict, key, "_packed_params")
        if match_key is not None:
            weight_dict[key] = {"float": float_dict[match_key], "quantized": quantized_dict[key][0]}
        parts = key.split(".")
        if parts[-1] == "param" and len(parts) >= 3 and parts[-3] == "_all_weight_values":
            layer = parts[-2]
            module_name = ".".join(parts[:-3])
            ih, hh = module_name + ".weight_ih_l" + layer, module_name + ".weight_hh_l" + layer
            if ih in float_dict and hh in float_dict:
                weight_dict[key] = {"float": float_dict[hh], "quantized": _rnn_hh_weight(quantized_dict[key])}
    return weight_dict


def _collect_logger_stats(mod, target_dict, prefix=""):
    dotted = prefix if prefix == "" else prefix + "."
    for child in mod.children():
        if isinstance(child, Logger):
            target_dict[dotted + "stats"] = child.stats
            break
    for name, child in mod.named_children():
        _collect_logger_stats(child, target_dict, dotted + name if prefix else name)


def get_logger_dict(mod, prefix=""):
    """``{"<module path>.stats": logger.stats}`` for every module that has a ``Logger`` child."""
    target_dict = {}
    _collect_logger_stats(mod, target_dict, prefix)
    return target_dict


class Logger(nn.Module):
    """Base of the loggers: ``stats`` is the dict they fill."""

    def __init__(self):
        super().__init__()
        self.stats = {}
        import ember
        self.dtype = ember.quint8

    def forward(self, x):
        pass


class ShadowLogger(Logger):
    """Records the quantized module's output and its float shadow's (first elements of tuples)."""

    def __init__(self):
        super().__init__()
        self.stats["float"] = []
        self.stats["quantized"] = []

    def forward(self, x, y):
        if len(x) > 1:
            x = x[0]
        if len(y) > 1:
            y = y[0]
        self.stats["quantized"].append(x.detach())
        self.stats["float"].append(y.detach())


class OutputLogger(Logger):
    """Records every output it sees (attached as an "observer", it returns its input)."""

    def __init__(self):
        super().__init__()
        self.stats["tensor_val"] = []

    def forward(self, x):
        self.stats["tensor_val"].append(x)
        return x


def _convert_tuple_to_list(t):
    return [_convert_tuple_to_list(x) for x in t] if type(t) is tuple else t


def _dequantize_tensor_list(t):
    if type(t) is list:
        return [_dequantize_tensor_list(x) for x in t]
    return t.dequantize() if t.is_quantized else t


class Shadow(nn.Module):
    """Runs ``q_module`` and, on the dequantized inputs, ``float_module``; ``logger`` sees both
    outputs and the quantized one is returned. The FloatFunctional ops (``add`` ...) are shadowed
    the same way."""

    def __init__(self, q_module, float_module, logger_cls):
        super().__init__()
        from ember.ao.nn.quantized import DeQuantize
        self.orig_module = q_module
        self.shadow_module = float_module
        self.dequant = DeQuantize()
        self.logger = logger_cls()

    def forward(self, *x):
        xl = _convert_tuple_to_list(x)
        output = self.orig_module(*xl)
        shadow_output = self.shadow_module(*_dequantize_tensor_list(xl))
        self.logger(output, shadow_output)
        return output

    def _binary(self, op, x, y):
        output = getattr(self.orig_module, op)(x, y)
        shadow_output = getattr(self.shadow_module, op)(x.dequantize(), y.dequantize())
        self.logger(output, shadow_output)
        return output

    def _with_scalar(self, op, x, y):
        output = getattr(self.orig_module, op)(x, y)
        shadow_output = getattr(self.shadow_module, op)(x.dequantize(), y)
        self.logger(output, shadow_output)
        return output

    def add(self, x, y):
        return self._binary("add", x, y)

    def add_scalar(self, x, y):
        return self._with_scalar("add_scalar", x, y)

    def mul(self, x, y):
        return self._binary("mul", x, y)

    def mul_scalar(self, x, y):
        return self._with_scalar("mul_scalar", x, y)

    def add_relu(self, x, y):
        return self._binary("add_relu", x, y)

    def cat(self, x, dim=0):
        output = self.orig_module.cat(x, dim)
        shadow_output = self.shadow_module.cat([t.dequantize() for t in x], dim)
        self.logger(output, shadow_output)
        return output


def _is_identical_module_type(mod1, mod2):
    return [type(m) for m in mod1.modules()] == [type(m) for m in mod2.modules()]


def prepare_model_with_stubs(float_module, q_module, module_swap_list, logger_cls):
    """Replace (in place) each child of ``q_module`` whose same-named float child has a type in
    ``module_swap_list`` (and differs from it) by a ``Shadow`` of the two; recurse elsewhere."""
    float_children = dict(float_module.named_children())
    reassign = {}
    for name, mod in q_module.named_children():
        if name not in float_children:
            continue
        float_mod = float_children[name]
        if type(float_mod) not in module_swap_list:
            prepare_model_with_stubs(float_mod, mod, module_swap_list, logger_cls)
        if type(float_mod) in module_swap_list and not _is_identical_module_type(mod, float_mod):
            reassign[name] = Shadow(mod, float_mod, logger_cls)
    for key, value in reassign.items():
        q_module._modules[key] = value


def compare_model_stub(float_model, q_model, module_swap_list, *data, logger_cls=ShadowLogger):
    """Shadow the listed modules (``prepare_model_with_stubs``), run ``q_model(*data)`` and return
    ``get_logger_dict(q_model)``."""
    prepare_model_with_stubs(float_model, q_model, module_swap_list, logger_cls)
    q_model(*data)
    return get_logger_dict(q_model)


def get_matching_activations(float_module, q_module):
    """``{"<m>.stats": {"float": [...], "quantized": [...]}}`` from the two models' OutputLoggers."""
    float_dict = get_logger_dict(float_module)
    quantized_dict = get_logger_dict(q_module)
    act_dict = {}
    for key in quantized_dict:
        if len(quantized_dict[key]["tensor_val"]) == 0:
            continue
        match_key = _find_match(sorted(float_dict, reverse=True), key, "stats")
        if match_key is not None:
            act_dict[key] = {"float": float_dict[match_key]["tensor_val"],
                             "quantized": quantized_dict[key]["tensor_val"]}
    return act_dict


def prepare_model_outputs(float_module, q_module, logger_cls=OutputLogger, allow_list=None):
    """Attach ``logger_cls`` loggers (in place) to the outputs of the modules of ``allow_list``
    types (default: both sides of the quantization mappings) in both models."""
    from ember.ao.quantization import QConfig, prepare
    from ember.ao.quantization.quantization_mappings import get_default_compare_output_module_list
    if allow_list is None:
        allow_list = get_default_compare_output_module_list()
    qconfig_debug = QConfig(activation=logger_cls, weight=None)
    float_module.qconfig = qconfig_debug
    prepare(float_module, inplace=True, allow_list=allow_list, prepare_custom_config_dict={})
    q_module.qconfig = qconfig_debug
    prepare(q_module, inplace=True, allow_list=allow_list, observer_non_leaf_module_list=_non_leaf_allow_list(),
            prepare_custom_config_dict={})


def compare_model_outputs(float_model, q_model, *data, logger_cls=OutputLogger, allow_list=None):
    """Log the outputs of the comparable modules of both models on ``data`` and pair them
    (``get_matching_activations``)."""
    from ember.ao.quantization.quantization_mappings import get_default_compare_output_module_list
    if allow_list is None:
        allow_list = get_default_compare_output_module_list()
    prepare_model_outputs(float_model, q_model, logger_cls, allow_list)
    float_model(*data)
    q_model(*data)
    return get_matching_activations(float_model, q_model)


NON_LEAF_MODULE_TO_ADD_OBSERVER_ALLOW_LIST = _non_leaf_allow_list()
