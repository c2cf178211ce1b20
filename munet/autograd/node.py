"""Autograd graph nodes.

A :class:`Node` is created by ``apply`` for every differentiable op whose inputs require
grad. It records the op, its attributes, the edges to the nodes (or leaf tensors) that
produced its inputs, and the tensors its gradient rule reads, each with the storage version
at save time. The gradient rule receives the node as ``ctx``.
"""

from __future__ import annotations

import itertools
import weakref

from munet._grad_state import STATE as _GRAD_STATE
from munet.autograd.anomaly_mode import forward_stack
from munet.autograd.graph import current_saved_tensors_hooks

_sequence = itertools.count()


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


class FreedGraphError(RuntimeError):
    """A backward reached a node whose saved tensors an earlier backward freed (PyTorch's RuntimeError)."""


class SavedTensor:
    """A tensor saved for backward plus the storage version it had when saved.

    Under ``autograd.graph.saved_tensors_hooks`` the tensor itself is not kept: ``packed`` holds
    what the pack hook returned, and a weak reference to the storage keeps the version check.
    """

    __slots__ = ("tensor", "version", "is_output", "output_nr", "shape", "dtype", "packed", "unpack", "edge", "storage")

    def __init__(self, tensor, is_output: bool = False, output_nr: int = 0):
        self.version = tensor._storage.version
        self.is_output = is_output
        self.output_nr = output_nr
        self.shape, self.dtype = tensor._shape, tensor._dtype
        hooks = current_saved_tensors_hooks()
        if hooks is None:
            self.unpack = None
            # An output is saved as a history-free alias, so output -> node -> output is no cycle.
            self.tensor = tensor._alias() if is_output else tensor
            return
        pack, self.unpack = hooks
        self.tensor = None
        self.storage = weakref.ref(tensor._storage)
        self.edge = None
        if not is_output and tensor._requires_grad:
            self.edge = (tensor._grad_fn, tensor._output_nr) if tensor._grad_fn is not None else (tensor, -1)
        self.packed = pack(tensor)

    def current_version(self) -> int:
        if self.unpack is None:
            return self.tensor._storage.version
        storage = self.storage()
        return self.version if storage is None else storage.version  # a freed storage was not modified

    def value(self, node, building_graph: bool):
        """The saved tensor; when ``building_graph``, connected to its history (outputs to ``node``)."""
        if self.unpack is None:
            t = self.tensor
            if self.is_output and building_graph:
                t = t._alias()
                t._grad_fn, t._output_nr, t._requires_grad = node, self.output_nr, True
            return t
        t = self.unpack(self.packed)
        from munet._tensor import Tensor

        if not isinstance(t, Tensor):
            raise TypeError(
                f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type {type(t).__name__}"
            )
        if not building_graph:
            return t
        if self.is_output:
            t = t._alias()
            t._grad_fn, t._output_nr, t._requires_grad = node, self.output_nr, True
        elif self.edge is not None:
            t = self._reconnect(t)
        return t

    def _reconnect(self, t):
        """An unpacked input given the history the saved one had (for higher-order gradients)."""
        source, nr = self.edge
        if nr < 0:
            # A leaf: its gradients accumulate through the leaf object itself, so route them there.
            return t if t is source else source + (t - source).detach()
        if t._grad_fn is source and t._output_nr == nr:
            return t
        t = t._alias()
        t._grad_fn, t._output_nr, t._requires_grad = source, nr, True
        return t


class Node:
    """One recorded op in the backward graph; also the ``ctx`` of its gradient rule."""

    __slots__ = (
        "op",
        "attrs",
        "needs_input_grad",
        "next_edges",
        "saved",
        "scalars",
        "input_shapes",
        "input_dtypes",
        "input_strides",
        "output_shapes",
        "output_dtypes",
        "pre_hooks",
        "post_hooks",
        "retained",
        "seq",
        "released",
        "forward_stack",
        "__weakref__",
    )

    def __init__(self, op, attrs, needs_input_grad, next_edges, input_shapes, input_dtypes):
        self.op = op
        self.attrs = attrs
        self.needs_input_grad = needs_input_grad
        self.next_edges = next_edges  # per flat input: (Node, output_nr) | (Tensor leaf, -1) | None
        self.saved: dict[str, SavedTensor] = {}
        self.scalars: dict[str, object] = {}  # saved roles that were Python numbers
        self.input_shapes = input_shapes
        self.input_dtypes = input_dtypes
        self.input_strides = None  # per flat input, for ops defined with saves_input_strides
        self.output_shapes = ()
        self.output_dtypes = ()
        self.pre_hooks = None  # {output_nr: {handle id: hook}} for hooks on non-leaf outputs
        self.post_hooks = None
        self.retained = None  # {output_nr: weakref(tensor)} for retain_grad()
        self.seq = next(_sequence)
        self.released = False
        self.forward_stack = forward_stack()  # the creating call's stack, in anomaly mode only

    def name(self) -> str:
        return getattr(self.op, "backward_name", None) or f"{_camel(self.op.name)}Backward0"

    def __repr__(self) -> str:
        return f"<{self.name()} object>"

    @property
    def next_functions(self):
        """PyTorch-style ``((node_or_None, output_nr), ...)``."""
        out = []
        for edge in self.next_edges:
            if edge is None:
                out.append((None, 0))
            elif edge[1] < 0:
                out.append((_AccumulateGradView(edge[0]), 0))
            else:
                out.append(edge)
        return tuple(out)

    def register_hook(self, fn):
        from munet.utils.hooks import RemovableHandle

        if self.post_hooks is None:
            self.post_hooks = {}
        return RemovableHandle.add(self.post_hooks, fn)

    # -- ctx API used by gradient rules ------------------------------------------------
    def saved_tensor(self, role: str):
        """The tensor saved under ``role``; connected to history when building a graph."""
        entry = self.saved.get(role)
        if entry is None and role in self.scalars:
            return self.scalars[role]
        if entry is None:
            if self.released:
                raise FreedGraphError(
                    f"Trying to backward through the graph a second time (or directly access saved tensors "
                    f"of {self.name()} after they have already been freed). Specify retain_graph=True "
                    "if you need to backward a second time or access saved tensors after backward."
                )
            raise KeyError(f"{self.name()} saved no tensor named '{role}'")
        return entry.value(self, _GRAD_STATE.enabled)

    def check_saved_versions(self) -> None:
        if self.released:
            raise FreedGraphError(
                f"Trying to backward through the graph a second time (or directly access saved tensors of "
                f"{self.name()} after they have already been freed). Saved intermediate values of the graph "
                "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you "
                "need to backward through the graph a second time."
            )
        for role, entry in self.saved.items():
            now = entry.current_version()
            if now != entry.version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: the tensor saved by {self.name()} as '{role}' (shape {list(entry.shape)}, "
                    f"{entry.dtype.name}) is at version {now}; expected version {entry.version} instead."
                )

    def release(self) -> None:
        self.saved = {}
        self.released = True


class _AccumulateGradView:
    """What ``next_functions`` shows for a leaf, like PyTorch's AccumulateGrad."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        self.variable = variable

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return "<AccumulateGrad object>"
