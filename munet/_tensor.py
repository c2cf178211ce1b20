"""Tensor and Storage.

A :class:`Storage` owns one flat backend buffer and a version counter that every in-place
write bumps. A :class:`Tensor` is a storage plus dtype, shape, strides (in elements) and an
offset; views share the storage. Ops live in ``munet.ops`` and are bound as methods by
``munet._tensor_methods``; this file holds only state, views and autograd bookkeeping.
"""

from __future__ import annotations

import gc
import sys
import threading
import weakref
from multiprocessing.reduction import ForkingPickler

import numpy as np

from munet import _dtype as D
from munet._device import as_device, get_backend, host_device
from munet._grad_state import STATE as _GRAD_STATE


class Size(tuple):
    """A tensor shape: a tuple of ints, printed as ``munet.Size([2, 3])``."""

    __slots__ = ()

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"munet.Size({list(self)})"

    def __getitem__(self, item):
        out = tuple.__getitem__(self, item)
        return Size(out) if isinstance(item, slice) else out

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))


class HostReadMode(threading.local):
    """What this thread does before a storage's data is read on the host: ``watch(storage)``.
    Nothing in eager mode; ``munet.compile`` installs its tracer's while it traces (a real
    tensor read then becomes a guard on its version). Per thread, as the tracer is."""

    watch = staticmethod(lambda storage: None)


HOST_READS = HostReadMode()


class SymbolicTensors(threading.local):
    """Every tensor made over traced data (``_data is poison``) is passed to ``made`` while
    ``munet.compile`` traces with graph breaks allowed: at a break the compiler gives each one still
    alive real data. ``poison`` is ``idle`` (no tensor's data), so nothing is tracked, the rest of the
    time (per thread, as the tracer)."""

    idle = object()
    poison = idle
    made = None


SYMBOLIC_TENSORS = SymbolicTensors()


class Storage:
    """A flat buffer on one backend, with the version counter shared by all its views."""

    __slots__ = ("data", "backend", "version", "shared", "__weakref__")

    def __init__(self, data, backend):
        self.data = data
        self.backend = backend
        self.version = 0
        self.shared = None  # the munet._shared_memory.SharedBlock holding ``data``, after share_memory_

    @property
    def device(self):
        return self.backend.device

    def numel(self) -> int:
        """How many elements the buffer holds (a NumPy/CuPy array, or a vulkan DeviceBuffer)."""
        data = self.data
        return int(data.shape[0]) if hasattr(data, "shape") else int(data.numel)

    def to_numpy(self, data) -> np.ndarray:
        """``data`` (a view of this storage's buffer) on the host, in this thread's :class:`HostReadMode`.
        A tensor traced by ``munet.compile`` has no data to read: its backend raises HostReadError."""
        HOST_READS.watch(self)
        return np.asarray(self.backend.to_numpy(data))


_STRIDES: dict[tuple, tuple] = {}


def contiguous_strides(shape) -> tuple:
    """Row-major strides (in elements) for ``shape``; a size-0 dim counts as 1, as in PyTorch.

    The one definition: views, kernels, backends and the compiler all import it from here.
    """
    if type(shape) is not tuple:
        shape = tuple(shape)
    cached = _STRIDES.get(shape)
    if cached is not None:
        return cached
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    result = tuple(reversed(strides))
    if len(_STRIDES) < 4096:
        _STRIDES[shape] = result
    return result


_GEOMETRY: dict[tuple, tuple] = {}


def _contiguous_geometry(shape: tuple) -> tuple:
    """``(Size(shape), contiguous_strides(shape))`` for a kernel result's shape (a tuple of ints from
    the backend), kept in ``_GEOMETRY``: a new tensor of a shape met before costs one lookup."""
    if type(shape) is not tuple:
        return Size(shape), contiguous_strides(shape)
    result = (Size(shape), contiguous_strides(shape))
    if len(_GEOMETRY) < 4096:
        _GEOMETRY[shape] = result
    return result


