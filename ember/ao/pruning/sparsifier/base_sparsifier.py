"""``BaseSparsifier``: the configuration / prepare / step / squash_mask machinery shared by the
sparsifiers; a subclass supplies ``update_mask(module, tensor_name, **group)``.

Each configured tensor becomes a *group*: the sparsifier's ``defaults`` overlaid with the config
entry, plus ``module`` / ``module_fqn`` / ``tensor_name`` / ``tensor_fqn`` found from the entry's
``tensor_fqn``. ``prepare`` attaches a ``FakeSparsity`` (all-ones mask at first) to each tensor
and records the mask in ``state[tensor_fqn]["mask"]``."""
from __future__ import annotations

import abc
import copy
from collections import defaultdict

import ember
from ember import nn
from ember.nn.utils import parametrize
from ember.nn.utils.parametrize import type_before_parametrizations
from .utils import FakeSparsity, get_arg_info_from_tensor_fqn, module_contains_param, module_to_fqn, swap_module

__all__ = ["BaseSparsifier"]

SUPPORTED_MODULES = {nn.Linear}

# group entries that point into the live model: left out of ``state_dict()``
KEYS_NOT_IN_STATE_DICT = ["module", "module_fqn", "tensor_name"]


class BaseSparsifier(abc.ABC):
    """Base of the sparsifiers (see the module docstring). ``defaults``: the per-group settings
    every config entry starts from."""

    def __init__(self, defaults=None):
        super().__init__()
        self.defaults = defaults or {}
        self.state = defaultdict(dict)
        self.groups = []
        self.enable_mask_update = True

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "groups": self.groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.groups):
            lines.append(f"\tGroup {i}")
            lines.append(f"\t    module: {group['module']}")
            lines.extend(f"\t    {key}: {group[key]}" for key in sorted(group) if key != "module")
        return "\n".join(lines) + "\n)"

    def state_dict(self):
        """``{"state": per-tensor state (the masks), "groups": the groups without model references}``."""
        groups = [{k: v for k, v in group.items() if k not in KEYS_NOT_IN_STATE_DICT} for group in self.groups]
        return {"state": self.state, "groups": groups}

    def load_state_dict(self, state_dict, strict=True):
        """Restore the masks and groups into the prepared (or plain) ``self.model``."""
        groups = copy.deepcopy(state_dict["groups"])
        states = state_dict["state"]
        for tensor_fqn, s in states.items():
            info = get_arg_info_from_tensor_fqn(self.model, tensor_fqn)
            module, tensor_name = info["module"], info["tensor_name"]
            if strict and module is None:
                raise RuntimeError(f"Error loading {tensor_fqn} into the model")
            fake = None
            if parametrize.is_parametrized(module, tensor_name):
                fake = next((p for p in module.parametrizations[tensor_name] if isinstance(p, FakeSparsity)), None)
            if fake is None:
                fake = FakeSparsity(ember.ones(getattr(module, tensor_name).shape))
                parametrize.register_parametrization(module, tensor_name, fake)
            if s.get("mask", None) is not None:
                fake.mask = s.pop("mask")
            for group in groups:
                if group["tensor_fqn"] == tensor_fqn:
                    group.update(info)
        self.__setstate__({"state": states, "groups": groups})

    def make_config_from_model(self, model, SUPPORTED_MODULES=SUPPORTED_MODULES):
        """One config entry (``<module>.weight``) per submodule whose type is supported."""
        self.config = []
        stack = [model]
        while stack:
            module = stack.pop()
            for _name, child in module.named_children():
                if type(child) in SUPPORTED_MODULES:
                    fqn = module_to_fqn(model, child)
                    if not isinstance(fqn, str):
                        raise AssertionError("module_fqn must be a string")
                    self.config.append({"tensor_fqn": fqn + ".weight"})
                else:
                    stack.append(child)

    def prepare(self, model, config):
        """Build the groups from ``config`` (every Linear's weight when None) and attach the
        parametrizations; ``model`` is modified in place."""
        self.model = model
        self.config = config
        if self.config is None:
            self.make_config_from_model(model)
        for entry in self.config:
            if not isinstance(entry, dict):
                raise AssertionError("config elements should be dicts not modules i.e.:[{`tensor_fqn`: "
                                     "`foo.bar.weight`}, {`tensor_fqn`: ... }, ...]")
            if not isinstance(self.defaults, dict):
                raise AssertionError("defaults must be a dict")
            group = copy.deepcopy(self.defaults)
            group.update(entry)
            tensor_fqn = group.get("tensor_fqn", None)
            if tensor_fqn is None:
                raise AssertionError("tensor_fqn is a required argument in the sparsity config which replaces "
                                     "previous `module` and [module]`fqn` arguments")
            info = get_arg_info_from_tensor_fqn(model, tensor_fqn)
            for key, found in info.items():
                if key in group and not (found == group[key] or
                                         (key == "tensor_fqn" and "." + found == group[key])):
                    raise AssertionError(f"Given both `{key}` and `tensor_fqn` in the config, it is expected them "
                                         "to agree!")
            group.update(info)
            self.groups.append(group)
        self._prepare()

    def _prepare(self, *args, **kwargs):
        """Attach each group's parametrization (``FakeSparsity`` unless the group names another)."""
        for group in self.groups:
            module, tensor_name = group["module"], group["tensor_name"]
            parametrization = group.get("parametrization", FakeSparsity)
            mask = group.get("mask", ember.ones_like(getattr(module, tensor_name)))
            self.state[group["tensor_fqn"]]["mask"] = mask
            parametrize.register_parametrization(module, tensor_name, parametrization(mask))

    def squash_mask(self, params_to_keep=None, params_to_keep_per_layer=None, *args, **kwargs):
        """Bake the masks into the tensors and remove the parametrizations. ``params_to_keep``
        (group keys, for every layer) and ``params_to_keep_per_layer`` (module fqn -> keys) name
        the group settings to leave on the module as a ``sparse_params`` dict."""
        for group in self.groups:
            module, tensor_name = group["module"], group["tensor_name"]
            parametrize.remove_parametrizations(module, tensor_name, leave_parametrized=True)
            sparse_params = {}
            if params_to_keep is not None:
                sparse_params.update({k: group[k] for k in params_to_keep})
            if params_to_keep_per_layer is not None:
                keys = params_to_keep_per_layer.get(group["module_fqn"], None)
                if keys is not None:
                    sparse_params.update({k: group[k] for k in keys})
            if sparse_params:
                module.sparse_params = sparse_params

    def convert(self, module, mapping=None, inplace=False, parameterization=FakeSparsity):
        """Swap each parametrized submodule whose original type is in ``mapping`` for
        ``mapping[type].from_dense(submodule)``."""
        if mapping is None:
            raise NotImplementedError("Need to auto generate mapping ")
        if not inplace:
            module = copy.deepcopy(module)
        reassign = {}
        for name, mod in module.named_children():
            if module_contains_param(mod, parameterization) and type_before_parametrizations(mod) in mapping:
                reassign[name] = swap_module(mod, mapping)
            else:
                reassign[name] = self.convert(mod, mapping=mapping, inplace=True, parameterization=parameterization)
        for key, value in reassign.items():
            module._modules[key] = value
        return module

    def step(self, use_path=True):
        """Recompute every group's mask (no-op while ``enable_mask_update`` is off)."""
        if not self.enable_mask_update:
            return
        with ember.no_grad():
            for group in self.groups:
                self.update_mask(**group)

    @abc.abstractmethod
    def update_mask(self, module, tensor_name, **kwargs):
        pass
