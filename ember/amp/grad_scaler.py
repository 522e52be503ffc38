"""``ember.amp.GradScaler``: loss scaling for float16 training, as ``torch.amp.GradScaler``.

``scaler.scale(loss).backward()`` multiplies the loss (so small float16 gradients do not
underflow); ``scaler.step(opt)`` divides the gradients back (``unscale_``), and skips the step
when any of them is inf or NaN; ``scaler.update()`` then halves the scale after a skipped step
and doubles it after ``growth_interval`` clean steps in a row. The scale lives in a float32
tensor on the scaler's device; the inf/NaN check is one reduction per gradient.
"""
from __future__ import annotations

import warnings
from collections import abc
from typing import Any, Dict, Optional

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


def _unscale_target(p):
    """The tensor ``unscale_`` divides in place for ``p``: its gradient, or a sparse gradient's
    values (a float16 sparse gradient is coalesced first, replacing ``p.grad``, so that duplicate
    entries are summed before the inf/NaN check, as PyTorch does)."""
    if not p.grad.is_sparse:
        return p.grad
    import ember
    if p.grad.dtype is ember.float16:
        p.grad = p.grad.coalesce()
    return p.grad._values()


class GradScaler:
    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        self._device = str(device)
        self._enabled = bool(enabled)
        if self._enabled and self._device.startswith("cuda"):
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("ember.amp.GradScaler is enabled, but CUDA is not available. Disabling.")
                self._enabled = False
        if self._enabled:   # PyTorch's assertions
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._scale = None                # float32 tensor, made on first use (scale())
        self._growth_tracker = 0
        self._per_optimizer: Dict[int, Dict[str, Any]] = {}

    # ------------------------------------------------------------------ scaling
    def _lazy_scale(self, like):
        if self._scale is None:
            import ember
            self._scale = ember.full((), self._init_scale, dtype=ember.float32, device=like.device)
        return self._scale

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        from ..tensor import Tensor
        if isinstance(outputs, Tensor):
            return outputs * self._lazy_scale(outputs).to(outputs.device)
        if isinstance(outputs, abc.Iterable):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled) if isinstance(outputs, (list, tuple)) else iter(scaled)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer):
        # found_inf: None until unscale_ has seen a gradient (PyTorch's empty found_inf_per_device)
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})

    def _check_scale(self, funcname):
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  This may indicate your script did not "
                                 "use scaler.scale(loss or outputs) earlier in the iteration.")

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale (in place) and note whether any is inf/NaN."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        import ember
        inv = (1.0 / self._scale.double()).float()
        found = None   # stays None when no parameter has a gradient
        with ember.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.grad.dtype is ember.float16 and not self._allow_fp16():
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    g = _unscale_target(p)
                    g.mul_(inv.to(g.dtype))
                    found = bool(found) or not bool(ember.isfinite(g).all())
        state["found_inf"] = found
        state["stage"] = _UNSCALED

    @staticmethod
    def _allow_fp16():
        return False

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` unless the unscaled gradients hold inf/NaN; returns
        what it returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale("step")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        if state["found_inf"] is None:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        ret = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return ret

    def update(self, new_scale=None):
        """Grow or back off the scale from this iteration's steps (or set ``new_scale``)."""
        if not self._enabled:
            return
        self._check_scale("update")
        import ember
        if new_scale is not None:
            if isinstance(new_scale, ember.Tensor):
                if (new_scale.device.type != self._device.split(":")[0] or new_scale.numel() != 1
                        or new_scale.requires_grad):
                    raise AssertionError("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                                         "torch.FloatTensor with requires_grad=False.")
                self._scale.copy_(new_scale.reshape(()))
            else:
                self._scale.fill_(float(new_scale))
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values() if s["found_inf"] is not None]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            self._update_scale(any(found))
        self._per_optimizer = {}

    def _update_scale(self, found_inf):
        """PyTorch's ``_amp_update_scale_``: back off after an inf/NaN; grow after
        ``growth_interval`` clean steps in a row, unless the grown float32 scale would overflow
        (then the scale stays and the count restarts). Each product is formed in double (the
        factors are doubles) and rounded once to the float32 scale, as the kernel does."""
        import numpy as np
        if found_inf:
            self._scale.fill_(float(np.float32(self._scale.item() * self._backoff_factor)))
            self._growth_tracker = 0
            return
        self._growth_tracker += 1
        if self._growth_tracker == self._growth_interval:
            with np.errstate(over="ignore"):
                grown = np.float32(self._scale.item() * self._growth_factor)
            if np.isfinite(grown):
                self._scale.fill_(float(grown))
            self._growth_tracker = 0

    def __getstate__(self):
        if self._enabled and self._per_optimizer:
            raise AssertionError("A GradScaler instance may only be pickled at the beginning of an iteration, "
                                 "or at the end after scaler.update().")
        return self.__dict__.copy()

    # ------------------------------------------------------------------ accessors
    def get_scale(self) -> float:
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> Dict[str, Any]:
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a "
                               "disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