class Tensor:
    """A multi-dimensional array with autograd, living on one device."""

    __slots__ = (
        "_storage",
        "_shape",
        "_stride",
        "_offset",
        "_dtype",
        "_data",
        "_requires_grad",
        "_grad_fn",
        "_output_nr",
        "_base",
        "grad",
        "_hooks",
        "_post_acc_hooks",
        "_inference",
        "__dict__",
        "__weakref__",
    )

    def __init__(self, *args, device=None):
        # ``munet.Tensor(data)`` / ``munet.Tensor(2, 3)``: PyTorch's legacy constructor,
        # a float tensor of the default dtype.
        from munet.ops import creation

        if not args:
            src = creation.empty(0, dtype=D.get_default_dtype(), device=device)
        elif len(args) == 1 and not isinstance(args[0], (int, Size)):  # a Size is a shape, a tuple is data
            src = creation.tensor(args[0], dtype=D.get_default_dtype(), device=device)
        else:
            src = creation.empty(*args, dtype=D.get_default_dtype(), device=device)
        self._init_from(src)

    # construction ---------------------------------------------------------------------------
    def _init_from(self, src: Tensor, requires_grad: bool = False) -> None:
        self._storage = src._storage
        self._shape = src._shape
        self._stride = src._stride
        self._offset = src._offset
        self._dtype = src._dtype
        self._data = src._data
        self._requires_grad = requires_grad
        self._grad_fn = None
        self._output_nr = 0
        self._base = None
        self.grad = None
        self._hooks = None
        self._post_acc_hooks = None
        self._inference = src._inference

    @classmethod
    def _make(cls, storage: Storage, shape, stride, offset: int, dtype, data, base=None) -> Tensor:
        t = object.__new__(cls)
        t._storage = storage
        if type(shape) is not Size:  # a shape met before is one lookup, not a new Size
            shape = (_GEOMETRY.get(shape) or _contiguous_geometry(shape))[0] if type(shape) is tuple else Size(shape)
        t._shape = shape
        t._stride = stride
        t._offset = offset
        t._dtype = dtype
        t._data = data
        t._requires_grad = False
        t._grad_fn = None
        t._output_nr = 0
        t._base = base
        t.grad = None
        t._hooks = None
        t._post_acc_hooks = None
        # made in inference mode; a view is an inference tensor exactly when its base is
        t._inference = _GRAD_STATE.inference if base is None else base._inference
        if data is SYMBOLIC_TENSORS.poison:
            SYMBOLIC_TENSORS.made(t)
        return t

    @classmethod
    def _from_kernel(cls, backend, raw, meta) -> Tensor:
        """A new tensor owning kernel result ``raw`` (declared by ``meta``). Every eager op's result is
        made here, so the common one (row-major) gets ``_make``'s fields set inline, a call less
        (``tests/test_tensor.py`` checks the two agree); a kernel's result is never traced data."""
        dtype = meta.dtype
        buffer, stride, data = backend.wrap(raw, dtype.np)
        shape = data.shape
        declared = meta.shape
        if declared is not None and shape != declared and shape != tuple(declared):
            raise RuntimeError(f"internal error: kernel produced shape {shape}, op declared {tuple(declared)}")
        if stride is not None:
            return cls._make(Storage(buffer, backend), shape, stride, 0, dtype, data)
        t = object.__new__(cls)
        t._storage = Storage(buffer, backend)
        t._shape, t._stride = _GEOMETRY.get(shape) or _contiguous_geometry(shape)
        t._offset, t._dtype, t._data = 0, dtype, data
        t._requires_grad, t._grad_fn, t._output_nr, t._base = False, None, 0, None
        t.grad = t._hooks = t._post_acc_hooks = None
        t._inference = _GRAD_STATE.inference
        return t

    @classmethod
    def _from_numpy(cls, array: np.ndarray, device=None) -> Tensor:
        """A tensor sharing memory with ``array`` on cpu (copied to other devices)."""
        dtype = D.from_numpy_dtype(array.dtype)
        backend = get_backend(as_device(device))
        if backend.device.type != "cpu":
            array = np.asarray(array, order="C")  # ascontiguousarray would make 0-d arrays 1-d
            buffer = backend.from_numpy(array.reshape(-1))
            stride = contiguous_strides(array.shape)
            return cls._make(
                Storage(buffer, backend), array.shape, stride, 0, dtype, backend.view(buffer, array.shape, stride, 0)
            )
        itemsize = array.itemsize
        if array.size and any(s < 0 or s % itemsize for s in array.strides):
            raise ValueError(
                "from_numpy: arrays with negative or unaligned strides are not supported; pass array.copy()"
            )
        # The storage is the smallest flat span of the array's memory, viewed from its first element.
        extent = 1 + sum((n - 1) * s // itemsize for n, s in zip(array.shape, array.strides)) if array.size else 0
        if array.flags.c_contiguous:
            flat = array.reshape(-1)
        else:
            flat = np.lib.stride_tricks.as_strided(array, shape=(extent,), strides=(itemsize,))
        stride = tuple(s // itemsize for s in array.strides)
        return cls._make(Storage(flat, backend), array.shape, stride, 0, dtype, array)

    def _view(self, shape, stride, offset: int) -> Tensor:
        """A new tensor over the same storage with the given geometry."""
        storage = self._storage
        data = storage.backend.view(storage.data, shape, stride, offset, self._dtype)
        base = self._base if self._base is not None else self
        stride = stride if type(stride) is tuple else tuple(stride)
        return Tensor._make(storage, shape, stride, offset, self._dtype, data, base)

    def _alias(self) -> Tensor:
        """The same data and geometry, without autograd history."""
        return Tensor._make(self._storage, self._shape, self._stride, self._offset, self._dtype, self._data, self)

    # metadata ---------------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return self._shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def device(self):
        return self._storage.backend.device

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return self._shape
        return self._shape[_wrap_dim(dim, len(self._shape), "size")]

    def stride(self, dim: int | None = None):
        if dim is None:
            return self._stride
        return self._stride[_wrap_dim(dim, len(self._shape), "stride")]

    def storage_offset(self) -> int:
        return self._offset

    def numel(self) -> int:
        return self._shape.numel()

    nelement = numel

    def element_size(self) -> int:
        return self._dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self._dtype.itemsize

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the strides are row-major, or, for ``memory_format=munet.channels_last`` (or
        ``channels_last_3d``), that format's order (False for a tensor of another rank, as in PyTorch)."""
        if memory_format is not None:
            from munet import _memory_format as MF

            entry = MF.CHANNELS_LAST_ORDER.get(MF.check_memory_format(memory_format, "is_contiguous"))
            if entry is not None:
                rank, order = entry
                return self.ndim == rank and MF.is_dense_in_order(self._shape, self._stride, order)
        if 0 in self._shape:
            return True
        expected = 1
        for size, stride in zip(reversed(self._shape), reversed(self._stride)):
            if size == 1:
                continue
            if size == 0:
                return True
            if stride != expected:
                return False
            expected *= size
        return True

    def is_inference(self) -> bool:
        """Whether this tensor was made in ``inference_mode`` (a view: whether its base was)."""
        return self._inference

    def is_pinned(self, device=None) -> bool:
        """Whether this cpu tensor lies in page-locked memory from CuPy's pinned pool (see
        :meth:`pin_memory`); ``False`` for any other tensor or without CUDA."""
        if self.device.type != "cpu":
            return False
        backend = _cuda_backend()
        return backend is not None and backend.is_pinned(self._data)

    def pin_memory(self, device=None) -> Tensor:
        """A copy of this cpu tensor in page-locked host memory, from which ``.to("cuda",
        non_blocking=True)`` is an asynchronous copy (already pinned: itself). Without CUDA: with
        another accelerator (a Vulkan adapter, whose uploads read any host memory) a plain copy, so
        ``is_pinned()`` stays ``False``; with none, PyTorch's ``RuntimeError``."""
        from munet import accelerator

        if self.device.type != "cpu":
            raise RuntimeError(f"pin_memory: cannot pin '{self.device}' memory, only dense CPU tensors can be pinned")
        backend = _cuda_backend()
        if backend is not None:
            return self if backend.is_pinned(self._data) else Tensor._from_numpy(backend.pin(self._data))
        if not accelerator.is_available():
            raise RuntimeError("Cannot access accelerator device when none is available.")
        return self.clone()

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return self._dtype.is_complex

    def is_signed(self) -> bool:
        return self._dtype.is_signed

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def data_ptr(self) -> int:
        """Address of the first element: equal for tensors that start at the same memory."""
        return self._storage.backend.data_ptr(self._storage.data) + self._offset * self._dtype.itemsize

    def untyped_storage(self) -> Storage:
        return self._storage

    @property
    def _version(self) -> int:
        return self._storage.version

    # autograd state -----------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        value = bool(value)
        if self._grad_fn is not None and not value:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if value and not (self._dtype.is_floating_point or self._dtype.is_complex):
            raise RuntimeError(
                f"only Tensors of floating point and complex dtype can require gradients, got {self._dtype.name}"
            )
        self._requires_grad = value

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def grad_fn(self):
        return self._grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def retains_grad(self) -> bool:
        node = self._grad_fn
        return node is not None and node.retained is not None and self._output_nr in node.retained

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if self._grad_fn is None:
            if not self._requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        node = self._grad_fn
        if node.retained is None:
            node.retained = {}
        node.retained[self._output_nr] = weakref.ref(self)

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; it may return a new grad."""
        from munet.utils.hooks import RemovableHandle

        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is None:
            if self._hooks is None:
                self._hooks = {}
            return RemovableHandle.add(self._hooks, hook)
        node = self._grad_fn
        if node.pre_hooks is None:
            node.pre_hooks = {}
        return RemovableHandle.add(node.pre_hooks.setdefault(self._output_nr, {}), hook)

    def register_post_accumulate_grad_hook(self, hook):
        from munet.utils.hooks import RemovableHandle

        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = {}
        return RemovableHandle.add(self._post_acc_hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``."""
        from munet.autograd import backward

        backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    def detach(self) -> Tensor:
        """A tensor sharing storage (and version counter) with no autograd history."""
        # Not a view for autograd (as in PyTorch): in-place writes to it never rebase another history.
        out = Tensor._make(self._storage, self._shape, self._stride, self._offset, self._dtype, self._data, None)
        out._inference = self._inference
        return out

    def detach_(self) -> Tensor:
        self._grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, other: Tensor) -> None:
        if not isinstance(other, Tensor):
            raise TypeError(f"Tensor.data: expected a Tensor, got {type(other).__name__}")
        self._storage, self._shape, self._stride = other._storage, other._shape, other._stride
        self._offset, self._dtype, self._data = other._offset, other._dtype, other._data

    # storage replacement (resize_, set_) ---------------------------------------------------------
    def _adopt(self, storage: Storage, shape, stride, offset: int) -> Tensor:
        """Take ``storage`` with this geometry (an in-place write: the version is bumped)."""
        shape, stride = tuple(shape), tuple(stride)
        self._storage, self._shape, self._stride, self._offset = storage, Size(shape), stride, offset
        self._data = storage.backend.view(storage.data, shape, stride, offset, self._dtype)
        storage.version += 1
        return self

    def resize_(self, *sizes, memory_format=None) -> Tensor:
        """Reshape in place to ``sizes`` (row-major, or ``memory_format``'s order), keeping the storage
        offset and the elements that were in memory. Growing past the storage moves it to a larger
        buffer, under every tensor that views it, as PyTorch's storages grow."""
        from munet import _memory_format as MF
        from munet.ops import creation
        from munet.ops._registry import refuse_under_trace
        from munet.ops._utils import as_tuple_shape

        refuse_under_trace("resize_", "resize_ is not supported inside munet.compile")
        if self._requires_grad:
            raise RuntimeError("cannot resize variables that require grad")
        shape = as_tuple_shape(sizes, "resize_")
        if any(n < 0 for n in shape):
            raise RuntimeError(f"resize_: expected non-negative sizes, got {list(shape)}")
        order = MF.channels_last_order(memory_format, len(shape), "resize_")
        stride = contiguous_strides(shape) if order is None else MF.channels_last_strides(shape, order)
        needed = self._offset + int(np.prod(shape, dtype=np.int64))
        capacity = self._storage.numel()
        if needed > capacity:
            if self._storage.shared is not None:
                raise RuntimeError("resize_: a storage in shared memory cannot grow (other processes map it)")
            grown = creation.empty(needed, dtype=self._dtype, device=self.device)
            if capacity:
                backend = self._storage.backend
                old = Tensor._make(self._storage, Size((capacity,)), (1,), 0, self._dtype,
                                   backend.view(self._storage.data, (capacity,), (1,), 0, self._dtype))  # fmt: skip
                grown[:capacity].copy_(old)
                del old  # a holder of the storage: _move_storage would scan for it
            _move_storage(self, grown._storage.data)
        return self._adopt(self._storage, shape, stride, self._offset)

    def set_(self, source=None, storage_offset: int = 0, size=None, stride=None) -> Tensor:
        """Share ``source``'s memory: a tensor (its storage and geometry), a storage (``untyped_storage()``)
        viewed with ``storage_offset``/``size``/``stride``, or nothing (an empty storage)."""
        from munet.autograd.grad_mode import is_grad_enabled
        from munet.ops import creation
        from munet.ops._registry import refuse_under_trace

        refuse_under_trace("set_", "set_ is not supported inside munet.compile")
        if is_grad_enabled() and self._grad_fn is None and self._requires_grad:
            raise RuntimeError("set_: a leaf Variable that requires grad is being used in an in-place operation.")
        if source is None:
            empty = creation.empty(0, dtype=self._dtype, device=self.device)
            return self._adopt(empty._storage, (0,), (1,), 0)
        if isinstance(source, Tensor):
            if source._dtype is not self._dtype:
                raise RuntimeError(f"set_: expected a tensor of dtype {self._dtype!r}, got {source._dtype!r}")
            return self._adopt(source._storage, source._shape, source._stride, source._offset)
        if not isinstance(source, Storage):
            raise TypeError(f"set_: expected a Tensor, a Storage or None, got {type(source).__name__}")
        held = getattr(source.data, "dtype", None)  # a NumPy dtype on cpu, a munet dtype on vulkan
        if held is not None and np.dtype(getattr(held, "np", held)) != np.dtype(self._dtype.np):
            raise RuntimeError(f"set_: the storage holds {held} elements, this tensor is {self._dtype!r}")
        numel = source.numel()
        shape = (numel - storage_offset,) if size is None else tuple(size)
        stride = contiguous_strides(shape) if stride is None else tuple(stride)
        last = storage_offset + sum((n - 1) * s for n, s in zip(shape, stride))
        if all(n > 0 for n in shape) and (storage_offset < 0 or last >= numel):
            raise RuntimeError(
                f"set_: sizes {list(shape)}, strides {list(stride)} and storage offset {storage_offset} are out of "
                f"bounds for a storage of {numel} elements"
            )
        return self._adopt(source, shape, stride, storage_offset)

    def share_memory_(self) -> Tensor:
        """Move this cpu tensor's storage into shared memory (a no-op if it is there already), under
        every tensor that views it: forked children and processes it is sent to through
        ``multiprocessing`` see the same memory."""
        from munet import _shared_memory
        from munet.ops._registry import refuse_under_trace

        if self.device.type != "cpu":
            raise RuntimeError(f"share_memory_: only cpu tensors can be moved to shared memory, got {self.device}")
        if self._storage.shared is None:
            refuse_under_trace("share_memory_", "share_memory_ is not supported inside munet.compile")
            block = _shared_memory.allocate(np.asarray(self._storage.data))
            _move_storage(self, block.array)
            self._storage.shared = block
        return self

    def is_shared(self) -> bool:
        """Whether the storage is in shared memory (``share_memory_``, or received from a process that
        shared it)."""
        return self._storage.shared is not None

    def is_set_to(self, tensor: Tensor) -> bool:
        """Whether both tensors are the same memory: storage, offset, sizes and strides."""
        return (
            self._storage is tensor._storage
            and self._offset == tensor._offset
            and self._shape == tensor._shape
            and self._stride == tensor._stride
        )

    def __deepcopy__(self, memo):
        """A copy with its own storage; only leaves can be deep-copied, as in PyTorch."""
        if id(self) in memo:
            return memo[id(self)]
        if self._grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the moment."
            )
        from munet.autograd.grad_mode import no_grad

        with no_grad():
            result = self.clone()
        result._requires_grad = self._requires_grad
        if self.grad is not None:
            result.grad = self.grad.__deepcopy__(memo)
        result.__dict__.update(self.__dict__)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        """Pickle as plain data: the values (a NumPy array, copied from any device), dtype, device,
        ``requires_grad``, the class (so a Parameter stays one) and the instance attributes. As in
        PyTorch, ``.grad`` and autograd history are not pickled, and views unpickle as separate tensors."""
        values = np.asarray(self.detach().numpy(force=True), order="C")  # ascontiguousarray makes 0-d 1-d
        if self._dtype is D.bfloat16:  # bfloat16 travels as its bits, so the pickle holds only NumPy types
            values = values.view(np.uint16)
        state = dict(self.__dict__) or None
        return (_rebuild_tensor, (type(self), values, self._dtype, str(self.device), self._requires_grad, state))

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        ForkingPickler.register(cls, _reduce_for_processes)

    # host access ---------------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array; shares memory on cpu."""
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if self.device != host_device() and not force:
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
            )
        storage = self._storage
        HOST_READS.watch(storage)  # under munet.compile a graph break can give this tensor its data here
        return np.asarray(self._storage.backend.to_numpy(self._data))

    def __array__(self, dtype=None, copy=None):
        arr = self.detach().numpy(force=True)
        return arr.astype(dtype) if dtype is not None else arr

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        value = self.detach().numpy(force=True).reshape(-1)[0]
        if self._dtype.is_floating_point:
            return float(value)
        if self._dtype.is_complex:
            return complex(value)
        if self._dtype is D.bool_:
            return bool(value)
        return int(value)

    def tolist(self):
        arr = self.detach().numpy(force=True)
        if self._dtype in (D.bfloat16, D.float16):
            arr = arr.astype(np.float32)
        return arr.tolist()

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} values is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        from munet._repr import tensor_repr

        return tensor_repr(self)

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self)

    # DLPack ---------------------------------------------------------------------------------------
    def __dlpack__(self, stream=None, **kwargs):
        """A DLPack capsule sharing this tensor's memory (cpu and cuda tensors; for cuda, the
        consumer's ``stream`` is made to wait for this device's current stream)."""
        backend = self._storage.backend
        if self.device != host_device():
            export = getattr(backend, "to_dlpack", None)
            if export is None:
                raise RuntimeError(
                    f"__dlpack__: only cpu and cuda tensors can be exported, this tensor is on {self.device}"
                )
            return export(self._data, stream, **kwargs)
        if self._dtype is D.bfloat16:
            raise RuntimeError("__dlpack__: NumPy cannot export bfloat16 through DLPack; cast with .float() first")
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        device_of = getattr(self._storage.backend, "dlpack_device", None)
        return (1, 0) if device_of is None else device_of()


