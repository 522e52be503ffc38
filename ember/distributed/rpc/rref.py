"""Remote references (PyTorch's ``torch.distributed.rpc.RRef``).

An RRef names a value living on its *owner* worker: ``remote()`` makes one (the owner runs
the function and keeps the result), ``RRef(value)`` makes one owned here. A handle held
elsewhere is a *user* RRef; ``to_here()`` fetches a copy of the value from the owner,
``local_value()`` works on the owner only. RRefs can be passed as RPC arguments and
results: the receiver gets a handle to the same value.

Not supported: PyTorch's reference counting (an owner keeps every value it was given until
``shutdown``) and distributed autograd through RRefs."""
from __future__ import annotations

import itertools

_counter = itertools.count()


def _agent():
    from .api import _current_agent
    return _current_agent()


class RRef:
    """``RRef(value)``: a reference owned by this worker. ``remote()`` returns user ones."""

    def __init__(self, value=None, type_hint=None):
        ag = _agent()
        self._owner = ag.me
        self._id = (ag.rank, next(_counter))
        ag._owned_cell(self._id).set_result(value)
        self._created = None       # the creation future of a remote() RRef on its creator

    @classmethod
    def _handle(cls, owner, rref_id, created=None):
        r = object.__new__(cls)
        r._owner, r._id, r._created = owner, rref_id, created
        return r

    def owner(self):
        return self._owner

    def owner_name(self):
        return self._owner.name

    def is_owner(self):
        return self._owner.id == _agent().rank

    def confirmed_by_owner(self):
        return self.is_owner() or self._created is None or self._created.done()

    def _what(self):
        if self.is_owner():
            return f"OwnerRRef(GloballyUniqueId(created_on={self._id[0]}, local_id={self._id[1]}))"
        return (f"UserRRef(RRefId = GloballyUniqueId(created_on={self._id[0]}, local_id={self._id[1]}), "
                f"owner = {self._owner})")

    __repr__ = _what
    __str__ = _what

    def local_value(self):
        """The value itself, on the owner (on a user: PyTorch's error)."""
        ag = _agent()
        if not self.is_owner():
            raise RuntimeError(f"For {self._what()}, can't call localValue() on user {ag.me}. Call it on owner "
                               f"{self._owner}")
        from .agent import RemoteError
        try:
            return ag._owned_cell(self._id).result()
        except RemoteError as e:
            raise e.to_exception() from None

    def to_here(self, timeout=-1.0):
        """A copy of the value (the value itself on the owner), waiting for ``remote()`` to
        finish; raises the remote function's error if it failed."""
        ag = _agent()
        if self.is_owner():
            from .agent import RemoteError
            try:
                return ag._owned_cell(self._id).result()
            except RemoteError as e:
                raise e.to_exception() from None
        return ag.request(self._owner, "fetch", (self._id,), timeout).wait()

    # rref.rpc_sync().method(*args): run a method of the referenced object on its owner
    def rpc_sync(self, timeout=-1.0):
        return _Proxy(self, "sync", timeout)

    def rpc_async(self, timeout=-1.0):
        return _Proxy(self, "async", timeout)

    def remote(self, timeout=-1.0):
        return _Proxy(self, "remote", timeout)


def _call_method(rref, name, args, kwargs):
    return getattr(rref.local_value(), name)(*args, **kwargs)


class _Proxy:
    def __init__(self, rref, mode, timeout):
        self._rref, self._mode, self._timeout = rref, mode, timeout

    def __getattr__(self, name):
        from . import api
        fn = {"sync": api.rpc_sync, "async": api.rpc_async, "remote": api.remote}[self._mode]

        def call(*args, **kwargs):
            return fn(self._rref.owner(), _call_method, args=(self._rref, name, args, kwargs), timeout=self._timeout)
        return call


def _rebuild_rref(owner, rref_id):
    return RRef._handle(owner, tuple(rref_id))


def _reduce_rref(r):
    return _rebuild_rref, (r._owner, r._id)
