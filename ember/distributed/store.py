"""Key-value stores for rendezvous (PyTorch's ``TCPStore`` / ``FileStore`` / ``HashStore`` /
``PrefixStore``).

Values are bytes (a ``str`` is stored UTF-8 encoded, as PyTorch). ``get`` and ``wait`` block
until the keys exist, up to the store's timeout, then raise ``RuntimeError`` (PyTorch's
``DistStoreError`` is a RuntimeError as well). ``add`` treats the value as a decimal integer
and returns the new value -- the primitive a rendezvous counts arrivals with.

The TCP protocol is ours and carries no pickles (a listening store must not run code sent
to it): each request is one command byte followed by length-prefixed byte strings; the
server is a thread in the master process, one thread per client connection.
"""
from __future__ import annotations

import fcntl
import os
import socket
import struct
import threading
import time
from datetime import timedelta

__all__ = ["Store", "TCPStore", "FileStore", "HashStore", "PrefixStore"]

_DEFAULT_TIMEOUT = timedelta(seconds=300)


def _seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _as_bytes(value, what="value"):
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return bytes(value)
    raise TypeError(f"Store: {what} must be str or bytes, got {type(value).__name__}")


class Store:
    """The interface shared by the stores; subclasses implement the ``_``-prefixed primitives."""

    def __init__(self, timeout=_DEFAULT_TIMEOUT):
        self._timeout = _seconds(timeout)

    @property
    def timeout(self):
        return timedelta(seconds=self._timeout)

    def set_timeout(self, timeout):
        self._timeout = _seconds(timeout)

    def _deadline(self, timeout=None):
        t = self._timeout if timeout is None else _seconds(timeout)
        return None if t is None else time.monotonic() + t

    def _timed_out(self, keys, seconds):
        raise RuntimeError(f"Store: timed out after {seconds:.3g}s waiting for key(s) {list(keys)} "
                           f"(a peer process that should set them has not -- is it running, and did "
                           f"all ranks reach this point?)")

    def set(self, key, value):
        raise NotImplementedError(f"{type(self).__name__}.set: a Store subclass must implement set (ember's own stores do: "
                                  f"TCPStore, FileStore, HashStore, PrefixStore)")

    def get(self, key):
        self.wait([key])
        return self._get_now(key)

    def compare_set(self, key, expected_value, desired_value):
        raise NotImplementedError(f"{type(self).__name__}.compare_set: a Store subclass must implement compare_set (ember's own stores do: "
                                  f"TCPStore, FileStore, HashStore, PrefixStore)")

    def add(self, key, amount):
        raise NotImplementedError(f"{type(self).__name__}.add: a Store subclass must implement add (ember's own stores do: "
                                  f"TCPStore, FileStore, HashStore, PrefixStore)")

    def check(self, keys):
        return all(self._get_now(k) is not None for k in keys)

    def wait(self, keys, timeout=None):
        if isinstance(keys, str):
            keys = [keys]
        t = self._timeout if timeout is None else _seconds(timeout)
        deadline = None if t is None else time.monotonic() + t
        delay = 0.0005
        while True:
            missing = [k for k in keys if self._get_now(k) is None]
            if not missing:
                return
            if deadline is not None and time.monotonic() >= deadline:
                self._timed_out(missing, t)
            time.sleep(delay)
            delay = min(delay * 2, 0.02)

    def delete_key(self, key):
        raise NotImplementedError(f"{type(self).__name__}.delete_key: a Store subclass must implement delete_key (ember's own stores do: "
                                  f"TCPStore, FileStore, HashStore, PrefixStore)")

    def num_keys(self):
        raise NotImplementedError(f"{type(self).__name__}.num_keys: a Store subclass must implement num_keys (ember's own stores do: "
                                  f"TCPStore, FileStore, HashStore, PrefixStore)")

    def _get_now(self, key):
        """The value, or None if the key is not set (never blocks)."""
        raise NotImplementedError(f"{type(self).__name__}._get_now: a Store subclass must implement _get_now (ember's own stores do: "
                                  f"TCPStore, FileStore, HashStore, PrefixStore)")


