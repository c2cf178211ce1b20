"""The TCP transport: ranks started as separate processes (torchrun-style) joined by sockets.

MPI cannot join processes it did not start here (Open MPI 5's ``Comm_accept``/``Comm_connect``
fail with ``MPI_ERR_INTERN`` between singletons, which share no PMIx server; see
docs/decisions.md), so ranks that met through a :class:`Store` connect to each other directly.

:class:`TcpTransport` holds one socket per pair of ranks (rank r connects to every lower rank,
whose address it reads from the store, and accepts the higher ones) and one receiver thread per
socket that reads every message as soon as it arrives. A message is a header (group context,
kind, tag, byte count) and the raw bytes of a flat array. A receive is *posted* and matched to
messages in the order both happen, per sender and tag, as MPI matches them; so a send never
waits for its receiver, and two ranks sending each other large arrays cannot deadlock.

:class:`TcpComm` is one group on a transport, with the methods of ``MpiComm``
(munet/distributed/mpi_comm.py). Its collectives run one at a time, in call order, on a thread
of the group, so ``async_op=True`` overlaps them with the caller. The all-reduce of a large
array is a ring (reduce-scatter then all-gather, each chunk reduced on one rank and copied to
the others, so every rank gets the same bits); small arrays, and every other collective, go
directly between each pair, reduced in rank order. A peer whose connection closes (it died or
left) fails every receive waiting for it at once, with ``DistBackendError`` naming it; a peer
that stays silent fails it after the group's timeout, also naming it.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time
import zlib
from collections import deque
from datetime import timedelta

import numpy as np

from munet.distributed.errors import DistBackendError, DistNetworkError
from munet.distributed.tcp_store import connect, recv_exactly

_HEADER = struct.Struct("<IBqQ")  # group context, kind, tag, byte count
_RANK = struct.Struct("<q")
P2P, COLLECTIVE = 0, 1
RING_MIN_BYTES = 1 << 16  # smaller all-reduces exchange whole arrays (one round trip)
_WAIT_GRACE_SECONDS = 0.5  # a collective's own timeout (naming the rank) fires before the caller's

_UFUNCS = {
    "SUM": np.add, "PROD": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
    "LAND": np.logical_and, "LOR": np.logical_or, "LXOR": np.logical_xor,
    "BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor,
}  # fmt: skip


def _raw(array: np.ndarray) -> np.ndarray:
    """The bytes of a contiguous array, as a flat uint8 view."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


class TcpRequest:
    """One operation's completion: ``test()``, ``wait(seconds)``; ``source``/``nbytes`` of a receive."""

    def __init__(self, grace: float = 0.0, on_message=None):
        self._event = threading.Event()
        self._grace = grace
        self._on_message = on_message
        self.error: BaseException | None = None
        self.source = -1
        self.nbytes = 0
        self.payload = b""

    def deliver(self, source: int, payload) -> None:
        self.source, self.nbytes, self.payload = source, len(payload), payload
        if self._on_message is not None:
            self._on_message(payload)
        self._event.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self._event.set()

    def test(self) -> bool:
        if not self._event.is_set():
            return False
        if self.error is not None:
            raise self.error
        return True

    def wait(self, seconds: float) -> bool:
        self._event.wait(seconds + self._grace)
        return self.test()

    def poll(self) -> bool:
        """``MpiRequest.poll``'s spin drives MPI's progress; here the transport's thread moves the data: one test."""
        return self.test()


def finished_request() -> TcpRequest:
    request = TcpRequest()
    request.deliver(-1, b"")
    return request


class _Posted:
    def __init__(self, sources: frozenset, request: TcpRequest):
        self.sources = sources
        self.request = request


