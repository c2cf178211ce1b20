"""The cpu arena: planned buffers and the kernels that write into them.

``OUT_KERNELS`` maps an op name to ``fn(out, *args, **attrs)`` writing the op's result into
``out`` with the same NumPy arithmetic the eager kernel does (so results stay bit-identical:
every elementwise op is defined by a scalar formula and uses the formula's NumPy rendering, as
its eager kernel; a ``where`` computes both branches before writing, so ``out`` may be one of
its inputs), plus whether it is elementwise (it may then write over an input read at the same
index).
Only float32/float64 nodes whose tensor arguments all have the output's dtype take this path;
anything else keeps the eager kernel and a fresh result, except the int64 index arguments of
``scatter`` and ``index`` (``_INDEX_ARGS``). A multi-output op (``max_pool``:
values and int64 indices) gets ``out`` as a tuple of its planned buffers.

``Arena(graph, donors)`` plans the graph, allocates one byte buffer per dtype and hands out
the planned views. Other lowerings opt in by setting ``writes_planned_outputs = True`` on
their op and writing each output into ``arena.target(value)(env)`` (``None``: allocate).
An op that also sets ``reads_at_write_index(node, source)`` may have a state update written
over a state input it reads (the fused elementwise kernels can).
"""

from __future__ import annotations

import numpy as np

from munet import metrics
from munet._tensor import Tensor
from munet.backends.cpu.direct_conv import WeightPack
from munet.backends.cpu.kernels_conv import convolution_into
from munet.backends.cpu.kernels_core import as_strided_scatter_into
from munet.backends.cpu.kernels_formula import out_kernel
from munet.backends.cpu.kernels_indexing import index_into, scatter_into
from munet.backends.cpu.kernels_linalg import matmul_into
from munet.backends.cpu.kernels_pooling import max_pool_into
from munet.compiler.ir import CONSTANT, ScalarOp, Value, iter_values
from munet.compiler.lower_cpu import generated_col2im, generated_im2col
from munet.compiler.passes.memory import MemoryPlan, plan_memory
from munet.ops._registry import DEFINE_HOOKS, OPS

_FLOATS = ("float32", "float64")


def _matmul(out, a, b):
    with np.errstate(all="ignore"):
        matmul_into(out, a, b)


def _clone(out, x):
    np.copyto(out, x)


def _cat(out, tensors, *, dim, sizes):
    np.concatenate([a for a, n in zip(tensors, sizes) if n is not None], axis=dim, out=out)


OUT_KERNELS = {
    # every op defined by a scalar formula: its NumPy rendering, writing into ``out``
    **{name: (out_kernel(name), True) for name, op in OPS.items() if op.formula is not None},
    "clone": (_clone, True),
    "cat": (_cat, False),
    "matmul": (_matmul, False),  # the eager kernel's products (tasks on the thread budget where they pay)
    "convolution": (convolution_into, False),
    "max_pool": (max_pool_into, False),
    "scatter": (scatter_into, False),
    # planned buffers instead of fresh ones each call (the fresh pages' faults were most of their time)
    "as_strided_scatter": (as_strided_scatter_into, False),
    "index": (index_into, False),
}


def _add_out_kernel(op) -> None:
    """An elementwise op defined later (``define``'s hook) writes planned buffers too."""
    if op.formula is not None:
        OUT_KERNELS[op.name] = (out_kernel(op.name), True)


DEFINE_HOOKS.append(_add_out_kernel)

# argument position of int64 index tensors (a tensor, or a list of them; the other tensors have the
# output's dtype)
_INDEX_ARGS = {"scatter": 1, "index": 1}
# ops with several outputs: their kernel gets a tuple of buffers, the first output has the
# arguments' dtype, the others are planned with their own dtype (max_pool's int64 indices)
_OUTPUTS = {"max_pool": 2}


def writes_into(node) -> bool:
    """Whether ``node``'s lowering writes planned buffers (an ``OUT_KERNELS`` call, or an opted-in op)."""
    if node.op is CONSTANT or isinstance(node.op, ScalarOp) or getattr(node.op, "view", None) is not None:
        return False
    if getattr(node.op, "writes_planned_outputs", False):
        return True
    if node.name not in OUT_KERNELS or len(node.outputs) != _OUTPUTS.get(node.name, 1) or node.effectful:
        return False
    if any(v.kind != "tensor" or v.shape is None or v.dtype is None for v in node.outputs):
        return False
    out = node.outputs[0]
    if out.dtype.np.name not in _FLOATS:
        return False
    position = _INDEX_ARGS.get(node.name)
    if position is not None:
        index = node.args[position]
        for i in index if isinstance(index, (list, tuple)) else (index,):
            if not isinstance(i, Value) or i.dtype is None or i.dtype.np != np.int64:
                return False
    args = [a for i, a in enumerate(node.args) if i != position]
    tensors = [v for v in iter_values(args) if v.kind == "tensor"]
    if node.name == "where":
        condition, tensors = tensors[0], tensors[1:]
        if condition is not node.args[0] or condition.dtype.np != np.bool_:
            return False
    return all(v.dtype is out.dtype for v in tensors)


