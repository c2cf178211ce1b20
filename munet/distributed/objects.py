"""Object collectives over plain data: ``broadcast_object_list``, ``all_gather_object``, ...

PyTorch pickles the objects, so a peer can make every rank run code. MuNet exchanges JSON:
None, bool, int, float, str, bytes, list, tuple and dict (keys of those scalar types or
tuples), NumPy arrays and scalars of numeric dtypes, and munet tensors (received on cpu).
Anything else is refused on the rank that sends it, and every rank raises.
"""

from __future__ import annotations

import base64
import json

import ml_dtypes
import numpy as np

from munet._tensor import Tensor
from munet.distributed.collectives import agree, root_rank
from munet.distributed.work import Work
from munet.distributed.world import resolve_group

_ARRAY_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
                 "float16", "bfloat16", "float32", "float64", "complex64", "complex128")  # fmt: skip
_KEY_TYPES = (type(None), bool, int, float, str, tuple)
_OBJECT_TAG = 0  # send_object_list's messages use point-to-point tag 0, as PyTorch's do


def _encode(obj, where: str):
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return [_encode(x, where) for x in obj]
    if isinstance(obj, tuple):
        return {"t": "tuple", "v": [_encode(x, where) for x in obj]}
    if isinstance(obj, dict):
        for key in obj:
            if not isinstance(key, _KEY_TYPES):
                raise TypeError(
                    f"{where}: dict keys must be None, bool, int, float, str or tuple, got {type(key).__name__}"
                )
        return {"t": "dict", "v": [[_encode(k, where), _encode(v, where)] for k, v in obj.items()]}
    if isinstance(obj, bytes):
        return {"t": "bytes", "v": base64.b64encode(obj).decode("ascii")}
    if isinstance(obj, Tensor):
        return {"t": "tensor", "v": _encode_array(obj.detach().cpu().numpy(), where)}
    if isinstance(obj, (np.ndarray, np.generic)):
        return {
            "t": "ndarray" if isinstance(obj, np.ndarray) else "npscalar",
            "v": _encode_array(np.asarray(obj), where),
        }
    raise TypeError(
        f"{where}: cannot send a {type(obj).__module__}.{type(obj).__qualname__}; objects must be plain data "
        "(None, bool, int, float, str, bytes, list, tuple, dict) or arrays and tensors, because MuNet never "
        "unpickles what peers send"
    )


def _encode_array(array: np.ndarray, where: str) -> dict:
    if array.dtype.name not in _ARRAY_DTYPES:
        raise TypeError(f"{where}: arrays of dtype {array.dtype} cannot be sent; use a numeric dtype")
    data = np.ascontiguousarray(array).tobytes()
    return {"dtype": array.dtype.name, "shape": list(array.shape), "data": base64.b64encode(data).decode("ascii")}