def advertised_host(store) -> str:
    """The address peers should use to reach this process: the one its store connection uses."""
    inner = store
    while hasattr(inner, "underlying_store"):
        inner = inner.underlying_store
    if hasattr(inner, "local_host"):
        return inner.local_host()
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class TcpTransport:
    """The sockets between this rank and every other rank of one job."""

    def __init__(self, rank: int, size: int, store, timeout: timedelta):
        self.rank, self.size = rank, size
        self._changed = threading.Lock()
        self._arrived: dict[tuple, deque] = {}
        self._posted: dict[tuple, list[_Posted]] = {}
        self._gone: dict[int, str] = {}
        self._closing = False
        self._peers: dict[int, socket.socket] = {}
        self._send_locks = {r: threading.Lock() for r in range(size)}
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("", 0))
        listener.listen(max(size, 1))
        listener.settimeout(timeout.total_seconds())
        store.set(f"tcp/address/{rank}", f"{advertised_host(store)}:{listener.getsockname()[1]}")
        try:
            for peer in range(rank):
                host, port = store.get(f"tcp/address/{peer}").decode("ascii").rsplit(":", 1)
                sock = connect(host, int(port), timeout, f"init_process_group: connecting to rank {peer}")
                sock.sendall(_RANK.pack(rank))
                self._peers[peer] = sock
            for _ in range(size - 1 - rank):
                sock, _ = listener.accept()
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                greeting = recv_exactly(sock, _RANK.size)
                if greeting is None:
                    raise DistNetworkError(f"init_process_group: a peer of rank {rank} hung up before saying its rank")
                self._peers[_RANK.unpack(greeting)[0]] = sock
        except TimeoutError:
            missing = sorted(set(range(size)) - set(self._peers) - {rank})
            raise DistNetworkError(
                f"init_process_group: rank {rank} timed out after {timeout.total_seconds():g} s waiting for "
                f"rank(s) {missing} to connect"
            ) from None
        finally:
            listener.close()
        for peer, sock in self._peers.items():
            threading.Thread(target=self._receive, args=(peer, sock), name=f"munet-recv-{peer}", daemon=True).start()

    # sending ------------------------------------------------------------------------------------------
    def send(self, dst: int, context: int, kind: int, tag: int, data: np.ndarray) -> None:
        raw = _raw(data)
        if dst == self.rank:
            self._arrive(dst, (context, kind, tag), raw.tobytes())
            return
        if dst in self._gone:
            raise DistBackendError(f"cannot send to rank {dst}: {self._gone[dst]}")
        try:
            with self._send_locks[dst]:
                self._peers[dst].sendall(_HEADER.pack(context, kind, tag, raw.nbytes))
                self._peers[dst].sendall(memoryview(raw))
        except OSError as error:
            raise DistBackendError(f"sending to rank {dst} failed ({error}); the process may have died") from None

    # receiving ----------------------------------------------------------------------------------------
    def post(self, sources: frozenset, context: int, kind: int, tag: int, request: TcpRequest) -> TcpRequest:
        """Match ``request`` to the first message from one of ``sources`` (now, or when it arrives)."""
        key = (context, kind, tag)
        with self._changed:
            waiting = self._arrived.get(key, deque())
            found = next((i for i, (source, _) in enumerate(waiting) if source in sources), None)
            if found is None:
                gone = [r for r in sources if r in self._gone]
                if gone:
                    request.fail(DistBackendError(f"rank {gone[0]} {self._gone[gone[0]]}"))
                else:
                    self._posted.setdefault(key, []).append(_Posted(sources, request))
                return request
            source, payload = waiting[found]
            del waiting[found]
        request.deliver(source, payload)
        return request

    def _arrive(self, source: int, key: tuple, payload) -> None:
        with self._changed:
            posted = self._posted.get(key, [])
            match = next((p for p in posted if source in p.sources), None)
            if match is None:
                self._arrived.setdefault(key, deque()).append((source, payload))
                return
            posted.remove(match)
        match.request.deliver(source, payload)

    def _receive(self, peer: int, sock: socket.socket) -> None:
        reason = "closed its connection (the process exited or crashed)"
        try:
            while (header := recv_exactly(sock, _HEADER.size)) is not None:
                context, kind, tag, count = _HEADER.unpack(header)
                payload = bytearray(count)
                view, got = memoryview(payload), 0
                while got < count:
                    n = sock.recv_into(view[got:])
                    if not n:
                        raise ConnectionError("connection closed in the middle of a message")
                    got += n
                self._arrive(peer, (context, kind, tag), payload)
        except OSError as error:
            reason = f"broke its connection ({error})"
        if not self._closing:
            self._mark_gone(peer, reason)

    def _mark_gone(self, peer: int, reason: str) -> None:
        failed = []
        with self._changed:
            self._gone[peer] = reason
            for posted in self._posted.values():
                failed += [p for p in posted if peer in p.sources]
                posted[:] = [p for p in posted if peer not in p.sources]
        for p in failed:
            p.request.fail(DistBackendError(f"rank {peer} {reason}"))

    def close(self) -> None:
        self._closing = True
        for sock in self._peers.values():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


