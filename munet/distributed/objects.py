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


def _gather_payloads(pg, obj, where: str) -> list[bytes]:
    """Every rank's encoded ``obj``, in rank order; raises on every rank if one cannot encode."""
    payload, problem = _payload(obj, where)
    lengths = np.empty(pg.size(), dtype=np.int64)
    _wait(pg, pg.comm.allgather(np.array([-1 if problem else len(payload)], dtype=np.int64), lengths), where)
    if problem:
        raise TypeError(problem)
    if (lengths < 0).any():
        bad = [pg.ranks[r] for r in np.flatnonzero(lengths < 0)]
        raise RuntimeError(f"{where}: rank(s) {bad} could not encode their object")
    data = np.empty(int(lengths.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    request = pg.comm.allgatherv(np.frombuffer(payload, dtype=np.uint8), data, lengths)
    _wait(pg, request, where)
    return [data[offsets[r] : offsets[r + 1]].tobytes() for r in range(pg.size())]


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
        object_list[r] = _decode(json.loads(payload.decode("utf-8")))