def _decode(obj):
    if isinstance(obj, list):
        return [_decode(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    tag, value = obj.get("t"), obj.get("v")
    if tag == "tuple":
        return tuple(_decode(x) for x in value)
    if tag == "dict":
        return {_decode(k): _decode(v) for k, v in value}
    if tag == "bytes":
        return base64.b64decode(value)
    if tag in ("tensor", "ndarray", "npscalar"):
        array = _decode_array(value)
        if tag == "tensor":
            from munet.ops.creation import from_numpy

            return from_numpy(array)
        return array if tag == "ndarray" else array[()]
    raise ValueError(f"received an object with unknown tag {tag!r}")


def _decode_array(spec: dict) -> np.ndarray:
    if spec["dtype"] not in _ARRAY_DTYPES:
        raise ValueError(f"received an array of dtype {spec['dtype']!r}, which is not a numeric dtype")
    dtype = np.dtype(spec["dtype"]) if spec["dtype"] != "bfloat16" else np.dtype(ml_dtypes.bfloat16)
    shape = tuple(int(s) for s in spec["shape"])
    data = base64.b64decode(spec["data"])
    if len(data) != int(np.prod(shape)) * dtype.itemsize:
        raise ValueError(f"received an array of shape {list(shape)} with {len(data)} bytes of data")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _payload(obj, where: str) -> tuple[bytes, str]:
    """The JSON bytes of ``obj``, or empty bytes and the reason it cannot be sent."""
    try:
        return json.dumps(_encode(obj, where)).encode("utf-8"), ""
    except TypeError as error:
        return b"", str(error)


def _wait(pg, request, where: str) -> None:
    Work(request, where, pg.timeout).wait()


def broadcast_object_list(object_list: list, src: int | None = None, group=None, device=None, group_src=None) -> None:
    """Replace ``object_list``'s items on every rank with those of rank ``src``."""
    where = "broadcast_object_list"
    pg = resolve_group(group, where)
    if pg is None:
        return
    root = root_rank(pg, 0 if src is None and group_src is None else src, group_src, where, "src")
    agree(pg, "object", extra=root)
    payload, problem = _payload(list(object_list), where) if pg.rank() == root else (b"", "")
    header = np.array([len(payload) if not problem else -1, len(object_list)], dtype=np.int64)
    _wait(pg, pg.comm.bcast(header, root), where)
    if header[0] < 0:
        raise (
            TypeError(problem)
            if problem
            else RuntimeError(f"{where}: rank {pg.ranks[root]} could not encode its objects")
        )
    if header[1] != len(object_list):
        raise ValueError(
            f"{where}: object_list has {len(object_list)} items here and {header[1]} on rank {pg.ranks[root]}"
        )
    data = np.frombuffer(payload, dtype=np.uint8).copy() if pg.rank() == root else np.empty(header[0], dtype=np.uint8)
    _wait(pg, pg.comm.bcast(data, root), where)
    object_list[:] = _decode(json.loads(data.tobytes().decode("utf-8")))


def _gather_payloads(pg, obj, where: str, root: int | None = None) -> list[bytes]:
    """Every rank's encoded ``obj``, in rank order, on every rank (on ``root`` only when given:
    the others get an empty list); raises on every rank if one cannot encode."""
    payload, problem = _payload(obj, where)
    lengths = np.empty(pg.size(), dtype=np.int64)
    _wait(pg, pg.comm.allgather(np.array([-1 if problem else len(payload)], dtype=np.int64), lengths), where)
    if problem:
        raise TypeError(problem)
    if (lengths < 0).any():
        bad = [pg.ranks[r] for r in np.flatnonzero(lengths < 0)]
        raise RuntimeError(f"{where}: rank(s) {bad} could not encode their object")
    mine = np.frombuffer(payload, dtype=np.uint8)
    if root is None:
        data = np.empty(int(lengths.sum()), dtype=np.uint8)
        _wait(pg, pg.comm.allgatherv(mine, data, lengths), where)
    else:
        receiving = pg.rank() == root
        data = np.empty(int(lengths.sum()) if receiving else 0, dtype=np.uint8)
        send_counts = [len(payload) if r == root else 0 for r in range(pg.size())]
        recv_counts = list(lengths) if receiving else [0] * pg.size()
        _wait(pg, pg.comm.alltoallv(mine, send_counts, data, recv_counts), where)
        if not receiving:
            return []
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [data[offsets[r] : offsets[r + 1]].tobytes() for r in range(pg.size())]


def _decoded(payload: bytes):
    return _decode(json.loads(payload.decode("utf-8")))


def all_gather_object(object_list: list, obj, group=None) -> None:
    """``object_list[r]`` of every rank becomes ``obj`` of rank r."""
    where = "all_gather_object"
    pg = resolve_group(group, where)
    if pg is None:
        return
    if len(object_list) != pg.size():
        raise ValueError(f"{where}: object_list must have world_size ({pg.size()}) items, got {len(object_list)}")
    agree(pg, "object")
    for r, payload in enumerate(_gather_payloads(pg, obj, where)):
        object_list[r] = _decoded(payload)


def gather_object(obj, object_gather_list=None, dst: int | None = None, group=None, group_dst=None) -> None:
    """``object_gather_list[r]`` of rank ``dst`` becomes ``obj`` of rank r; other ranks pass None."""
    where = "gather_object"
    pg = resolve_group(group, where)
    if pg is None:
        return
    root = root_rank(pg, 0 if dst is None and group_dst is None else dst, group_dst, where, "dst")
    if pg.rank() == root and (object_gather_list is None or len(object_gather_list) != pg.size()):
        raise ValueError(f"{where}: object_gather_list on the destination must have world_size ({pg.size()}) items")
    agree(pg, "object", extra=root)
    for r, payload in enumerate(_gather_payloads(pg, obj, where, root)):
        object_gather_list[r] = _decoded(payload)


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None) -> None:  # fmt: skip
    """``scatter_object_output_list[0]`` of rank r becomes ``scatter_object_input_list[r]`` of rank ``src``."""
    where = "scatter_object_list"
    pg = resolve_group(group, where)
    if pg is None:
        return
    root = root_rank(pg, 0 if src is None and group_src is None else src, group_src, where, "src")
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError(f"{where}: expected argument scatter_object_output_list to be a list of size at least 1")
    agree(pg, "object", extra=root)
    payloads, problem = [b""] * pg.size(), ""
    if pg.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != pg.size():
            problem = f"{where}: scatter_object_input_list must have world_size ({pg.size()}) items on the source"
        else:
            encoded = [_payload(o, where) for o in scatter_object_input_list]
            problem = next((p for _, p in encoded if p), "")
            payloads = [p for p, _ in encoded]
    lengths = np.array([-1 if problem else len(p) for p in payloads], dtype=np.int64)
    _wait(pg, pg.comm.bcast(lengths, root), where)
    if (lengths < 0).any():
        raise (TypeError(problem) if problem else RuntimeError(f"{where}: rank {pg.ranks[root]} could not encode"))
    send = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    mine = np.empty(int(lengths[pg.rank()]), dtype=np.uint8)
    send_counts = list(lengths) if pg.rank() == root else [0] * pg.size()
    recv_counts = [int(lengths[pg.rank()]) if r == root else 0 for r in range(pg.size())]
    _wait(pg, pg.comm.alltoallv(send, send_counts, mine, recv_counts), where)
    scatter_object_output_list[0] = _decoded(mine.tobytes())


def send_object_list(object_list: list, dst=None, group=None, device=None, group_dst=None, use_batch=False) -> None:
    """Send ``object_list``'s items to rank ``dst``, which calls ``recv_object_list``."""
    where = "send_object_list"
    pg = resolve_group(group, where)
    if pg is None:
        return
    peer = root_rank(pg, dst, group_dst, where, "dst")
    payload, problem = _payload(list(object_list), where)
    if problem:
        raise TypeError(problem)
    header = np.array([len(payload), len(object_list)], dtype=np.int64)
    _wait(pg, pg.comm.send(header, peer, _OBJECT_TAG), where)
    _wait(pg, pg.comm.send(np.frombuffer(payload, dtype=np.uint8), peer, _OBJECT_TAG), where)


def recv_object_list(object_list: list, src=None, group=None, device=None, group_src=None, use_batch=False) -> int:
    """Fill ``object_list`` with the items rank ``src`` (any rank when None) sent; returns the sender's global rank."""
    where = "recv_object_list"
    pg = resolve_group(group, where)
    if pg is None:
        return -1
    peer = None if src is None and group_src is None else root_rank(pg, src, group_src, where, "src")
    header = np.empty(2, dtype=np.int64)
    request = pg.comm.recv(header, peer, _OBJECT_TAG)
    _wait(pg, request, where)
    sender = request.source
    data = np.empty(int(header[0]), dtype=np.uint8)
    _wait(pg, pg.comm.recv(data, sender, _OBJECT_TAG), where)
    if header[1] != len(object_list):
        raise ValueError(
            f"{where}: object_list has {len(object_list)} items here and {header[1]} on rank {pg.ranks[sender]}"
        )
    object_list[:] = _decoded(data.tobytes())
    return pg.ranks[sender]
