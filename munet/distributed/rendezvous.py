"""How ranks started separately find each other: ``rendezvous(url)`` gives a store, rank and size.

PyTorch's handlers, by URL scheme: ``env://`` reads ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK`` and
``WORLD_SIZE`` (as torchrun sets them) and meets at a ``TCPStore`` that rank 0 serves;
``tcp://host:port`` meets there; ``file:///path`` meets in a ``FileStore``. ``rank`` and
``world_size`` come from the arguments, else the URL's query (``?rank=0&world_size=2``), else
the environment. ``register_rendezvous_handler(scheme, handler)`` adds a scheme: the handler is
called as ``handler(url, rank=..., world_size=..., timeout=...)`` and yields
``(store, rank, world_size)``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

from munet.distributed.store import FileStore
from munet.distributed.tcp_store import TCPStore

_HANDLERS: dict = {}


def register_rendezvous_handler(scheme: str, handler) -> None:
    """Make ``rendezvous`` (and ``init_process_group(init_method=...)``) use ``handler`` for ``scheme://``."""
    if scheme in _HANDLERS:
        raise RuntimeError(f"Rendezvous handler for {scheme}:// already registered")
    _HANDLERS[scheme] = handler


def rendezvous(url: str, rank: int = -1, world_size: int = -1, **kwargs):
    """An iterator yielding ``(store, rank, world_size)`` for ``url`` (PyTorch's ``rendezvous``)."""
    if not isinstance(url, str):
        raise RuntimeError(f"`url` must be a string. {type(url)}: {url}")
    scheme = urlparse(url).scheme
    if scheme not in _HANDLERS:
        raise RuntimeError(f"No rendezvous handler for {scheme}://")
    return _HANDLERS[scheme](url, rank=rank, world_size=world_size, **kwargs)


def _number(given: int, query: dict, name: str, variable: str, scheme: str) -> int:
    if given is not None and given >= 0:
        return int(given)
    if name in query:
        return int(query[name][0])
    if os.environ.get(variable, "") != "":
        return int(os.environ[variable])
    raise ValueError(
        f"Error initializing torch.distributed using {scheme}:// rendezvous: {name} expected (as an argument, "
        f"in the URL's query or in the environment variable {variable}), but not set"
    )


def _env_variable(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise ValueError(
            f"Error initializing torch.distributed using env:// rendezvous: environment variable {name} "
            "expected, but not set"
        )
    return value


def _tcp_store(host: str, port: int, rank: int, world_size: int, timeout: timedelta) -> TCPStore:
    return TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout, multi_tenant=True)


def _env_handler(url: str, rank: int = -1, world_size: int = -1, timeout: timedelta | None = None, **kwargs):
    query = parse_qs(urlparse(url).query)
    rank = _number(rank, query, "rank", "RANK", "env")
    world_size = _number(world_size, query, "world_size", "WORLD_SIZE", "env")
    host, port = _env_variable("MASTER_ADDR"), int(_env_variable("MASTER_PORT"))
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true":
        raise RuntimeError(
            "env:// rendezvous: PyTorch's torchrun serves its own store on MASTER_PORT, which speaks PyTorch's "
            "protocol, not MuNet's; start the ranks with `munet-run --standalone -n N script.py` (or set RANK, "
            "WORLD_SIZE, MASTER_ADDR and MASTER_PORT yourself)"
        )
    yield _tcp_store(host, port, rank, world_size, timeout or timedelta(minutes=30)), rank, world_size


def _tcp_handler(url: str, rank: int = -1, world_size: int = -1, timeout: timedelta | None = None, **kwargs):
    parsed = urlparse(url)
    if not parsed.hostname or not parsed.port:
        raise ValueError(f"tcp:// rendezvous needs a host and port (tcp://host:port), got {url!r}")
    query = parse_qs(parsed.query)
    rank = _number(rank, query, "rank", "RANK", "tcp")
    world_size = _number(world_size, query, "world_size", "WORLD_SIZE", "tcp")
    yield _tcp_store(parsed.hostname, parsed.port, rank, world_size, timeout or timedelta(minutes=30)), rank, world_size


def _file_handler(url: str, rank: int = -1, world_size: int = -1, timeout: timedelta | None = None, **kwargs):
    parsed = urlparse(url)
    path = parsed.path or parsed.netloc
    if not path:
        raise ValueError(f"file:// rendezvous needs a path (file:///tmp/name), got {url!r}")
    query = parse_qs(parsed.query)
    rank = _number(rank, query, "rank", "RANK", "file")
    world_size = _number(world_size, query, "world_size", "WORLD_SIZE", "file")
    store = FileStore(path, world_size)
    if timeout is not None:
        store.set_timeout(timeout)
    yield store, rank, world_size


register_rendezvous_handler("env", _env_handler)
register_rendezvous_handler("tcp", _tcp_handler)
register_rendezvous_handler("file", _file_handler)
