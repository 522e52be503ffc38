"""``@rpc.functions.async_execution``: a function called through RPC that returns a Future;
the callee answers with the Future's value once it completes, instead of with the Future."""
from __future__ import annotations

import functools

__all__ = ["async_execution"]


def async_execution(fn):
    """Mark ``fn`` (called through ``rpc_sync``/``rpc_async``/``remote``) as returning a Future
    whose value is the real result."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    wrapper._wrapped_async_rpc_function = fn
    return wrapper
