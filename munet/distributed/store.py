"""Key-value stores the ranks meet through: ``Store``, ``HashStore``, ``FileStore``, ``PrefixStore``.

As in PyTorch, keys are strings and values are bytes (a ``str`` value is stored as its UTF-8
bytes). ``get`` and ``wait`` block until the keys exist or the store's timeout passes (then
``DistStoreError``); ``add`` keeps a counter as the decimal digits of an integer, so
``get`` of a counter returns ``b"5"``. Nothing is ever unpickled: values are bytes and stay bytes.

Every store is built on two primitives a subclass provides: ``_apply(op, *args)``, one atomic
operation on the table (see ``apply_op``), and ``_wait(keys, seconds)``, which blocks until all
keys exist. The public methods (PyTorch's) check arguments and raise PyTorch's errors. ``TCPStore``
(munet/distributed/tcp_store.py) serves a ``HashStore``'s table to its clients over TCP.
"""

from __future__ import annotations

import base64
import fcntl
import json
import struct
import threading
import time
from datetime import timedelta

from munet.distributed.errors import DistStoreError


class QueueEmptyError(DistStoreError):
    """``queue_pop(key, block=False)`` of an empty queue."""


default_store_timeout = timedelta(seconds=300)
POLL_SECONDS = 0.01


def as_bytes(value, where: str) -> bytes:
    """A store value: ``bytes`` as they are, ``str`` as UTF-8, a list of small ints as bytes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, list) and all(isinstance(v, int) and 0 <= v < 256 for v in value):
        return bytes(value)
    raise TypeError(f"Store.{where}: value must be str or bytes, got {type(value).__name__}")


def as_key(key, where: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"Store.{where}: key must be a str, got {type(key).__name__}")
    return key


def _counter(value: bytes | None, key: str) -> int:
    if value is None:
        return 0
    try:
        return int(value.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise DistStoreError(f"Store.add: the value of key {key!r} is not an integer, got {value[:40]!r}") from None


def apply_op(table: dict, op: str, args: tuple):
    """Run one store operation on ``table`` (str -> bytes) and return its result.

    Ops: set(key, value), get(key) -> bytes or None, add(key, amount) -> int,
    compare_set(key, expected, desired) -> bytes, delete(key) -> bool, check(keys) -> bool,
    num_keys() -> int, append(key, value), multi_get(keys) -> [bytes], multi_set(keys, values),
    list_keys() -> [str], queue_push(key, value), queue_pop(key) -> bytes or None, queue_len(key) -> int.

    A queue lives beside the keys (``QUEUE_PREFIX + key``, its items as length-prefixed bytes): it
    counts as set for ``check``/``wait`` while it is not empty, and ``num_keys``, ``list_keys``
    and ``delete_key`` leave it alone, as PyTorch's stores do.
    """
    if op == "set":
        table[args[0]] = args[1]
        return None
    if op == "get":
        return table.get(args[0])
    if op == "add":
        key, amount = args
        total = _counter(table.get(key), key) + int(amount)
        table[key] = str(total).encode("ascii")
        return total
    if op == "compare_set":
        key, expected, desired = args
        current = table.get(key)
        if current is None:
            if expected == b"":
                table[key] = desired
                return desired
            return expected
        if current == expected:
            table[key] = desired
            return desired
        return current
    if op == "delete":
        return table.pop(args[0], None) is not None
    if op == "check":
        return all(k in table or QUEUE_PREFIX + k in table for k in args[0])
    if op == "num_keys":
        return sum(1 for k in table if not k.startswith(QUEUE_PREFIX))
    if op == "append":
        table[args[0]] = table.get(args[0], b"") + args[1]
        return None
    if op == "multi_get":
        return [table[k] for k in args[0]]
    if op == "multi_set":
        table.update(zip(args[0], args[1], strict=True))
        return None
    if op == "list_keys":
        return [k for k in table if not k.startswith((HIDDEN_PREFIX, QUEUE_PREFIX))]
    if op.startswith("queue_"):
        return _queue_op(table, op, QUEUE_PREFIX + args[0], *args[1:])
    raise ValueError(f"Store: unknown operation {op!r}")


def _queue_op(table: dict, op: str, name: str, *args):
    items = _queue_items(table.get(name, b""))
    if op == "queue_push":
        table[name] = table.get(name, b"") + _ITEM_LENGTH.pack(len(args[0])) + args[0]
        return None
    if op == "queue_len":
        return len(items)
    if op == "queue_pop":
        if not items:
            return None
        rest = items[1:]
        if rest:
            table[name] = b"".join(_ITEM_LENGTH.pack(len(i)) + i for i in rest)
        else:
            del table[name]
        return items[0]
    raise ValueError(f"Store: unknown operation {op!r}")


def _queue_items(data: bytes) -> list[bytes]:
    items, at = [], 0
    while at < len(data):
        (length,) = _ITEM_LENGTH.unpack_from(data, at)
        items.append(data[at + _ITEM_LENGTH.size : at + _ITEM_LENGTH.size + length])
        at += _ITEM_LENGTH.size + length
    return items


_ITEM_LENGTH = struct.Struct(">Q")
QUEUE_PREFIX = "\x00queue/"

# Keys a store keeps for itself (TCPStore's count of joined workers); num_keys counts them, as
# PyTorch's does, and list_keys hides them.
HIDDEN_PREFIX = "init/"


class Store:
    """PyTorch's ``torch.distributed.Store`` interface, on ``_apply`` and ``_wait``."""

    def __init__(self, timeout: timedelta = default_store_timeout):
        self._timeout = _check_timeout(timeout, "Store")

    # primitives ----------------------------------------------------------------------------------
    def _apply(self, op: str, *args):
        raise TypeError(f"{type(self).__name__} is an abstract Store; use HashStore, FileStore or TCPStore")

    def _wait(self, keys: list[str], seconds: float) -> bool:
        raise TypeError(f"{type(self).__name__} is an abstract Store; use HashStore, FileStore or TCPStore")

    # PyTorch's methods ---------------------------------------------------------------------------
    @property
    def timeout(self) -> timedelta:
        return self._timeout

    def set_timeout(self, timeout: timedelta) -> None:
        self._timeout = _check_timeout(timeout, "set_timeout")

    def set(self, key: str, value) -> None:
        self._apply("set", as_key(key, "set"), as_bytes(value, "set"))

    def get(self, key: str) -> bytes:
        """The value of ``key``, waiting up to the timeout for it to be set."""
        key = as_key(key, "get")
        self.wait([key])
        value = self._apply("get", key)
        if value is None:  # deleted between the wait and the read
            raise DistStoreError(f"Store.get: key {key!r} was deleted while waiting for it")
        return value

    def add(self, key: str, amount: int) -> int:
        """Add ``amount`` to the counter ``key`` (0 when unset) and return the new value."""
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise TypeError(f"Store.add: amount must be an int, got {type(amount).__name__}")
        return self._apply("add", as_key(key, "add"), amount)

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        """Set ``key`` to ``desired_value`` if it holds ``expected_value`` (or is unset and
        ``expected_value`` is empty); returns the value ``key`` holds afterwards, or
        ``expected_value`` when ``key`` is unset and nothing was set."""
        expected, desired = as_bytes(expected_value, "compare_set"), as_bytes(desired_value, "compare_set")
        return self._apply("compare_set", as_key(key, "compare_set"), expected, desired)

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        """Block until every key in ``keys`` is set; ``DistStoreError`` after the timeout."""
        keys = [as_key(k, "wait") for k in keys]
        limit = self.timeout if timeout is None else _check_timeout(timeout, "wait")
        if not self._wait(keys, limit.total_seconds()):
            raise DistStoreError(f"wait timeout after {round(limit.total_seconds() * 1000)}ms, keys: {keys}")

    def check(self, keys: list[str]) -> bool:
        """True when every key in ``keys`` is set (does not wait)."""
        return self._apply("check", [as_key(k, "check") for k in keys])

    def delete_key(self, key: str) -> bool:
        """Remove ``key``; True when it existed."""
        return self._apply("delete", as_key(key, "delete_key"))

    def num_keys(self) -> int:
        return self._apply("num_keys")

    def append(self, key: str, value) -> None:
        """Append ``value`` to the bytes of ``key`` (set it when unset)."""
        self._apply("append", as_key(key, "append"), as_bytes(value, "append"))

    def multi_get(self, keys: list[str]) -> list[bytes]:
        keys = [as_key(k, "multi_get") for k in keys]
        self.wait(keys)
        return self._apply("multi_get", keys)

    def multi_set(self, keys: list[str], values: list) -> None:
        if len(keys) != len(values):
            raise ValueError(f"Store.multi_set: {len(keys)} keys but {len(values)} values")
        self._apply("multi_set", [as_key(k, "multi_set") for k in keys], [as_bytes(v, "multi_set") for v in values])

    def list_keys(self) -> list[str]:
        return self._apply("list_keys")

    def queue_push(self, key: str, value) -> None:
        """Append ``value`` to the queue ``key``."""
        self._apply("queue_push", as_key(key, "queue_push"), as_bytes(value, "queue_push"))

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        """The oldest item of the queue ``key``; waits up to the timeout for one when ``block``, else
        raises ``QueueEmptyError`` if there is none."""
        key = as_key(key, "queue_pop")
        while True:
            if block:
                self.wait([key])
            value = self._apply("queue_pop", key)
            if value is not None:
                return value
            if not block:
                raise QueueEmptyError("queue is empty")

    def queue_len(self, key: str) -> int:
        return self._apply("queue_len", as_key(key, "queue_len"))

    def has_extended_api(self) -> bool:
        """True: ``append``, ``multi_get`` and ``multi_set`` work."""
        return True

    def barrier(self, key: str, world_size: int, timeout: timedelta | None = None) -> None:
        """Block until ``world_size`` callers called ``barrier`` with this ``key``."""
        key = as_key(key, "barrier")
        if self.add(f"{key}/arrived", 1) == world_size:
            self.set(f"{key}/released", b"1")
        self.wait([f"{key}/released"], timeout)


