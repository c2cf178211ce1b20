"""``DistributedDataParallel``: one model replica per rank, gradients averaged during backward.

Construction checks that every rank holds the same parameters, then copies rank 0's
parameters and buffers to all ranks. Each synced forward prepares the :class:`Reducer`,
which averages gradients bucket by bucket while backward runs; ``no_sync()`` keeps them
local so micro-batches accumulate, and the next synced backward averages the sum.
"""

from __future__ import annotations

from contextlib import contextmanager

from munet import distributed as dist
from munet.autograd.grad_mode import is_grad_enabled
from munet.compiler import is_compiling
from munet.distributed import replicated
from munet.nn.module import Module
from munet.nn.parallel.reducer import FIRST_BUCKET_BYTES, Reducer

DEFAULT_BUCKET_CAP_MB = 25


class DistributedDataParallel(Module):
    """Wrap ``module`` so that ``loss.backward()`` leaves every rank with the ranks' average gradient.

    ``ddp.module`` is the wrapped model; ``ddp.state_dict()`` has its keys under ``module.``,
    as in PyTorch. ``device_ids``/``output_device`` are accepted for compatibility: a MuNet rank
    uses the device its parameters live on.
    """

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        init_sync: bool = True,
        process_group=None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
    ):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be a munet.nn.Module, got {type(module).__name__}")
        self.process_group = dist.world.resolve_group(process_group, "DistributedDataParallel")
        if self.process_group is None:
            raise ValueError("DistributedDataParallel: this process is not a member of process_group")
        self.module = module
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError(
                "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient."
            )
        self._check_same_model_everywhere(named)
        if init_sync:
            self._broadcast_from_rank0([p for _, p in module.named_parameters()] + list(module.buffers()))
        cap = int((DEFAULT_BUCKET_CAP_MB if bucket_cap_mb is None else bucket_cap_mb) * 2**20)
        first = FIRST_BUCKET_BYTES if bucket_cap_mb is None else cap  # PyTorch's small first bucket by default
        self.reducer = Reducer(
            [p for _, p in named], [n for n, _ in named], self.process_group, cap, first, find_unused_parameters
        )
        replicated.register([p for _, p in named], self.process_group)

    def _check_same_model_everywhere(self, named) -> None:
        mine = [[name, p.dtype.name, list(p.shape)] for name, p in named]
        everyone = [None] * self.process_group.size()
        dist.all_gather_object(everyone, mine, group=self.process_group)
        for rank, theirs in enumerate(everyone):
            if theirs != everyone[0]:
                diff = next((a, b) for a, b in zip(everyone[0] + [None], theirs + [None]) if a != b)
                raise ValueError(
                    "DistributedDataParallel: the model's parameters differ across ranks: rank "
                    f"{self.process_group.ranks[0]} has {diff[0]} where rank {self.process_group.ranks[rank]} has {diff[1]}"
                )

    def _broadcast_from_rank0(self, tensors: list) -> None:
        """Copy rank 0's ``tensors`` to every rank, one coalesced broadcast per dtype (and per staging
        device: the host, or a cuda device the group carries through NCCL)."""
        from munet.distributed.collectives import flat_copy, split_into

        pg = self.process_group
        by_kind: dict = {}
        for t in tensors:
            by_kind.setdefault((t.dtype, str(pg.staging_device(t))), []).append(t)
        for (_, device), group in by_kind.items():
            flat = flat_copy(group, device)
            pg.broadcast(flat, 0).wait()
            if pg.rank() != 0:
                split_into(flat, group)

    def forward(self, *inputs, **kwargs):
        sync = is_grad_enabled() and self.require_backward_grad_sync
        traced = is_compiling()
        if sync:
            self.reducer.check_previous_iteration()
        else:
            self.reducer.skip_iteration()
        if self.broadcast_buffers and self.require_forward_param_sync:
            buffers = list(self.module.buffers())
            if buffers and traced:
                raise RuntimeError(
                    "DistributedDataParallel: broadcast_buffers=True is not supported inside munet.compile "
                    "(the buffers are broadcast through the host); pass broadcast_buffers=False"
                )
            if buffers:
                self._broadcast_from_rank0(buffers)
        if sync and traced:
            self.reducer.prepare_for_traced_backward()
        output = self.module(*inputs, **kwargs)
        if sync and not traced:
            self.reducer.prepare_for_backward(output)
        return output

    def register_comm_hook(self, state, hook) -> None:
        """Reduce each gradient bucket with ``hook(state, bucket: GradBucket) -> Future`` instead of the
        averaging all-reduce (PyTorch's semantics: once, before the first backward)."""
        if not callable(hook):
            raise TypeError(f"register_comm_hook: hook must be callable, got {type(hook).__name__}")
        if self.reducer.comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        if self.reducer.active:
            raise RuntimeError("register_comm_hook: call it before the first forward and backward")
        self.reducer.comm_hook = (state, hook)

    def _register_builtin_comm_hook(self, comm_hook_type) -> None:
        """``BuiltinCommHookType.ALLREDUCE`` or ``FP16_COMPRESS`` on this model's process group."""
        from munet.distributed.algorithms.ddp_comm_hooks import default_hooks

        hooks = {
            dist.BuiltinCommHookType.ALLREDUCE: default_hooks.allreduce_hook,
            dist.BuiltinCommHookType.FP16_COMPRESS: default_hooks.fp16_compress_hook,
        }
        if comm_hook_type not in hooks:
            raise ValueError(f"_register_builtin_comm_hook: expected a BuiltinCommHookType, got {comm_hook_type!r}")
        self.register_comm_hook(self.process_group, hooks[comm_hook_type])

    @contextmanager
    def no_sync(self):
        """Backward passes inside keep their gradients local; the first synced one averages the sum."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous
