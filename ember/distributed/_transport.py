"""Point-to-point links between ranks: a full mesh of TCP connections with one reader thread
per peer delivering framed messages into a mailbox.

A frame is ``!QQ`` (header length, payload length), a JSON header and the payload bytes. The
header carries the message's key (which operation of which group, e.g. ``["c", 0, 17, 0]`` =
collective #17 of group 0, part 0), the dtype name and shape of a tensor payload (so a
receiver can report a size mismatch instead of misreading bytes) or an error text a peer
broadcast before raising. Nothing is unpickled here: object collectives pickle their objects
themselves, as PyTorch's do.

Because every message names its operation, operations never steal each other's messages: an
``async_op`` collective running in a worker thread, a ``recv`` and a later collective can be
in flight at the same time. A reader that hits end-of-stream marks its peer dead, so a rank
waiting on a crashed peer fails at once with a message naming it instead of waiting for the
timeout.
"""
from __future__ import annotations

import json
import socket
import struct
import threading
import time

_HDR = struct.Struct("!QQ")


def _recv_exact_into(sock, view):
    got, n = 0, len(view)
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed the connection")
        got += k


class DistTimeoutError(RuntimeError):
    """A collective or point-to-point operation waited longer than the group's timeout."""


class PeerError(RuntimeError):
    """A peer reported an error for this operation (e.g. a size mismatch), or died."""