def _check_timeout(timeout, where: str) -> timedelta:
    if not isinstance(timeout, timedelta):
        raise TypeError(f"{where}: timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    return timeout


class HashStore(Store):
    """A store in this process's memory, shared by its threads (PyTorch's ``HashStore``)."""

    def __init__(self):
        super().__init__()
        self._table: dict[str, bytes] = {}
        self._changed = threading.Condition()

    def _apply(self, op: str, *args):
        with self._changed:
            result = apply_op(self._table, op, args)
            self._changed.notify_all()
        return result

    def _wait(self, keys: list[str], seconds: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: apply_op(self._table, "check", (keys,)), timeout=seconds)


class FileStore(Store):
    """A store in a file that processes on one machine (or a shared file system) open by name.

    Every operation locks the file (``fcntl.flock``), reads the table, applies the operation and
    writes the table back; ``wait`` polls. The file holds JSON (keys and base64 values), not
    PyTorch's binary format, so a MuNet and a PyTorch process cannot share one FileStore.
    """

    def __init__(self, file_name: str, world_size: int = -1):
        super().__init__()
        if not isinstance(file_name, str) or not file_name:
            raise ValueError(f"FileStore: file_name must be a path, got {file_name!r}")
        self.path = file_name
        self.world_size = world_size
        with open(self.path, "a"):
            pass

    def _apply(self, op: str, *args):
        with open(self.path, "r+") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            text = file.read()
            table = {k: base64.b64decode(v) for k, v in json.loads(text).items()} if text else {}
            before = dict(table)
            result = apply_op(table, op, args)
            if table != before:
                file.seek(0)
                file.truncate()
                json.dump({k: base64.b64encode(v).decode("ascii") for k, v in table.items()}, file)
        return result

    def _wait(self, keys: list[str], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not self._apply("check", keys):
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_SECONDS)
        return True


class PrefixStore(Store):
    """``store`` seen with every key prefixed by ``prefix + "/"`` (PyTorch's ``PrefixStore``)."""

    def __init__(self, prefix: str, store: Store):
        if not isinstance(store, Store):
            raise TypeError(f"PrefixStore: store must be a munet.distributed.Store, got {type(store).__name__}")
        super().__init__(store.timeout)
        self.prefix = as_key(prefix, "PrefixStore")
        self.underlying_store = store

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    @property
    def timeout(self) -> timedelta:
        return self.underlying_store.timeout

    def set_timeout(self, timeout: timedelta) -> None:
        self.underlying_store.set_timeout(timeout)

    def _apply(self, op: str, *args):
        if op == "num_keys":
            return self.underlying_store._apply(op)
        if op == "list_keys":
            start = len(self.prefix) + 1
            return [k[start:] for k in self.underlying_store._apply(op) if k.startswith(self.prefix + "/")]
        first = [self._key(k) for k in args[0]] if isinstance(args[0], list) else self._key(args[0])
        return self.underlying_store._apply(op, first, *args[1:])

    def _wait(self, keys: list[str], seconds: float) -> bool:
        return self.underlying_store._wait([self._key(k) for k in keys], seconds)