def _cuda_backend():
    """The current cuda device's backend (it owns pinned host memory), or None without CUDA."""
    import munet.cuda

    return get_backend(as_device("cuda")) if munet.cuda.is_available() else None


def _rebuild_tensor(cls, values: np.ndarray, dtype, device: str, requires_grad: bool, state) -> Tensor:
    """The tensor ``Tensor.__reduce_ex__`` pickled: a leaf of class ``cls`` on ``device``."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"unpickling a tensor: expected a Tensor class, got {cls!r}")
    src = Tensor._from_numpy(values.view(dtype.np), device)
    out = object.__new__(cls)
    out._init_from(src, requires_grad)
    if state:
        out.__dict__.update(state)
    return out


def _storage_holders(t: Tensor) -> int:
    """References to ``t``'s storage, counted the same way for every tensor (see ``_move_storage``)."""
    return sys.getrefcount(t._storage)


_LONE_HOLDERS: list = []  # _storage_holders of a tensor that is its storage's only holder, once measured


def _move_storage(t: Tensor, data) -> None:
    """Point ``t``'s storage at the buffer ``data`` (its elements at the same positions) and every
    tensor over that storage at the new buffer. Finding the other tensors takes a scan of the heap
    (``gc.get_referrers``), done only when the storage has more holders than ``t`` alone."""
    if not _LONE_HOLDERS:
        lone = Tensor._make(Storage(np.empty(1), t._storage.backend), Size((1,)), (1,), 0, D.float32, None)
        _LONE_HOLDERS.append(_storage_holders(lone))
    shared = _storage_holders(t) != _LONE_HOLDERS[0]  # before any local name holds the storage
    storage = t._storage
    storage.data = data
    holders = [o for o in gc.get_referrers(storage) if isinstance(o, Tensor)] if shared else [t]
    for view in holders:
        if view._storage is storage:
            view._data = storage.backend.view(data, view._shape, view._stride, view._offset, view._dtype)


