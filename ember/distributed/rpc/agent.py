"""The RPC agent of one process: connections to every other worker, a dispatcher thread,
a pool of threads running incoming calls, and the table of values this worker owns.

Messages ride ember's TCP mesh (``ember.distributed._transport.Mesh``, a connection per
pair of workers with a reader thread each). A request is filed under key ``("q", n)`` and
its answer under ``("a", n)``, ``n`` numbering the caller's requests. The dispatcher thread
takes every filed message: requests go to the thread pool (a call may itself make RPCs,
even back to its caller, without blocking the dispatcher), answers complete the caller's
pending future. It also fails the futures of a worker whose connection dropped and those
past their deadline.

Request kinds: ``call`` (run ``func(*args, **kwargs)``, answer its result), ``remote`` (run
it and keep the result here under an RRef id; the answer confirms), ``fetch`` (the value of
an RRef this worker owns, once it is ready).
"""
from __future__ import annotations

import itertools
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

from .._transport import Mesh
from . import _wire


class WorkerInfo:
    """A worker's name and id (its rank in the RPC group)."""

    __slots__ = ("name", "id")

    def __init__(self, name, id):   # noqa: A002 - PyTorch's field name
        self.name, self.id = name, id

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, name={self.name})"

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, WorkerInfo) and (self.id, self.name) == (other.id, other.name)

    def __hash__(self):
        return hash((self.id, self.name))

    def __reduce__(self):
        return WorkerInfo, (self.name, self.id)


class RemoteError(Exception):
    """An exception raised by a user function on another worker: its type and PyTorch's
    message (``On WorkerInfo(...):``, the exception's repr, the remote traceback). Travels
    as itself; the caller raises ``to_exception()``, the original type."""

    def __init__(self, exc_type, msg):
        super().__init__(exc_type, msg)
        self.exc_type, self.msg = exc_type, msg

    def to_exception(self):
        try:
            return self.exc_type(self.msg)
        except Exception as e:  # noqa: BLE001 - a type that cannot be built from one string
            return RuntimeError(f"Failed to create original exception type. Error msg was {e} Original exception on "
                                f"remote side was {self.msg}")


def _remote_error(me, exc):
    return RemoteError(type(exc), f"On {me}:\n{exc!r}\n{traceback.format_exc()}")


def _run_user(func, args, kwargs):
    """Call the user function; an ``@async_execution`` one returns a Future: its value."""
    out = func(*args, **kwargs)
    if getattr(func, "_wrapped_async_rpc_function", None) is not None:
        if not hasattr(out, "wait"):
            raise TypeError(f"Functions decorated with @rpc.functions.async_execution must return a torch.futures.Future "
                            f"object, but got {type(out)}")
        out = out.wait()
    return out


class _Pending:
    __slots__ = ("future", "peer", "deadline", "timeout")

    def __init__(self, future, peer, timeout):
        self.future, self.peer, self.timeout = future, peer, timeout
        self.deadline = None if timeout <= 0 else time.monotonic() + timeout


