"""Tensors over memory that exists already or in a layout given by the caller: ``asarray``,
``frombuffer``, ``from_file`` (a memory-mapped file), ``empty_strided``, ``empty_permuted`` and
PyTorch's deprecated ``range`` (its end is inclusive).

``asarray``, ``frombuffer`` and ``from_file`` share memory with their source on the cpu, as in
PyTorch: writes through the tensor reach the source (and, for ``from_file(shared=True)``, the file).
"""

from __future__ import annotations

import builtins
import math
import os
import warnings

import numpy as np

from munet import _dtype as D
from munet._device import as_device, host_device

__all__ = ["asarray", "empty_permuted", "empty_strided", "from_file", "frombuffer", "range"]
__tensor_methods__ = ["new_empty_strided"]


def _finish(t, requires_grad: bool):
    return t.requires_grad_(True) if requires_grad else t


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None, requires_grad: bool = False):
    """``obj`` (a tensor, NumPy array, DLPack capsule owner, buffer, or nested sequence) as a tensor,
    sharing its memory when ``dtype`` and ``device`` allow (``copy=None``), always copying
    (``copy=True``) or refusing to copy (``copy=False`` raises where sharing is impossible)."""
    from munet._tensor import Tensor
    from munet.ops.creation import from_dlpack, tensor

    if isinstance(obj, np.generic):  # a NumPy scalar keeps its dtype, as a 0-d array
        obj = np.asarray(obj)
        source = None
    elif isinstance(obj, Tensor):
        source = obj
    elif isinstance(obj, np.ndarray):
        source = Tensor._from_numpy(obj) if _shareable_array(obj) else None
    elif hasattr(obj, "__dlpack__"):
        source = from_dlpack(obj)
    elif _is_buffer(obj):
        source = Tensor._from_numpy(np.frombuffer(obj, dtype=(dtype or D.get_default_dtype()).np))
    else:
        source = None
    if source is None:  # Python data (or an array with strides MuNet cannot view): always a copy
        if copy is False:
            raise ValueError(f"asarray: can't alias {type(obj).__name__} without copying it (copy=False)")
        return _finish(tensor(obj if not isinstance(obj, np.ndarray) else obj.copy(), dtype=dtype, device=device),
                       requires_grad)  # fmt: skip
    target_dtype = source.dtype if dtype is None else dtype
    target_device = source.device if device is None else as_device(device)
    if copy is False and (target_dtype is not source.dtype or target_device != source.device):
        raise ValueError(
            f"asarray: can't alias tensor with dtype {source.dtype!r} on {source.device} into dtype "
            f"{target_dtype!r} on {target_device} (copy=False)"
        )
    out = source.to(device=target_device, dtype=target_dtype)
    if copy and out is source:
        out = source.clone()
    return _finish(out, requires_grad)


def _shareable_array(array: np.ndarray) -> bool:
    itemsize = array.itemsize
    return array.size == 0 or all(s >= 0 and s % itemsize == 0 for s in array.strides)


def _is_buffer(obj) -> bool:
    try:
        memoryview(obj)
    except TypeError:
        return False
    return not isinstance(obj, (str, int, float, bool, list, tuple))


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False):
    """A 1-D cpu tensor over ``buffer`` (anything with the buffer protocol): ``count`` elements of
    ``dtype`` (-1: all) from byte ``offset``; it shares the buffer's memory."""
    from munet._tensor import Tensor

    if not isinstance(dtype, D.dtype):
        raise TypeError(f"frombuffer: expected a munet dtype, got {dtype!r}")
    size = memoryview(buffer).nbytes
    if offset < 0 or offset >= size:
        raise ValueError(
            f"frombuffer: offset ({offset} bytes) must be non-negative and smaller than the buffer ({size})"
        )
    if count == 0 or (count < 0 and (size - offset) % dtype.itemsize):
        raise ValueError(
            f"frombuffer: buffer length ({size - offset} bytes after offset) must be a multiple of the element "
            f"size ({dtype.itemsize}) and count ({count}) nonzero"
        )
    array = np.frombuffer(buffer, dtype=dtype.np, count=count, offset=offset)
    if array.flags.writeable is False:
        warnings.warn(
            "frombuffer: the given buffer is not writable; writing to the tensor raises", UserWarning, stacklevel=2
        )
    return _finish(Tensor._from_numpy(array, host_device()), requires_grad)