def _reduce_for_processes(t: Tensor):
    """How ``multiprocessing`` sends a tensor to another process: a shared storage as its segment's
    name and this tensor's geometry (the receiver attaches to the same memory), anything else by
    value, as ``pickle``."""
    block = t._storage.shared
    if block is None:
        return t.__reduce_ex__(4)
    geometry = (tuple(t._shape), t._stride, t._offset)
    state = dict(t.__dict__) or None
    return (_rebuild_shared, (type(t), block.name, block.array.shape[0], block.array.dtype.str, t._dtype, geometry,
                              t._requires_grad, state))  # fmt: skip


def _rebuild_shared(cls, name: str, numel: int, np_dtype: str, dtype, geometry, requires_grad: bool, state) -> Tensor:
    """The tensor ``_reduce_for_processes`` sent: a leaf over the sender's shared-memory segment."""
    from munet import _shared_memory

    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"receiving a tensor: expected a Tensor class, got {cls!r}")
    block = _shared_memory.attach(name, numel, np_dtype)
    storage = Storage(block.array, get_backend(host_device()))
    storage.shared = block
    shape, stride, offset = geometry
    out = object.__new__(cls)
    out._init_from(Tensor._make(storage, shape, tuple(stride), offset, dtype,
                                storage.backend.view(storage.data, shape, stride, offset, dtype)), requires_grad)  # fmt: skip
    if state:
        out.__dict__.update(state)
    return out


ForkingPickler.register(Tensor, _reduce_for_processes)


def _wrap_dim(dim: int, ndim: int, op: str = "") -> int:
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(
            f"{op}: dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})"
        )
    return dim % rank