def overwrites(node, source) -> bool:
    """Whether ``node`` may write its output over its input ``source`` (read only at the written index)."""
    rule = getattr(node.op, "reads_at_write_index", None)
    if rule is not None:
        return rule(node, source)
    return OUT_KERNELS.get(node.name, (None, False))[1]


def weight_pack(node):
    """A forward convolution's ``WeightPack`` where its weight is a state input (a parameter or
    buffer): the pack is kept between calls, keyed by the tensor's storage and version counter, so
    an in-place update (an optimizer step, ``with no_grad(): w.add_(1)``) repacks it."""
    weight = node.args[1] if len(node.args) > 1 else None
    source = getattr(weight, "source", None)
    if node.attrs.get("transposed") or not isinstance(source, Tensor):
        return None
    return WeightPack(lambda t=source: (t._storage, t._storage.version))


class Arena:
    """One byte buffer per dtype; ``target(value)`` says where a planned value is written."""

    def __init__(self, graph, donors: dict | None = None, slot: dict | None = None):
        self.plan: MemoryPlan = plan_memory(graph, writes_into, donors, overwrites)
        self.slot = slot if slot is not None else {}  # environment slots of the graph inputs
        self.storage = {key: np.empty(size, np.uint8) for key, size in self.plan.arena_bytes.items()}
        metrics.track_allocated_bytes("cpu", self, sum(self.plan.arena_bytes.values()))

    def buffer(self, v: Value) -> np.ndarray:
        """The arena view planned for ``v``."""
        key, offset = self.plan.offsets[v]
        n = v.dtype.np.itemsize
        for s in v.shape:
            n *= s
        return self.storage[key][offset : offset + n].view(v.dtype.np).reshape(v.shape)

    def target(self, v: Value):
        """``env -> array`` to write ``v`` into (its arena view or its state input), or None if unplanned."""
        if v in self.plan.offsets:
            view = self.buffer(v)
            return lambda env: view
        if v not in self.plan.inplace:
            return None
        source, shape, np_dtype = self.slot[self.plan.inplace[v]], v.shape, v.dtype.np

        def state_memory(env):
            buf = env[source]  # checked: a caller may pass anything as state
            if type(buf) is not np.ndarray or buf.shape != shape or buf.dtype != np_dtype or not buf.flags.c_contiguous:
                return np.empty(shape, np_dtype)
            return buf

        return state_memory

    def prepare(self, node, arg_fns, static: dict, dynamic: list, out_slots: list):
        """A step writing ``node``'s outputs into their planned buffers, or None when they are not planned."""
        fn = OUT_KERNELS.get(node.name, (None,))[0]
        if fn is None or len(node.outputs) != _OUTPUTS.get(node.name, 1):
            return None
        targets = [self.target(v) for v in node.outputs]
        if None in targets:
            return None
        if node.name == "convolution":
            # its col2im (transposed) or im2col (forward) as generated C, when a compiler exists
            role, generated = (
                ("col2im", generated_col2im()) if node.attrs.get("transposed") else ("im2col", generated_im2col())
            )
            if generated is not None:
                static = {**static, role: generated}
            pack = weight_pack(node)
            if pack is not None:
                static = {**static, "weight_pack": pack}
        if len(targets) == 1:
            (target,), (out_slot,) = targets, out_slots

            def arena_step(env):
                attrs = static
                if dynamic:
                    attrs = dict(static)
                    for k, f in dynamic:
                        attrs[k] = f(env)
                buf = target(env)
                fn(buf, *[f(env) for f in arg_fns], **attrs)
                env[out_slot] = buf

            return arena_step

        def multi_arena_step(env):
            attrs = static
            if dynamic:
                attrs = dict(static)
                for k, f in dynamic:
                    attrs[k] = f(env)
            bufs = tuple(t(env) for t in targets)
            fn(bufs, *[f(env) for f in arg_fns], **attrs)
            for slot, buf in zip(out_slots, bufs):
                env[slot] = buf

        return multi_arena_step