class Agent:
    def __init__(self, name, rank, world_size, store, rpc_timeout, num_worker_threads):
        self.rank, self.world_size, self.rpc_timeout = rank, world_size, float(rpc_timeout)
        store.set(f"name/{rank}", name)
        names = [store.get(f"name/{r}").decode() for r in range(world_size)]
        dup = [n for n in names if names.count(n) > 1]
        if dup:
            raise RuntimeError(f"ember.distributed.rpc: worker name {dup[0]!r} is used by more than one worker "
                               f"({[r for r, n in enumerate(names) if n == dup[0]]}); names must be unique")
        self.workers = [WorkerInfo(n, r) for r, n in enumerate(names)]
        self.by_name = {w.name: w for w in self.workers}
        self.me = self.workers[rank]
        self.store = store
        self.mesh = Mesh(rank, world_size, store, max(self.rpc_timeout, 30.0))
        self.pool = ThreadPoolExecutor(max_workers=max(int(num_worker_threads), 1),
                                       thread_name_prefix=f"ember-rpc-{name}")
        self.lock = threading.Lock()
        self.ids = itertools.count()
        self.pending = {}           # request number -> _Pending
        self.owned = {}             # rref id -> concurrent Future of the value
        self.local_work = set()     # futures of calls this worker runs for itself
        self.stopping = False
        self.dispatcher = threading.Thread(target=self._dispatch, daemon=True, name=f"ember-rpc-dispatch-{rank}")
        self.dispatcher.start()

    # ------------------------------------------------------------------ names
    def worker(self, to):
        """``to`` (name, id or WorkerInfo) as a WorkerInfo, with PyTorch's errors."""
        if isinstance(to, WorkerInfo):
            to = to.name
        if isinstance(to, str):
            if to not in self.by_name:
                raise RuntimeError(f"name:{self.me.name},rank:{self.rank} could not find destination name {to}")
            return self.by_name[to]
        if isinstance(to, int) and not isinstance(to, bool):
            if not 0 <= to < self.world_size:
                raise RuntimeError(f"name:{self.me.name},rank:{self.rank} could not find destination id {to}")
            return self.workers[to]
        raise TypeError(f"ember.distributed.rpc: 'to' must be a worker name, id or WorkerInfo, got "
                        f"{type(to).__name__}")

    # ------------------------------------------------------------------ sending
    def request(self, to, kind, body, timeout):
        """Send a request to worker ``to``; an ``ember.futures.Future`` of its answer."""
        from ...futures import Future
        fut = Future()
        t = self.rpc_timeout if timeout is None or timeout < 0 else float(timeout)
        if self.stopping and kind != "fetch":
            raise RuntimeError("ember.distributed.rpc: the RPC agent is shutting down; no new calls")
        payload = _wire.dumps((kind, body))
        if to.id == self.rank:      # a call to oneself: same path, no network
            self._run_local(kind, body, fut, t)
            return fut
        with self.lock:
            n = next(self.ids)
            self.pending[n] = _Pending(fut, to.id, t)
        try:
            self.mesh.send(to.id, ("q", n), payload)
        except Exception as e:  # noqa: BLE001 - delivered through the future
            with self.lock:
                self.pending.pop(n, None)
            fut.set_exception(RuntimeError(f"ember.distributed.rpc: sending to {to} failed: {e}"))
        return fut

    def _run_local(self, kind, body, fut, timeout):
        kind, body = _wire.loads(_wire.dumps((kind, body)))      # the callee gets copies, as remotely

        def run():
            ok, value = self._serve(kind, body, self.rank)
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value.to_exception() if isinstance(value, RemoteError) else value)
        job = self.pool.submit(run)
        with self.lock:
            self.local_work.add(job)
        job.add_done_callback(lambda j: self._forget_local(j))

    def _forget_local(self, job):
        with self.lock:
            self.local_work.discard(job)

    # ------------------------------------------------------------------ serving
    def _serve(self, kind, body, caller):
        """Run one request: (True, value) or (False, RemoteError)."""
        try:
            if kind == "call":
                func, args, kwargs = body
                return True, _run_user(func, args, kwargs)
            if kind == "remote":
                rref_id, func, args, kwargs = body
                cell = self._owned_cell(rref_id)
                try:
                    cell.set_result(_run_user(func, args, kwargs))
                except BaseException as e:  # noqa: BLE001 - kept for to_here, reported to the creator
                    err = _remote_error(self.me, e)
                    cell.set_exception(err)
                    return False, err
                return True, None
            if kind == "fetch":
                (rref_id,) = body
                value = self._owned_cell(rref_id).result()
                return True, value
            raise RuntimeError(f"ember.distributed.rpc: unknown request kind {kind!r}")
        except RemoteError as e:        # a stored remote() failure being fetched
            return False, e
        except BaseException as e:  # noqa: BLE001 - sent back to the caller
            return False, _remote_error(self.me, e)

    def _owned_cell(self, rref_id):
        from concurrent.futures import Future as CFuture
        with self.lock:
            cell = self.owned.get(rref_id)
            if cell is None:
                cell = self.owned[rref_id] = CFuture()
            return cell

    def _answer(self, peer, n, kind, body):
        ok, value = self._serve(kind, body, peer)
        try:
            payload = _wire.dumps((ok, value))
        except Exception as e:  # noqa: BLE001 - an unpicklable result
            payload = _wire.dumps((False, _remote_error(self.me, e)))
        try:
            self.mesh.send(peer, ("a", n), payload)
        except Exception:  # noqa: BLE001 - the caller is gone; nobody to tell
            pass

    # ------------------------------------------------------------------ dispatcher
    def _dispatch(self):
        mesh = self.mesh
        while True:
            requests, answers = [], []
            with mesh.cv:
                for _ in range(2):      # take what is filed; else wait a little and look again
                    for key in list(mesh.mail):
                        peer, k = key
                        if k and k[0] in ("q", "a"):
                            for header, payload in mesh.mail.pop(key):
                                (requests if k[0] == "q" else answers).append((peer, k[1], payload))
                    if requests or answers or mesh.closed:
                        break
                    mesh.cv.wait(0.05)
                closed = mesh.closed
            for peer, n, payload in answers:
                with self.lock:
                    p = self.pending.pop(n, None)
                if p is None:
                    continue        # timed out already
                ok, value = _wire.loads(payload)
                if ok:
                    p.future.set_result(value)
                else:
                    p.future.set_exception(value.to_exception())
            for peer, n, payload in requests:
                kind, body = _wire.loads(payload)
                self.pool.submit(self._answer, peer, n, kind, body)
            self._expire()
            if closed and not requests and not answers:
                self._fail_all("the RPC agent was shut down")
                return

    def _expire(self):
        """Fail the futures past their deadline or waiting on a worker that is gone."""
        now = time.monotonic()
        failed = []
        with self.lock:
            for n, p in list(self.pending.items()):
                if p.deadline is not None and now > p.deadline:
                    failed.append((self.pending.pop(n), RuntimeError(
                        f"RPCErr:1:RPC ran for more than set timeout ({int(p.timeout * 1000)} ms) and will now be "
                        f"marked with an error")))
                elif p.peer in self.mesh.dead:
                    failed.append((self.pending.pop(n), RuntimeError(
                        f"ember.distributed.rpc: worker {self.workers[p.peer]} {self.mesh.dead[p.peer]} before "
                        f"answering")))
        for p, e in failed:
            p.future.set_exception(e)

    def _fail_all(self, why):
        with self.lock:
            items = list(self.pending.values())
            self.pending.clear()
        for p in items:
            p.future.set_exception(RuntimeError(f"ember.distributed.rpc: {why} before the answer arrived"))

    # ------------------------------------------------------------------ shutdown
    def outstanding(self):
        with self.lock:
            return len(self.pending) + len(self.local_work)

    def close(self):
        self.stopping = True
        self.mesh.close(graceful=True)
        self.dispatcher.join(5)
        self.pool.shutdown(wait=True)