class Mesh:
    """Connections from this rank to every other rank of the world.

    Set up through a store: each rank listens on a fresh port, publishes ``host:port`` under
    ``addr/<rank>``, connects to every lower rank and accepts every higher one; a connecting
    rank introduces itself with its rank and the rendezvous nonce (a stale connection from an
    earlier run of the same port is refused)."""

    def __init__(self, rank, world_size, store, timeout, host=None):
        self.rank, self.world_size, self.timeout = rank, world_size, timeout
        self.socks = {}
        self.send_locks = {}
        self.mail = {}
        self.dead = {}
        self.cv = threading.Condition()
        self.closed = False
        self.readers = []
        if world_size == 1:
            return
        if rank == 0:
            import os
            store.set("nonce", os.urandom(8).hex())
        nonce = store.get("nonce").decode()
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.bind(("0.0.0.0" if host not in ("127.0.0.1", "localhost") else "127.0.0.1", 0))
        lsock.listen(world_size)
        port = lsock.getsockname()[1]
        store.set(f"addr/{rank}", f"{host or '127.0.0.1'}:{port}")
        deadline = time.monotonic() + timeout
        try:
            for peer in range(rank):
                h, p = store.get(f"addr/{peer}").decode().rsplit(":", 1)
                s = self._connect(h, int(p), deadline, peer)
                s.sendall(struct.pack("!I", rank) + nonce.encode())
                self._add(peer, s)
            lsock.settimeout(0.2)
            while len(self.socks) < world_size - 1:
                if time.monotonic() > deadline:
                    missing = [r for r in range(rank + 1, world_size) if r not in self.socks]
                    raise DistTimeoutError(f"init_process_group: rank {rank} timed out after {timeout:.3g}s waiting "
                                           f"for rank(s) {missing} to connect")
                try:
                    s, _ = lsock.accept()
                except socket.timeout:
                    continue
                s.settimeout(max(deadline - time.monotonic(), 0.1))
                try:
                    buf = bytearray(4 + len(nonce))
                    _recv_exact_into(s, memoryview(buf))
                except (OSError, ConnectionError):
                    s.close()
                    continue
                peer = struct.unpack("!I", buf[:4])[0]
                if buf[4:].decode(errors="replace") != nonce or not rank < peer < world_size or peer in self.socks:
                    s.close()
                    continue
                self._add(peer, s)
        except BaseException:
            self.close(graceful=False)
            raise
        finally:
            lsock.close()
        for peer, s in self.socks.items():
            t = threading.Thread(target=self._reader, args=(peer, s), daemon=True, name=f"ember-dist-recv-{peer}")
            t.start()
            self.readers.append(t)

    @staticmethod
    def _connect(host, port, deadline, peer):
        while True:
            try:
                return socket.create_connection((host, port), timeout=5)
            except OSError as e:
                if time.monotonic() > deadline:
                    raise DistTimeoutError(f"init_process_group: could not connect to rank {peer} at {host}:{port}: "
                                           f"{e}") from e
                time.sleep(0.01)

    def _add(self, peer, s):
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socks[peer] = s
        self.send_locks[peer] = threading.Lock()

    # ------------------------------------------------------------------ reading
    def _reader(self, peer, s):
        hdr = bytearray(_HDR.size)
        try:
            while True:
                _recv_exact_into(s, memoryview(hdr))
                hn, pn = _HDR.unpack(hdr)
                hb = bytearray(hn)
                _recv_exact_into(s, memoryview(hb))
                payload = bytearray(pn)
                if pn:
                    _recv_exact_into(s, memoryview(payload))
                header = json.loads(hb.decode())
                key = (peer, tuple(header["k"]))
                with self.cv:
                    self.mail.setdefault(key, []).append((header, payload))
                    self.cv.notify_all()
        except (ConnectionError, OSError, ValueError) as e:
            with self.cv:
                self.dead[peer] = "closed its connection (the process exited or crashed)" \
                    if isinstance(e, ConnectionError) else f"connection failed: {e}"
                self.cv.notify_all()

    # ------------------------------------------------------------------ API
    def send(self, peer, key, payload=b"", **meta):
        if self.closed:
            raise RuntimeError("ember.distributed: the process group has been destroyed")
        meta["k"] = list(key)
        hb = json.dumps(meta).encode()
        mv = memoryview(payload).cast("B") if len(payload) else b""
        s = self.socks.get(peer)
        if s is None:
            raise RuntimeError(f"ember.distributed: no connection to rank {peer}")
        with self.send_locks[peer]:
            try:
                s.sendall(_HDR.pack(len(hb), len(mv)) + hb)
                if len(mv):
                    s.sendall(mv)
            except OSError as e:
                raise PeerError(f"ember.distributed: sending to rank {peer} failed ({e}); rank {peer} has probably "
                                f"exited or crashed") from e

    def recv_many(self, peers, key, what, timeout=None):
        """Wait for the message ``key`` from each of ``peers``; {peer: (header, payload)}.
        Raises naming the peers still missing at the timeout, or the peer that died or sent an
        error."""
        key = tuple(key)
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        out = {}
        with self.cv:
            while True:
                for p in peers:
                    if p in out:
                        continue
                    box = self.mail.get((p, key))
                    if box:
                        out[p] = box.pop(0)
                        if not box:
                            del self.mail[(p, key)]
                        if "err" in out[p][0]:
                            raise PeerError(out[p][0]["err"])
                missing = [p for p in peers if p not in out]
                if not missing:
                    return out
                for p in missing:
                    if p in self.dead:
                        raise PeerError(f"ember.distributed: {what}: rank {p} {self.dead[p]} while rank "
                                        f"{self.rank} was waiting for it")
                if self.closed:
                    raise RuntimeError(f"ember.distributed: {what}: the process group was destroyed")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DistTimeoutError(f"ember.distributed: {what} timed out after {timeout:.3g}s on rank "
                                           f"{self.rank} waiting for rank(s) {missing} (they have not reached this "
                                           f"operation, or are blocked elsewhere)")
                self.cv.wait(min(left, 1.0))

    def recv_any(self, peers, key_of, what, timeout=None):
        """The first message among ``key_of(p)`` for p in ``peers``: (peer, header, payload)."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for p in peers:
                    k = (p, tuple(key_of(p)))
                    box = self.mail.get(k)
                    if box:
                        h, pl = box.pop(0)
                        if not box:
                            del self.mail[k]
                        return p, h, pl
                if all(p in self.dead for p in peers):
                    raise PeerError(f"ember.distributed: {what}: every possible sender closed its connection")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DistTimeoutError(f"ember.distributed: {what} timed out after {timeout:.3g}s on rank "
                                           f"{self.rank} waiting for a message from any of rank(s) {list(peers)}")
                self.cv.wait(min(left, 1.0))

    def close(self, graceful=True, linger=2.0):
        """Close every connection. Graceful: stop writing, let the peers' end-of-stream arrive
        (up to ``linger`` seconds) so no unread data makes the kernel reset a connection a peer
        is still reading from, then close."""
        if self.closed:
            return
        if graceful:
            for s in self.socks.values():
                try:
                    s.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            deadline = time.monotonic() + linger
            with self.cv:
                while len(self.dead) < len(self.socks) and time.monotonic() < deadline:
                    self.cv.wait(0.05)
        with self.cv:
            self.closed = True
            self.cv.notify_all()
        for s in self.socks.values():
            try:
                s.close()
            except OSError:
                pass
