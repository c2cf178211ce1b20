"""``TCPStore``: a store that one process serves over TCP and every rank reaches (PyTorch's).

The master (``is_master=True``) serves a :class:`HashStore`'s table on ``port`` (0 picks a free
one; ``.port`` says which); every ``TCPStore``, the master's too, is a client with one
connection. A message is a 4-byte big-endian length and a JSON document (bytes travel as
base64), so a peer can send only data, never code. A server thread per connection runs the
operation on the table; ``wait`` blocks that thread, not the server.

With ``world_size`` and ``wait_for_workers``, the master's constructor returns once
``world_size`` stores (itself included) have connected, as PyTorch's does; they count in the
hidden key ``init/``, which ``num_keys`` counts and ``list_keys`` hides.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time
from datetime import timedelta

from munet.distributed.errors import DistNetworkError, DistStoreError
from munet.distributed.store import HIDDEN_PREFIX, POLL_SECONDS, HashStore, Store, default_store_timeout

_LENGTH = struct.Struct(">I")
_WORKERS_KEY = HIDDEN_PREFIX
_servers: dict[int, _Server] = {}  # port -> the server of this process (multi_tenant shares it)


def _encode(value):
    if isinstance(value, bytes):
        return {"b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


def _decode(value):
    if isinstance(value, dict):
        return base64.b64decode(value["b"])
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def send_message(sock: socket.socket, message: dict) -> None:
    data = json.dumps(message).encode("utf-8")
    sock.sendall(_LENGTH.pack(len(data)) + data)


def recv_exactly(sock: socket.socket, count: int) -> bytes | None:
    """``count`` bytes from ``sock``, or None when the peer closed the connection first."""
    chunks, got = [], 0
    while got < count:
        chunk = sock.recv(min(count - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_message(sock: socket.socket) -> dict | None:
    header = recv_exactly(sock, _LENGTH.size)
    if header is None:
        return None
    body = recv_exactly(sock, _LENGTH.unpack(header)[0])
    return None if body is None else json.loads(body.decode("utf-8"))


class _Server:
    """Serves one table on a listening socket; a daemon thread per client connection."""

    def __init__(self, listener: socket.socket):
        self.listener = listener
        self.port = listener.getsockname()[1]
        self.table = HashStore()
        threading.Thread(target=self._accept, name=f"munet-tcpstore-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            while (request := recv_message(connection)) is not None:
                send_message(connection, self._answer(request))

    def _answer(self, request: dict) -> dict:
        op, args = request.get("op"), _decode(request.get("args", []))
        try:
            if op == "wait":
                return {"ok": self.table._wait(args[0], float(args[1]))}
            return {"ok": _encode(self.table._apply(op, *args))}
        except DistStoreError as error:
            return {"error": str(error)}
        except (KeyError, ValueError, TypeError, IndexError) as error:
            return {"error": f"TCPStore: {op}: {type(error).__name__}: {error}"}


def _listen(port: int, master_listen_fd: int | None) -> socket.socket:
    if master_listen_fd is not None:
        return socket.socket(fileno=master_listen_fd)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("", port))
    except OSError as error:
        listener.close()
        raise DistNetworkError(
            f"TCPStore: the server socket has failed to listen on port {port}: {error.strerror} "
            "(is another job using it? pass port=0 to pick a free port)"
        ) from None
    listener.listen(128)
    return listener


def connect(host: str, port: int, timeout: timedelta, what: str) -> socket.socket:
    """A TCP connection to ``host:port``, retried until ``timeout`` (the server may start later)."""
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.01))
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError:
            if time.monotonic() >= deadline:
                raise DistNetworkError(
                    f"{what}: the client socket has timed out after {round(timeout.total_seconds() * 1000)}ms "
                    f"while trying to connect to ({host}, {port})"
                ) from None
            time.sleep(POLL_SECONDS * 5)


class TCPStore(Store):
    """``TCPStore(host_name, port, world_size=None, is_master=False, timeout=timedelta(seconds=300),
    wait_for_workers=True, multi_tenant=False, master_listen_fd=None, use_libuv=True)``.

    ``use_libuv`` is accepted and ignored (the server is Python threads).
    """

    def __init__(
        self,
        host_name: str,
        port: int,
        world_size: int | None = None,
        is_master: bool = False,
        timeout: timedelta = default_store_timeout,
        wait_for_workers: bool = True,
        multi_tenant: bool = False,
        master_listen_fd: int | None = None,
        use_libuv: bool = True,
    ):
        super().__init__(timeout)
        if not isinstance(port, int) or not 0 <= port < 65536:
            raise ValueError(f"TCPStore: port must be an int in [0, 65536), got {port!r}")
        if world_size is not None and world_size < 1:
            raise ValueError(f"TCPStore: world_size must be at least 1 (or None), got {world_size}")
        self.host = host_name
        self.world_size = world_size
        if is_master:
            server = _servers.get(port) if multi_tenant and port else None
            if server is None:
                server = _Server(_listen(port, master_listen_fd))
                _servers[server.port] = server
            port = server.port
        self.port = port
        self._lock = threading.Lock()
        self._sock = connect(host_name, port, timeout, "TCPStore")
        self._apply("add", _WORKERS_KEY, 1)
        if is_master and wait_for_workers and world_size is not None:
            self._wait_for_workers(world_size)

    def _wait_for_workers(self, world_size: int) -> None:
        deadline = time.monotonic() + self.timeout.total_seconds()
        while (joined := self._apply("add", _WORKERS_KEY, 0)) < world_size:
            if time.monotonic() > deadline:
                raise DistStoreError(
                    f"TCPStore: timed out after {self.timeout.total_seconds():g} seconds waiting for clients: "
                    f"{joined}/{world_size} clients joined"
                )
            time.sleep(POLL_SECONDS)

    def _request(self, message: dict):
        with self._lock:
            try:
                send_message(self._sock, message)
                answer = recv_message(self._sock)
            except OSError as error:
                raise DistNetworkError(f"TCPStore: connection to {self.host}:{self.port} failed: {error}") from None
        if answer is None:
            raise DistNetworkError(
                f"TCPStore: the server at {self.host}:{self.port} closed the connection "
                "(did the master process exit or crash?)"
            )
        if "error" in answer:
            raise DistStoreError(answer["error"])
        return _decode(answer["ok"])

    def _apply(self, op: str, *args):
        return self._request({"op": op, "args": _encode(list(args))})

    def _wait(self, keys: list[str], seconds: float) -> bool:
        return self._request({"op": "wait", "args": [list(keys), seconds]})

    def local_host(self) -> str:
        """This end's address of the connection to the server (the interface that reaches the master)."""
        return self._sock.getsockname()[0]

    def clone(self) -> TCPStore:
        """Another client of the same server, with its own connection."""
        return TCPStore(self.host, self.port, None, False, self.timeout)

    @property
    def libuvBackend(self) -> bool:  # noqa: N802 - PyTorch's name
        return False
