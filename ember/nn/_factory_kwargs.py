"""``ember.nn.factory_kwargs``: the checked ``device``/``dtype``/``memory_format`` keywords a
module passes on to its factory calls (torch.nn.factory_kwargs)."""
from __future__ import annotations

_SIMPLE_KEYS = ("device", "dtype", "memory_format")


def factory_kwargs(kwargs):
    """The factory keywords in ``kwargs`` (plus those of its ``factory_kwargs`` entry, which lets a
    signature that already has a ``dtype`` argument pass one to the factories); an unexpected key,
    or one given both ways, is a TypeError."""
    if kwargs is None:
        return {}
    expected = set(_SIMPLE_KEYS) | {"factory_kwargs"}
    if not kwargs.keys() <= expected:
        raise TypeError(f"unexpected kwargs {kwargs.keys() - expected}")
    r = dict(kwargs.get("factory_kwargs", {}))
    for k in _SIMPLE_KEYS:
        if k in kwargs:
            if k in r:
                raise TypeError(f"{k} specified twice, in **kwargs and in factory_kwargs")
            r[k] = kwargs[k]
    return r
