"""The gradient reducer behind DistributedDataParallel: buckets, readiness, overlapped all-reduce.

Buckets follow PyTorch's layout: one bucket of each dtype and device until the first synced backward
has shown the order in which gradients become ready; from the next iteration on, buckets in that
order, each closed once it reaches ``bucket_cap_mb`` (the first at 1 MiB when ``bucket_cap_mb`` is
left at its default). A step traced by ``munet.compile`` before any eager backward lays the buckets
out from the parameters in reverse registration order under the same limits (as PyTorch's
DDPOptimizer does). With ``find_unused_parameters`` the buckets are laid out once, from the
parameters in registration order (the first, reduced last, under the small limit), and the bucket
list reversed. After each synced forward the reducer
walks the new autograd graph and hooks every node that feeds a parameter. When the last of
those nodes has run, the parameter's gradient for this backward is known: it is added to the
gradient already accumulated (``no_sync`` steps) and written into its bucket. A full bucket
starts an asynchronous averaging all-reduce at once, while backward goes on; buckets start in
index order on every rank, so the ranks' collectives always pair up. When the engine then
stores ``.grad``, each parameter's post-accumulate hook waits for its bucket and copies the
averaged gradient in.

Under ``munet.compile`` (a tracer is active) nothing is hooked and no host buffer is used:
when the engine stores the last ``.grad`` of a bucket, the bucket's gradients are concatenated,
averaged with the functional ``all_reduce`` op (``munet/distributed/functional_collectives.py``)
and copied back into ``.grad``, all as ops, so the compiled program runs the collective between
backward and the optimizer step.

With ``find_unused_parameters`` the walk also finds parameters the graph cannot reach; they
count as ready with a zero gradient, and a used-anywhere map reduced after the last bucket
decides whether their ``.grad`` is set (used on some rank) or left alone (used on none).
"""

from __future__ import annotations

import math

import numpy as np

from munet.autograd.grad_mode import no_grad
from munet.distributed import ReduceOp
from munet.distributed.comm_hooks import GradBucket, HookResult
from munet.distributed.functional_collectives import all_reduce as functional_all_reduce
from munet.ops.creation import empty, from_numpy
from munet.ops.movement import cat

UNFINISHED_REDUCTION = (
    "DistributedDataParallel: Expected to have finished reduction in the prior iteration before starting a new "
    "one. This error indicates that your module has parameters that were not used in producing loss ({names}). "
    "Pass find_unused_parameters=True to DistributedDataParallel, and make sure every output of forward "
    "takes part in computing the loss."
)


class Bucket:
    """Consecutive slots of one flat buffer, one per parameter: on the host, or on the parameters' cuda
    device when the group carries it through NCCL."""

    def __init__(self, indices: list[int], params: list, device):
        self.indices = indices
        self.offsets = {}
        total = 0
        for i in indices:
            self.offsets[i] = total
            total += params[i].numel()
        self.flat = empty(total, dtype=params[indices[0]].dtype, device=device)
        self.on_host = self.flat.device.type == "cpu"
        self.pending = len(indices)
        self.work = None

    def slot(self, index: int, param):
        """Parameter ``index``'s slot: a NumPy view on the host, else a flat tensor view."""
        start = self.offsets[index]
        if self.on_host:
            return self.flat.numpy()[start : start + param.numel()]
        return self.flat[start : start + param.numel()]

    def write(self, index: int, param, grad) -> None:
        """Put ``grad`` (None: zeros) into parameter ``index``'s slot."""
        slot = self.slot(index, param)
        if self.on_host:
            slot[:] = 0 if grad is None else np.asarray(grad.detach().cpu().numpy()).reshape(-1)
            return
        with no_grad():
            if grad is None:
                slot.zero_()
            else:
                slot.copy_(grad.detach().reshape(-1))

    def value(self, index: int, param):
        """Parameter ``index``'s slot as a tensor of its shape."""
        slot = self.slot(index, param)
        return (from_numpy(slot) if self.on_host else slot).reshape(tuple(param.shape))


FIRST_BUCKET_BYTES = 2**20  # PyTorch's ``dist._DEFAULT_FIRST_BUCKET_BYTES``


def assign_buckets(order: list[int], params: list, limits: list, place) -> list[list[int]]:
    """PyTorch's bucket assignment: parameters taken in ``order``, one open bucket per dtype and staging
    device (``place(p)``); a bucket closes once its bytes reach its limit, the first of each kind under
    ``limits[0]``, later ones under ``limits[1]`` (or ``limits[0]`` when there is one). Buckets come in
    the order they closed, then those still open at the end, earliest first parameter first."""
    open_buckets: dict = {}  # (dtype, device) -> [indices, bytes, position in limits]
    closed = []
    position = {i: k for k, i in enumerate(order)}
    for i in order:
        p = params[i]
        bucket = open_buckets.setdefault((p.dtype, str(place(p))), [[], 0, 0])
        bucket[0].append(i)
        bucket[1] += p.numel() * p.element_size()
        if bucket[1] >= limits[bucket[2]]:
            closed.append(bucket[0])
            bucket[:] = [[], 0, min(bucket[2] + 1, len(limits) - 1)]
    still_open = [indices for indices, _, _ in open_buckets.values() if indices]
    return closed + sorted(still_open, key=lambda indices: position[indices[0]])