class HashStore(Store):
    """A store in this process's memory (threads share it)."""

    def __init__(self):
        super().__init__()
        self._data = {}
        self._cv = threading.Condition()

    def set(self, key, value):
        with self._cv:
            self._data[key] = _as_bytes(value)
            self._cv.notify_all()

    def _get_now(self, key):
        with self._cv:
            return self._data.get(key)

    def wait(self, keys, timeout=None):
        if isinstance(keys, str):
            keys = [keys]
        t = self._timeout if timeout is None else _seconds(timeout)
        deadline = None if t is None else time.monotonic() + t
        with self._cv:
            while True:
                missing = [k for k in keys if k not in self._data]
                if not missing:
                    return
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    self._timed_out(missing, t)
                self._cv.wait(left)

    def add(self, key, amount):
        with self._cv:
            v = int(self._data.get(key, b"0")) + int(amount)
            self._data[key] = str(v).encode()
            self._cv.notify_all()
            return v

    def compare_set(self, key, expected_value, desired_value):
        expected, desired = _as_bytes(expected_value), _as_bytes(desired_value)
        with self._cv:
            cur = self._data.get(key)
            if (cur is None and expected == b"") or cur == expected:
                self._data[key] = desired
                self._cv.notify_all()
                return desired
            return expected if cur is None else cur

    def delete_key(self, key):
        with self._cv:
            return self._data.pop(key, None) is not None

    def num_keys(self):
        with self._cv:
            return len(self._data)


class PrefixStore(Store):
    """Every key of ``store`` seen through ``prefix + "/"``: one store serves several groups."""

    def __init__(self, prefix, store):
        super().__init__(timedelta(seconds=store._timeout) if store._timeout is not None else None)
        self.prefix = prefix
        self.underlying_store = store

    def _k(self, key):
        return f"{self.prefix}/{key}"

    def set(self, key, value):
        self.underlying_store.set(self._k(key), value)

    def get(self, key):
        self.wait([key])
        return self._get_now(key)

    def _get_now(self, key):
        return self.underlying_store._get_now(self._k(key))

    def add(self, key, amount):
        return self.underlying_store.add(self._k(key), amount)

    def compare_set(self, key, expected_value, desired_value):
        return self.underlying_store.compare_set(self._k(key), expected_value, desired_value)

    def wait(self, keys, timeout=None):
        if isinstance(keys, str):
            keys = [keys]
        self.underlying_store.wait([self._k(k) for k in keys], timeout if timeout is not None else self._timeout)

    def check(self, keys):
        return self.underlying_store.check([self._k(k) for k in keys])

    def delete_key(self, key):
        return self.underlying_store.delete_key(self._k(key))

    def num_keys(self):
        return self.underlying_store.num_keys()


# ---------------------------------------------------------------------------- TCP store
_SET, _GET, _ADD, _CAS, _DEL, _NUM, _PING = range(7)


def _recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("connection closed by peer")
        got += k
    return bytes(buf)


def _pack(*parts):
    return b"".join(struct.pack("!Q", len(p)) + p for p in parts)


def _recv_part(sock):
    (n,) = struct.unpack("!Q", _recv_exact(sock, 8))
    return _recv_exact(sock, n)


