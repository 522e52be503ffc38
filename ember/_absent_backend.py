"""The device modules of backends ember does not have (``ember.mps``, ``ember.xpu``,
``ember.mtia``): code written for several accelerators probes them (``torch.xpu.is_available()``,
``torch.mps.device_count()``) before choosing a device, so the modules exist and answer "none",
and everything that would need the device raises the error torch raises where the backend is
missing.
"""
from __future__ import annotations

__all__ = ["populate"]


def populate(namespace, backend, *, queries, quiet, failing, error):
    """Fill a device module's ``namespace``: ``queries`` maps names to the constant they return
    (``is_available`` -> False), ``quiet`` names return None (seeding an absent device is a no-op,
    as torch's lazy seeding), ``failing`` names raise ``error(name)``; ``Stream`` / ``Event``
    classes refuse to be made."""
    for name, value in queries.items():
        namespace[name] = _const(name, value, backend)
    for name in quiet:
        namespace[name] = _quiet(name, backend)
    for name in failing:
        namespace[name] = _failing(name, error)
    for cls_name in ("Stream", "Event"):
        namespace[cls_name] = _refusing_class(cls_name, error)


def _const(name, value, backend):
    def f(*args, **kwargs):
        return value
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"{value!r}: ember has no {backend} backend."
    return f


def _quiet(name, backend):
    def f(*args, **kwargs):
        return None
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Nothing to do: ember has no {backend} devices (as torch, seeding an absent device is a no-op)."
    return f


def _failing(name, error):
    def f(*args, **kwargs):
        raise error(name)
    f.__name__ = f.__qualname__ = name
    return f


def _refusing_class(cls_name, error):
    def __init__(self, *args, **kwargs):
        raise error(cls_name)
    return type(cls_name, (), {"__init__": __init__, "__doc__": f"Refused: {error(cls_name)}"})
