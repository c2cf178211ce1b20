"""Tensors as MPI buffers: the host array a collective reads and writes, and the write-back.

A contiguous cpu tensor is its own buffer: MPI reads and writes the tensor's memory. Any
other tensor (a strided view, a vulkan tensor) is staged: MPI works on a contiguous host copy
and the result is copied back with ``copy_``. float16 and bfloat16 have no MPI reduction, so
reductions stage them through float32 and round the result once.
"""

from __future__ import annotations

import numpy as np

from munet._tensor import Tensor

_REDUCE_AS_FLOAT32 = ("float16", "bfloat16")


class HostBuffer:
    """The host array behind ``tensor`` for one collective, and how to put a result back."""

    def __init__(self, tensor: Tensor, *, for_reduction: bool = False, read: bool = True):
        if not isinstance(tensor, Tensor):
            raise TypeError(f"expected a munet.Tensor, got {type(tensor).__name__}")
        self.tensor = tensor
        low_precision = tensor.dtype.name in _REDUCE_AS_FLOAT32
        staged_dtype = for_reduction and low_precision
        own = own_array(tensor, for_reduction)
        if own is not None:
            self.array = own.reshape(-1)
            self.shares_memory = True
        else:
            self.shares_memory = False
            view = tensor.detach()
            if read:
                host = np.ascontiguousarray(view.cpu().numpy()).reshape(-1)
            else:
                host = np.empty(view.numel(), dtype=view.dtype.np)
            self.array = host.astype(np.float32) if staged_dtype else host
        # what mpi4py is given: the array, or its bits as uint16 where MPI has no such datatype
        # (a 16-bit float moved, not reduced); ``buffer`` is what the transport is given
        # (munet/distributed/nccl_comm.py's DeviceBuffer has one too)
        moved_bits = low_precision and not staged_dtype
        self.mpi_buffer = self.buffer = self.array.view(np.uint16) if moved_bits else self.array

    def divide(self, n: int) -> None:
        """AVG as SUM: divide the reduced values by the group size (a float32 stage rounds once, in ``store``)."""
        np.divide(self.array, n, out=self.array)

    def store(self) -> None:
        """Make the tensor hold the array's values (bumps its version, as any in-place write)."""
        if self.shares_memory:
            self.tensor.untyped_storage().version += 1
            return
        store_array(self.tensor, self.array)


def own_array(tensor: Tensor, for_reduction: bool = False) -> np.ndarray | None:
    """The tensor's own memory as an array of its shape (C order) when it can be its own buffer (a
    contiguous cpu tensor, and for a reduction not float16 or bfloat16, which are staged through
    float32), else None."""
    if tensor.device.type != "cpu" or (for_reduction and tensor.dtype.name in _REDUCE_AS_FLOAT32):
        return None
    array = tensor.numpy(force=True)  # force: no detached copy of the tensor needed
    # the array has the tensor's strides: NumPy's C order is the tensor's is_contiguous(), and cheaper
    return array if array.flags.c_contiguous else None


def store_array(tensor: Tensor, array: np.ndarray) -> None:
    """Copy ``array`` (any shape with the tensor's numel) into ``tensor`` in place."""
    from munet.autograd.grad_mode import no_grad
    from munet.ops.creation import from_numpy

    source = from_numpy(np.ascontiguousarray(array.astype(tensor.dtype.np, copy=False)).reshape(tuple(tensor.shape)))
    with no_grad():
        tensor.detach().copy_(source)