class _StoreServer:
    """The master's side of a TCPStore: a dict behind a lock, served by one thread per client."""

    def __init__(self, host, port):
        self.data = {}
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host if host not in ("localhost",) else "127.0.0.1", port))
        except OSError as e:
            self.sock.close()
            raise RuntimeError(f"TCPStore: could not bind the master store to {host}:{port}: {e} "
                               f"(is the port already in use?)") from e
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        self.clients = []
        threading.Thread(target=self._accept, daemon=True, name="ember-tcpstore-accept").start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.clients.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="ember-tcpstore-client").start()

    def _serve(self, conn):
        try:
            while True:
                cmd = _recv_exact(conn, 1)[0]
                if cmd == _SET:
                    k, v = _recv_part(conn), _recv_part(conn)
                    with self.lock:
                        self.data[k] = v
                    conn.sendall(b"\x01")
                elif cmd == _GET:
                    k = _recv_part(conn)
                    with self.lock:
                        v = self.data.get(k)
                    conn.sendall(b"\x00" if v is None else b"\x01" + _pack(v))
                elif cmd == _ADD:
                    k, a = _recv_part(conn), _recv_part(conn)
                    with self.lock:
                        v = int(self.data.get(k, b"0")) + int(a)
                        self.data[k] = str(v).encode()
                    conn.sendall(_pack(str(v).encode()))
                elif cmd == _CAS:
                    k, e, d = _recv_part(conn), _recv_part(conn), _recv_part(conn)
                    with self.lock:
                        cur = self.data.get(k)
                        if (cur is None and e == b"") or cur == e:
                            self.data[k] = d
                            out = d
                        else:
                            out = e if cur is None else cur
                    conn.sendall(_pack(out))
                elif cmd == _DEL:
                    k = _recv_part(conn)
                    with self.lock:
                        ok = self.data.pop(k, None) is not None
                    conn.sendall(b"\x01" if ok else b"\x00")
                elif cmd == _NUM:
                    with self.lock:
                        n = len(self.data)
                    conn.sendall(_pack(str(n).encode()))
                elif cmd == _PING:
                    conn.sendall(b"\x01")
                else:
                    return
        except (ConnectionError, OSError):
            pass
        finally:
            conn.close()

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        for c in self.clients:
            try:
                c.close()
            except OSError:
                pass


class TCPStore(Store):
    """``TCPStore(host_name, port, world_size=None, is_master=False, timeout=300s, wait_for_workers=True)``.

    The master (``is_master=True``) serves the store from a thread of its process (``port=0``
    picks a free port: read it back from ``store.port``); every instance, the master's
    included, is a client of that server. With ``world_size`` and ``wait_for_workers``, the
    master's constructor waits until that many clients have joined."""

    def __init__(self, host_name, port, world_size=None, is_master=False, timeout=_DEFAULT_TIMEOUT,
                 wait_for_workers=True, multi_tenant=False, master_listen_fd=None, use_libuv=True):
        super().__init__(timeout)
        if not isinstance(port, int) or not 0 <= port < 65536:
            raise ValueError(f"TCPStore: port must be an int in [0, 65535], got {port!r}")
        self.host = host_name
        self._server = _StoreServer(host_name, port) if is_master else None
        self.port = self._server.port if is_master else port
        self.libuvBackend = False
        self._lock = threading.Lock()
        deadline = self._deadline()
        last = None
        while True:
            try:
                self._sock = socket.create_connection((host_name, self.port), timeout=5)
                break
            except OSError as e:
                last = e
                if deadline is not None and time.monotonic() >= deadline:
                    raise RuntimeError(f"TCPStore: could not connect to the master store at {host_name}:{self.port} "
                                       f"within {self._timeout:.3g}s: {last}") from e
                time.sleep(0.01)
        self._sock.settimeout(None)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if world_size is not None and world_size > 0:
            self.add("__ember_store_workers", 1)
            if is_master and wait_for_workers:
                self._wait_count("__ember_store_workers", world_size)

    def _wait_count(self, key, n):
        deadline = self._deadline()
        while int(self._get_now(key) or b"0") < n:
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"TCPStore: timed out after {self._timeout:.3g}s waiting for {n} workers to "
                                   f"join the store (got {int(self._get_now(key) or b'0')})")
            time.sleep(0.005)

    @property
    def local_address(self):
        """The address this process reaches the master with (the interface peers can reach it on)."""
        return self._sock.getsockname()[0]

    def _request(self, payload, reply):
        with self._lock:
            try:
                self._sock.sendall(payload)
                return reply()
            except (ConnectionError, OSError) as e:
                raise RuntimeError(f"TCPStore: lost the connection to the master store at {self.host}:{self.port} "
                                   f"({e}); the master process (rank 0) has probably exited") from e

    def set(self, key, value):
        self._request(bytes([_SET]) + _pack(key.encode(), _as_bytes(value)), lambda: _recv_exact(self._sock, 1))

    def _get_now(self, key):
        def reply():
            if _recv_exact(self._sock, 1) == b"\x00":
                return None
            return _recv_part(self._sock)
        return self._request(bytes([_GET]) + _pack(key.encode()), reply)

    def add(self, key, amount):
        return int(self._request(bytes([_ADD]) + _pack(key.encode(), str(int(amount)).encode()),
                                 lambda: _recv_part(self._sock)))

    def compare_set(self, key, expected_value, desired_value):
        return self._request(bytes([_CAS]) + _pack(key.encode(), _as_bytes(expected_value), _as_bytes(desired_value)),
                             lambda: _recv_part(self._sock))

    def delete_key(self, key):
        return self._request(bytes([_DEL]) + _pack(key.encode()), lambda: _recv_exact(self._sock, 1)) == b"\x01"

    def num_keys(self):
        return int(self._request(bytes([_NUM]), lambda: _recv_part(self._sock)))

    def close(self):
        try:
            self._sock.close()
        except OSError:
            pass
        if self._server is not None:
            self._server.close()
            self._server = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# ---------------------------------------------------------------------------- file store