class Reducer:
    """Averages ``params``' gradients over ``process_group`` while backward runs."""

    def __init__(
        self, params: list, names: list[str], process_group, cap_bytes: int, first_bytes: int, find_unused: bool
    ):
        self.params = params
        self.names = names
        self.pg = process_group
        self.find_unused = find_unused
        self.index = {id(p): i for i, p in enumerate(params)}
        self.limits = [first_bytes, cap_bytes]
        # as PyTorch: with find_unused never rebuilt, the first parameters (reduced last) in the small bucket;
        # otherwise one bucket of each kind until the first backward has shown the order gradients come in
        limits = self.limits if find_unused else [math.inf]
        layout = sorted(assign_buckets(list(range(len(params))), params, limits, self._place))
        self._use_layout(layout[::-1])
        self.recording = not find_unused  # the first synced backward's order of ready gradients
        self.ready_order: list[int] = []
        self.observed_order: list[int] | None = None  # a complete order, waiting for the next iteration
        self.active = False  # an iteration's reduction is under way
        self.traced = False  # this iteration runs under munet.compile's tracer
        self.finalized = True
        self.node_hooks: list = []
        self.comm_hook = None  # (state, hook) from DistributedDataParallel.register_comm_hook
        self.accumulate_hooks = [p.register_post_accumulate_grad_hook(self._on_grad_stored) for p in params]

    def _place(self, param):
        """Where parameter ``param``'s bucket lives: the host, or its cuda device on an NCCL group."""
        return self.pg.staging_device(param)

    def _use_layout(self, layout: list[list[int]]) -> None:
        self.buckets = [Bucket(indices, self.params, self._place(self.params[indices[0]])) for indices in layout]
        self.bucket_of = {i: b for b in self.buckets for i in b.indices}

    def _rebuild_buckets(self) -> None:
        """PyTorch's rebuild, once, at the iteration after the first synced backward: buckets in the order
        that backward made the gradients ready (rank 0's, so every rank pairs its collectives alike), the
        first under ``limits[0]`` (1 MiB by default: the first gradients start reducing early)."""
        order = from_numpy(np.asarray(self.observed_order, dtype=np.int64))
        self.pg.broadcast(order, 0).wait()
        self._use_layout(assign_buckets([int(i) for i in order.numpy()], self.params, self.limits, self._place))
        self.observed_order = None

    # one iteration --------------------------------------------------------------------------------
    def prepare_for_backward(self, outputs) -> None:
        """Hook the graph that produced ``outputs`` so this backward's gradients get reduced."""
        self.check_previous_iteration()
        if self.observed_order is not None:
            self._rebuild_buckets()
        self.ready_order = []
        for handle in self.node_hooks:
            handle.remove()
        self.node_hooks = []
        self.contributions = [[] for _ in self.params]
        self.remaining = [0] * len(self.params)
        self.ready = [False] * len(self.params)
        self.used = np.zeros(len(self.params), dtype=np.uint8)
        self.next_bucket = 0
        self.used_work = None
        self.active, self.finalized = True, False
        self.awaiting: set = set()  # locally used parameters whose .grad still holds the local gradient
        for bucket in self.buckets:
            bucket.pending, bucket.work = len(bucket.indices), None
        for node, feeds in _parameter_feeds(outputs, self.index).items():
            for _, i in feeds:
                self.remaining[i] += 1
                self.used[i] = 1
                self.awaiting.add(i)
            self.node_hooks.append(node.register_hook(self._node_hook(feeds)))
        if self.find_unused:
            for i in np.flatnonzero(self.used == 0):
                self._mark_ready(int(i), None)

    def prepare_for_traced_backward(self) -> None:
        """Under ``munet.compile``: reduce each bucket with ops once backward has stored all its gradients."""
        self.check_previous_iteration()
        if self.comm_hook is not None:
            raise RuntimeError(
                "DistributedDataParallel: a communication hook is not supported inside munet.compile (the hook "
                "runs Python on the host during backward)"
            )
        if self.find_unused:
            raise RuntimeError(
                "DistributedDataParallel: find_unused_parameters=True is not supported inside munet.compile "
                "(the unused set is found on the host); compile a step in which every parameter gets a gradient"
            )
        if self.observed_order is not None:
            self._rebuild_buckets()
        elif self.recording:  # traced before any eager backward: reverse registration order, as DDPOptimizer
            self._use_layout(assign_buckets(list(range(len(self.params)))[::-1], self.params, self.limits, self._place))
        self.recording = False
        self.ready = [False] * len(self.params)
        self.next_bucket = 0
        self.active, self.traced, self.finalized = True, True, True

    def skip_iteration(self) -> None:
        """A forward whose backward is not synced (``no_sync``): leave the gradients local."""
        self.check_previous_iteration()
        self.active = False

    def check_previous_iteration(self) -> None:
        if self.active and any(self.ready) and not all(self.ready):
            missing = [self.names[i] for i, ready in enumerate(self.ready) if not ready]
            self.active = False
            raise RuntimeError(UNFINISHED_REDUCTION.format(names=", ".join(missing)))

    def _node_hook(self, feeds):
        def hook(grad_inputs, grad_outputs):
            for position, i in feeds:
                if grad_inputs[position] is not None:
                    self.contributions[i].append(grad_inputs[position])
                self.remaining[i] -= 1
                if self.remaining[i] == 0:
                    self._mark_ready(i, self.contributions[i])

        return hook

    def _mark_ready(self, i: int, contributions) -> None:
        param, bucket = self.params[i], self.bucket_of[i]
        grad = param.grad
        for g in contributions or ():
            grad = g if grad is None else grad + g
        bucket.write(i, param, grad)
        self.contributions[i] = []
        self.ready[i] = True
        if self.recording:
            self.ready_order.append(i)
            if len(self.ready_order) == len(self.params):
                self.observed_order, self.recording = self.ready_order, False
        bucket.pending -= 1
        self._launch_ready_buckets()

    def _launch_ready_buckets(self) -> None:
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            bucket = self.buckets[self.next_bucket]
            bucket.work = self._start_reduction(self.next_bucket, bucket)
            self.next_bucket += 1
        for bucket in self.buckets[: self.next_bucket]:
            bucket.work.is_completed()  # MPI moves messages forward only inside its calls
        if self.next_bucket == len(self.buckets) and self.find_unused and self.used_work is None:
            self.used_all = from_numpy(self.used.copy())
            self.used_work = self.pg.allreduce(self.used_all, ReduceOp.MAX)

    def _start_reduction(self, index: int, bucket: Bucket):
        """The bucket's averaging all-reduce, or the registered communication hook's Future."""
        if self.comm_hook is None:
            return self.pg.allreduce(bucket.flat, ReduceOp.AVG)
        state, hook = self.comm_hook
        params = [self.params[i] for i in bucket.indices]
        offsets = [bucket.offsets[i] for i in bucket.indices]
        grad_bucket = GradBucket(index, bucket.flat, params, offsets, index == len(self.buckets) - 1)
        return HookResult(hook(state, grad_bucket), bucket.flat, "DistributedDataParallel")

    def _on_grad_stored(self, param) -> None:
        """Post-accumulate hook: replace the local gradient by the bucket's average."""
        i = self.index[id(param)]
        if self.active and self.traced:
            self._reduce_traced(i)
            return
        if not self.active or self.next_bucket < len(self.buckets) or i not in self.awaiting:
            return
        if not self.finalized:
            self._finalize_unused()
        self._write_average(i, param)
        self.awaiting.discard(i)
        if not self.awaiting:
            self.active = False

    def _reduce_traced(self, i: int) -> None:
        """Mark parameter ``i``'s gradient stored; average every bucket now complete, in bucket order."""
        self.ready[i] = True
        while self.next_bucket < len(self.buckets) and all(
            self.ready[j] for j in self.buckets[self.next_bucket].indices
        ):
            grads = [self.params[j].grad for j in self.buckets[self.next_bucket].indices]
            average = functional_all_reduce(cat([g.reshape(-1) for g in grads]), ReduceOp.AVG, self.pg)
            with no_grad():
                start = 0
                for g in grads:
                    g.copy_(average[start : start + g.numel()].reshape(g.shape))
                    start += g.numel()
            self.next_bucket += 1
        if self.next_bucket == len(self.buckets):
            self.active = self.traced = False

    def _finalize_unused(self) -> None:
        """Once per iteration: give parameters unused here but used elsewhere the average."""
        self.finalized = True
        if self.used_work is None:
            return
        self.used_work.wait()
        used_anywhere = self.used_all.numpy()
        for i in np.flatnonzero(self.used == 0):
            param = self.params[int(i)]
            if not used_anywhere[i]:
                continue  # used by no rank: .grad stays as it was, as in PyTorch
            if param.grad is None:
                param.grad = empty(param.shape, dtype=param.dtype, device=param.device)
            self._write_average(int(i), param)

    def _write_average(self, i: int, param) -> None:
        bucket = self.bucket_of[i]
        bucket.work.wait()
        with no_grad():
            param.grad.copy_(bucket.value(i, param))


def _parameter_feeds(outputs, index: dict) -> dict:
    """``{node: [(input position, parameter index), ...]}`` for nodes reachable from ``outputs``."""
    stack = [t.grad_fn for t in _tensors_in(outputs) if t.grad_fn is not None]
    seen, feeds = set(), {}
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for position, (child, _) in enumerate(node.next_functions):
            if child is None:
                continue
            variable = getattr(child, "variable", None)
            if variable is not None:
                if id(variable) in index:
                    feeds.setdefault(node, []).append((position, index[id(variable)]))
            else:
                stack.append(child)
    return feeds


def _tensors_in(value):
    from munet._tensor import Tensor

    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v)