def from_file(
    filename, shared: bool | None = None, size: int = 0, *, dtype=None, layout=None, device=None, pin_memory=False
):
    """A 1-D cpu tensor of ``size`` elements memory-mapped from ``filename``. ``shared=True``: writes
    reach the file, which is created or extended to the size needed; otherwise they stay private
    (copy-on-write) and the file must be large enough."""
    from munet._tensor import Tensor
    from munet.ops._utils import check_factory_options

    check_factory_options("from_file", layout=layout, pin_memory=pin_memory)
    if device is not None and as_device(device) != host_device():
        raise RuntimeError(f"from_file: a memory-mapped tensor lives on cpu, got device={device!r}")
    dtype = D.get_default_dtype() if dtype is None else dtype
    nbytes = int(size) * dtype.itemsize
    if shared:
        with open(filename, "ab") as f:  # creates the file; extends it below if too short
            if f.tell() < nbytes:
                f.truncate(nbytes)
    have = os.path.getsize(filename)
    if have < nbytes:
        raise RuntimeError(
            f"from_file: file <{filename}> size <{have}> is smaller than the required mapping size <{nbytes}>"
        )
    if size == 0:
        return Tensor._from_numpy(np.empty(0, dtype=dtype.np), host_device())
    array = np.memmap(filename, dtype=dtype.np, mode="r+" if shared else "c", shape=(int(size),))
    return Tensor._from_numpy(array, host_device())


def _storage_extent(size, stride) -> int:
    if any(n == 0 for n in size):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(size, stride))


def empty_strided(
    size, stride, *, dtype=None, layout=None, device=None, requires_grad: bool = False, pin_memory: bool = False
):
    """An uninitialized tensor of shape ``size`` with the element strides ``stride``."""
    from munet.ops.creation import empty
    from munet.ops.view import as_strided

    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"empty_strided: mismatch in length of strides ({len(stride)}) and shape ({len(size)})")
    if any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"empty_strided: sizes {list(size)} and strides {list(stride)} must be non-negative")
    storage = empty(_storage_extent(size, stride), dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)
    return _finish(as_strided(storage, size, stride, 0), requires_grad)


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad: bool = False):
    """``empty_strided`` with this tensor's dtype and device unless given."""
    return empty_strided(
        size, stride, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
    )


def empty_permuted(
    size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad: bool = False, pin_memory=False
):
    """An uninitialized tensor of shape ``size`` laid out in memory in the dimension order
    ``physical_layout`` (outermost first): ``empty_permuted((2, 3, 4), (0, 2, 1))`` has strides (12, 1, 3)."""
    from munet.ops.creation import empty

    size, order = tuple(int(n) for n in size), tuple(int(d) for d in physical_layout)
    if sorted(order) != list(builtins.range(len(size))):
        raise RuntimeError(
            f"empty_permuted: physical_layout {list(order)} must be a permutation of the {len(size)} dimensions"
        )
    physical = empty(tuple(size[d] for d in order), dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)
    inverse = tuple(order.index(d) for d in builtins.range(len(size)))
    return _finish(physical.permute(inverse), requires_grad)


def range(start, end, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad: bool = False):  # noqa: A001
    """Deprecated in PyTorch for ``arange``: ``floor((end - start) / step) + 1`` values from ``start``
    to ``end`` *inclusive*, in the default float dtype unless ``dtype`` says otherwise."""
    from munet.ops._utils import check_factory_options
    from munet.ops.creation import finish_factory, tensor

    check_factory_options("range", layout=layout)
    warnings.warn(
        "munet.range is deprecated and will be removed in a future release because its behavior is inconsistent "
        "with Python's range builtin. Instead, use munet.arange, which produces values in [start, end).",
        UserWarning,
        stacklevel=2,
    )
    start, end, step = (x.item() if hasattr(x, "item") else x for x in (start, end, step))
    if step == 0:
        raise RuntimeError("range: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"range: upper bound and larger bound inconsistent with step sign ({start}, {end}, {step})")
    count = math.floor((end - start) / step) + 1
    values = start + np.arange(count, dtype=np.float64) * step  # PyTorch accumulates in double
    t = tensor(values, dtype=dtype or D.get_default_dtype(), device=device)
    return finish_factory(t, requires_grad, out)