class FileStore(Store):
    """``FileStore(file_name, world_size=-1)``: the store is a file (on a filesystem every
    process sees) holding an append-only log of records, read and written under ``flock``.
    Later records override earlier ones; a deleted key is a record with no value."""

    def __init__(self, file_name, world_size=-1, timeout=_DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self.path = file_name
        self.world_size = world_size
        fd = os.open(file_name, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)

    def _locked(self, fn):
        with open(self.path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                return fn(f)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    @staticmethod
    def _read(f):
        f.seek(0)
        raw = f.read()
        data, i = {}, 0
        while i < len(raw):
            (kn,) = struct.unpack_from("!Q", raw, i)
            k = raw[i + 8:i + 8 + kn]
            i += 8 + kn
            (vn,) = struct.unpack_from("!q", raw, i)
            i += 8
            if vn < 0:
                data.pop(k, None)
            else:
                data[k] = raw[i:i + vn]
                i += vn
        return data

    @staticmethod
    def _append(f, key, value):
        f.seek(0, os.SEEK_END)
        rec = struct.pack("!Q", len(key)) + key
        rec += struct.pack("!q", -1) if value is None else struct.pack("!q", len(value)) + value
        f.write(rec)
        f.flush()

    def set(self, key, value):
        v = _as_bytes(value)
        self._locked(lambda f: self._append(f, key.encode(), v))

    def _get_now(self, key):
        return self._locked(lambda f: self._read(f).get(key.encode()))

    def add(self, key, amount):
        def go(f):
            v = int(self._read(f).get(key.encode(), b"0")) + int(amount)
            self._append(f, key.encode(), str(v).encode())
            return v
        return self._locked(go)

    def compare_set(self, key, expected_value, desired_value):
        e, d = _as_bytes(expected_value), _as_bytes(desired_value)

        def go(f):
            cur = self._read(f).get(key.encode())
            if (cur is None and e == b"") or cur == e:
                self._append(f, key.encode(), d)
                return d
            return e if cur is None else cur
        return self._locked(go)

    def delete_key(self, key):
        def go(f):
            had = key.encode() in self._read(f)
            if had:
                self._append(f, key.encode(), None)
            return had
        return self._locked(go)

    def num_keys(self):
        return self._locked(lambda f: len(self._read(f)))
