"""``ember.utils.module_tracker.ModuleTracker``: which modules are running, forward and backward.

Why. Tools that attribute work to modules (``ember.utils.flop_counter.FlopCounterMode``, memory
trackers) need "the modules around this op" without touching the model. As torch's, it keeps
``parents``, the set of qualified names (``"MyModel.layers.0"``) of the modules whose forward --
or, during backward, whose backward -- is running, always with ``"Global"``: global forward
hooks add and remove a module around its forward; in backward, a module is entered when its
outputs' gradients are computed and left when its inputs' are (``register_multi_grad_hook``),
and everything is reset when the backward pass ends.
"""
from __future__ import annotations

import logging
import weakref

from ..autograd import engine as _engine
from ..autograd.graph import register_multi_grad_hook
from ..nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from ..tensor import Tensor
from ._pytree import tree_flatten

__all__ = ["ModuleTracker"]

log = logging.getLogger("ember.utils.module_tracker")


class ModuleTracker:
    """Context manager: inside it ``parents`` names the modules running now (see the module)."""

    def __init__(self):
        self.parents = {"Global"}
        self._known_modules = weakref.WeakKeyDictionary()
        self._seen_modules = weakref.WeakSet()
        self._has_callback = False
        self._hooks = []

    @property
    def is_bw(self) -> bool:
        """Whether a backward pass is running."""
        return _engine.CURRENT_PASS[0] is not None

    def _maybe_set_engine_callback(self):
        if self._has_callback:
            return

        def reset():
            self.parents = {"Global"}
            self._has_callback = False
        _engine.queue_callback(reset)
        self._has_callback = True

    def _get_mod_name(self, mod) -> str:
        """A root module is named by its class; its submodules by the path from it."""
        if mod not in self._known_modules:
            self._known_modules[mod] = type(mod).__name__
        name = self._known_modules[mod]
        if mod not in self._seen_modules:
            for child_name, child in mod.named_children():
                self._known_modules[child] = f"{name}.{child_name}"
                self._get_mod_name(child)
            self._seen_modules.add(mod)
        return name

    def _enter(self, name, is_bw):
        def fn(*args):
            if is_bw:
                self._maybe_set_engine_callback()
            if name in self.parents:
                log.info("The module hierarchy tracking seems to be broken as this Module was already "
                         "entered. %s during %s", name, "backward" if is_bw else "forward")
            self.parents.add(name)
        return fn

    def _leave(self, name, is_bw):
        def fn(*args):
            if name in self.parents:
                self.parents.remove(name)
            else:
                log.info("The Module hierarchy tracking is confused as we're exiting a Module that was "
                         "never entered. %s during %s", name, "backward" if is_bw else "forward")
        return fn

    @staticmethod
    def _grad_tensors(tree):
        leaves, _ = tree_flatten(tree)
        return [a for a in leaves if isinstance(a, Tensor) and a.requires_grad]

    def _fw_pre_hook(self, mod, args):
        name = self._get_mod_name(mod)
        self._enter(name, False)()
        tensors = self._grad_tensors(args)
        if tensors:          # its backward ends when its inputs' gradients are computed
            self._hooks.append(register_multi_grad_hook(tensors, self._leave(name, True)))

    def _fw_post_hook(self, mod, args, output):
        name = self._get_mod_name(mod)
        self._leave(name, False)()
        tensors = self._grad_tensors(output)
        if tensors:          # and starts when its outputs' are
            self._hooks.append(register_multi_grad_hook(tensors, self._enter(name, True)))

    def __enter__(self):
        self._pre = register_module_forward_pre_hook(self._fw_pre_hook)
        self._post = register_module_forward_hook(self._fw_post_hook)
        return self

    def __exit__(self, *exc):
        self._pre.remove()
        self._post.remove()
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        return False