_GONE_POLL_S = 0.5  # how often a waiting receive checks whether a member of its group died


class TcpComm:
    """A group of ranks (``ranks``: their ranks in the job, in group order) on a TcpTransport."""

    def __init__(self, transport: TcpTransport, context: int, ranks: list[int], timeout: timedelta):
        self.transport = transport
        self.context = context
        self.ranks = list(ranks)
        self.timeout = timeout
        self._me = self.ranks.index(transport.rank)
        self._sequence = 0
        self._children = 0
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        # a daemon thread: a collective stuck on a silent peer must not keep the process from exiting
        threading.Thread(target=self._run_jobs, name=f"munet-group-{context}", daemon=True).start()

    def _run_jobs(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def rank(self) -> int:
        return self._me

    def size(self) -> int:
        return len(self.ranks)

    # plumbing -----------------------------------------------------------------------------------------
    def _start(self, what: str, body, *args) -> TcpRequest:
        """Run ``body(tag, what, *args)`` on the group's thread after the collectives called before it."""
        tag, self._sequence = self._sequence, self._sequence + 1
        request = TcpRequest(grace=_WAIT_GRACE_SECONDS)

        def run():
            try:
                body(tag, what, *args)
            except BaseException as error:  # handed to whoever waits on the request
                request.fail(error)
                return
            request.deliver(-1, b"")

        self._jobs.put(run)
        return request

    def _send(self, peer: int, tag: int, data: np.ndarray) -> None:
        self.transport.send(self.ranks[peer], self.context, COLLECTIVE, tag, data)

    def _recv(self, peer: int, tag: int, what: str, dtype) -> np.ndarray:
        request = self.transport.post(frozenset([self.ranks[peer]]), self.context, COLLECTIVE, tag, TcpRequest())
        seconds = self.timeout.total_seconds()
        deadline = time.monotonic() + seconds
        try:
            # in slices: a member that died while this rank waits on another one fails the
            # collective at once (the one waited on may never send: it failed too)
            while not (done := request.wait(min(_GONE_POLL_S, max(deadline - time.monotonic(), 0.0)))):
                death = self._first_death()
                if death is not None:
                    raise DistBackendError(death)
                if time.monotonic() >= deadline:
                    break
        except DistBackendError as error:
            # name the first member that died, not a rank that failed after it
            raise DistBackendError(f"{what}: {self._first_death() or error}") from None
        if not done:
            raise DistBackendError(f"{what}: timed out after {seconds:g} s waiting for rank {self.ranks[peer]}")
        return np.frombuffer(request.payload, dtype=dtype)

    def _first_death(self) -> str | None:
        """How the first rank of this group that died went (the transport records deaths in order), or None."""
        gone = self.transport._gone
        first = next((r for r in list(gone) if r in self.ranks), None)
        return None if first is None else f"rank {first} {gone[first]}"

    def _others(self):
        return [r for r in range(self.size()) if r != self._me]

    def _exchange(self, tag: int, what: str, data: np.ndarray) -> list[np.ndarray]:
        """Every rank's ``data``, in group order (this rank's own included)."""
        for peer in self._others():
            self._send(peer, tag, data)
        return [data if r == self._me else self._recv(r, tag, what, data.dtype) for r in range(self.size())]

    @staticmethod
    def _into(target: np.ndarray, values: np.ndarray, what: str) -> None:
        if values.size != target.size:
            raise DistBackendError(f"{what}: expected {target.nbytes} bytes, a peer sent {values.nbytes}")
        target[...] = values

    # collectives -------------------------------------------------------------------------------------
    def allreduce(self, array: np.ndarray, op: str) -> TcpRequest:
        return self._start("all_reduce", self._allreduce, array.reshape(-1), _UFUNCS[op])

    def _allreduce(self, tag, what, flat, combine) -> None:
        n = self.size()
        if n == 1:
            return
        if flat.size < n or flat.nbytes < RING_MIN_BYTES:
            self._into(flat, _reduce_in_order(self._exchange(tag, what, flat), combine), what)
            return
        bounds = np.linspace(0, flat.size, n + 1).astype(np.int64)
        chunks = [flat[bounds[c] : bounds[c + 1]] for c in range(n)]
        right, left = (self._me + 1) % n, (self._me - 1) % n
        for step in range(n - 1):  # reduce-scatter: this rank ends up owning chunk me + 1
            self._send(right, tag, chunks[(self._me - step) % n])
            chunk = chunks[(self._me - step - 1) % n]
            combine(chunk, self._recv(left, tag, what, flat.dtype), out=chunk)
        for step in range(n - 1):  # all-gather of the reduced chunks
            self._send(right, tag, chunks[(self._me + 1 - step) % n])
            self._into(chunks[(self._me - step) % n], self._recv(left, tag, what, flat.dtype), what)

    def reduce(self, array: np.ndarray, op: str, root: int) -> TcpRequest:
        return self._start("reduce", self._reduce, array.reshape(-1), _UFUNCS[op], root)

    def _reduce(self, tag, what, flat, combine, root) -> None:
        if self._me != root:
            self._send(root, tag, flat)
            return
        parts = [flat if r == root else self._recv(r, tag, what, flat.dtype) for r in range(self.size())]
        self._into(flat, _reduce_in_order(parts, combine), what)

    def bcast(self, array: np.ndarray, root: int) -> TcpRequest:
        return self._start("broadcast", self._bcast, array.reshape(-1), root)

    def _bcast(self, tag, what, flat, root) -> None:
        if self._me == root:
            for peer in self._others():
                self._send(peer, tag, flat)
        else:
            self._into(flat, self._recv(root, tag, what, flat.dtype), what)

    def gather_rows(self, row: np.ndarray) -> tuple[TcpRequest, np.ndarray]:
        """``MpiComm.gather_rows``: an all-gather of one int64 row per rank; the request and its table."""
        table = np.empty((self.size(), row.size), dtype=np.int64)
        return self.allgather(row, table), table

    def allgather(self, send: np.ndarray, recv: np.ndarray) -> TcpRequest:
        return self.allgatherv(send, recv, [send.size] * self.size())

    def allgatherv(self, send: np.ndarray, recv: np.ndarray, counts) -> TcpRequest:
        return self._start("all_gather", self._allgatherv, send.reshape(-1), recv.reshape(-1), list(counts))

    def _allgatherv(self, tag, what, send, recv, counts) -> None:
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        for r, part in enumerate(self._exchange(tag, what, send)):
            self._into(recv[offsets[r] : offsets[r + 1]], part, what)

    def reduce_scatter(self, send: np.ndarray, recv: np.ndarray, op: str) -> TcpRequest:
        return self._start("reduce_scatter", self._reduce_scatter, send.reshape(-1), recv.reshape(-1), _UFUNCS[op])

    def _reduce_scatter(self, tag, what, send, recv, combine) -> None:
        chunks = send.reshape(self.size(), -1)
        for peer in self._others():
            self._send(peer, tag, chunks[peer])
        parts = [chunks[r] if r == self._me else self._recv(r, tag, what, send.dtype) for r in range(self.size())]
        self._into(recv, _reduce_in_order(parts, combine), what)

    def alltoallv(self, send: np.ndarray, send_counts, recv: np.ndarray, recv_counts) -> TcpRequest:
        args = (send.reshape(-1), list(send_counts), recv.reshape(-1), list(recv_counts))
        return self._start("all_to_all", self._alltoallv, *args)

    def _alltoallv(self, tag, what, send, send_counts, recv, recv_counts) -> None:
        send_at = np.concatenate([[0], np.cumsum(send_counts)]).astype(np.int64)
        recv_at = np.concatenate([[0], np.cumsum(recv_counts)]).astype(np.int64)
        for peer in self._others():
            self._send(peer, tag, send[send_at[peer] : send_at[peer + 1]])
        for r in range(self.size()):
            part = send[send_at[r] : send_at[r + 1]] if r == self._me else self._recv(r, tag, what, send.dtype)
            self._into(recv[recv_at[r] : recv_at[r + 1]], part, what)

    def gather(self, send: np.ndarray, recv: np.ndarray | None, root: int) -> TcpRequest:
        return self._start("gather", self._gather, send.reshape(-1), recv, root)

    def _gather(self, tag, what, send, recv, root) -> None:
        if self._me != root:
            self._send(root, tag, send)
            return
        rows = recv.reshape(self.size(), -1)
        for r in range(self.size()):
            self._into(rows[r], send if r == root else self._recv(r, tag, what, send.dtype), what)

    def scatter(self, send: np.ndarray | None, recv: np.ndarray, root: int) -> TcpRequest:
        return self._start("scatter", self._scatter, send, recv.reshape(-1), root)

    def _scatter(self, tag, what, send, recv, root) -> None:
        if self._me != root:
            self._into(recv, self._recv(root, tag, what, recv.dtype), what)
            return
        rows = send.reshape(self.size(), -1)
        for peer in self._others():
            self._send(peer, tag, rows[peer])
        self._into(recv, rows[root], what)

    def barrier(self) -> TcpRequest:
        return self._start("barrier", self._exchange, np.empty(0, dtype=np.uint8))

    # point to point -----------------------------------------------------------------------------------
    def send(self, array: np.ndarray, dst: int, tag: int) -> TcpRequest:
        self.transport.send(self.ranks[dst], self.context, P2P, tag, array)
        return finished_request()

    def recv(self, array: np.ndarray, src: int | None, tag: int) -> TcpRequest:
        """Receive into ``array`` from group rank ``src`` (any member when None); ``source`` is a group rank."""
        target = _raw(array)

        def store(payload):
            if len(payload) == target.nbytes:
                target[...] = np.frombuffer(payload, dtype=np.uint8)

        sources = frozenset(self.ranks if src is None else [self.ranks[src]])
        return self.transport.post(sources, self.context, P2P, tag, _GroupRequest(self.ranks, store))

    def subgroup(self, members: list[int]) -> TcpComm | None:
        """The group of ``members`` (ranks of this group); every rank of this group calls it, in the
        same order, and non-members get None."""
        ranks = [self.ranks[m] for m in members]
        # Named by where it was made, the same on every rank with no message: this group's
        # context, how many groups it made before, and the members.
        context = zlib.crc32(repr((self.context, self._children, ranks)).encode()) or 1
        self._children += 1
        return TcpComm(self.transport, context, ranks, self.timeout) if self.transport.rank in ranks else None

    def free(self) -> None:
        self._jobs.put(None)
        if self.context == 0:
            self.transport.close()


class _GroupRequest(TcpRequest):
    """A receive whose ``source`` is reported as a rank of its group."""

    def __init__(self, ranks: list[int], on_message):
        super().__init__(on_message=on_message)
        self._ranks = ranks

    def deliver(self, source: int, payload) -> None:
        super().deliver(self._ranks.index(source), payload)


def _reduce_in_order(parts: list[np.ndarray], combine) -> np.ndarray:
    total = parts[0].copy()
    for part in parts[1:]:
        combine(total, part, out=total)
    return total
