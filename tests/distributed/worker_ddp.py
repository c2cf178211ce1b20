"""Run under mpirun by test_ddp.py: DDP training equals single-process training on the whole batch.

Every rank builds the same global batch and a reference model trained in-process on all of
it; the DDP replica sees only this rank's shard. Exits non-zero on the first mismatch.
"""

import copy
import os

import numpy as np

import munet
import munet.distributed as dist
from munet import nn

dist.init_process_group("gloo")
RANK, WORLD = dist.get_rank(), dist.get_world_size()
munet.set_default_dtype(munet.float64)  # exact comparisons: the only difference is summation order
TOL = 1e-10


def mlp(seed):
    munet.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def batch(step, per_rank=4):
    rng = np.random.default_rng(100 + step)
    x = rng.standard_normal((per_rank * WORLD, 5))
    y = rng.standard_normal((per_rank * WORLD, 3))
    return munet.tensor(x), munet.tensor(y)


def shard(t):
    n = t.shape[0] // WORLD
    return t[RANK * n : (RANK + 1) * n]


def assert_close(a, b, what):
    a, b = np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy())
    if not np.allclose(a, b, rtol=0, atol=TOL):
        raise AssertionError(f"rank {RANK}: {what}: max difference {np.abs(a - b).max():g}")


def check_training(bucket_cap_mb):
    reference = mlp(0)
    local = mlp(RANK)  # rank-dependent init: DDP must replace it with rank 0's
    model = nn.parallel.DistributedDataParallel(local, bucket_cap_mb=bucket_cap_mb)
    for (_, p), (_, q) in zip(reference.named_parameters(), model.module.named_parameters()):
        assert_close(p, q, "initial broadcast")
    opt_ref = munet.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        x, y = batch(step)
        opt_ref.zero_grad()
        nn.functional.mse_loss(reference(x), y).backward()
        opt_ref.step()
        opt.zero_grad()
        nn.functional.mse_loss(model(shard(x)), shard(y)).backward()
        for (name, p), (_, q) in zip(reference.named_parameters(), model.module.named_parameters()):
            assert_close(p.grad, q.grad, f"gradient of {name} at step {step} (bucket_cap_mb={bucket_cap_mb})")
        opt.step()
    for (name, p), (_, q) in zip(reference.named_parameters(), model.module.named_parameters()):
        assert_close(p, q, f"parameter {name} after training")
    return model


def check_grad_scaler_agrees():
    """An overflow on one rank only (a gradient written after DDP averaged them) skips the step on
    every rank, and the scale backs off everywhere; the next clean step steps everywhere."""
    model = nn.parallel.DistributedDataParallel(mlp(0))
    opt = munet.optim.SGD(model.parameters(), lr=0.1)
    scaler = munet.amp.GradScaler(init_scale=4.0)
    x, y = batch(0)
    for step, poisoned in enumerate([True, False]):
        before = [p.detach().clone() for p in model.parameters()]
        opt.zero_grad()
        scaler.scale(nn.functional.mse_loss(model(shard(x)), shard(y))).backward()
        if poisoned and RANK == WORLD - 1:
            model.module[0].weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        moved = [not np.array_equal(p.detach().numpy(), b.numpy()) for p, b in zip(model.parameters(), before)]
        if any(moved) == poisoned:
            raise AssertionError(f"rank {RANK}: step {step} (overflow on rank {WORLD - 1}: {poisoned}) moved {moved}")
        everyone = [None] * WORLD
        dist.all_gather_object(everyone, scaler.get_scale())
        if everyone != [2.0] * WORLD:
            raise AssertionError(f"rank {RANK}: scales after step {step}: {everyone}, expected 2.0 on every rank")


def check_no_sync():
    reference, model = mlp(0), nn.parallel.DistributedDataParallel(mlp(0))
    for step in range(3):
        x, y = batch(step)
        nn.functional.mse_loss(reference(x), y).backward()
        if step < 2:
            with model.no_sync():
                nn.functional.mse_loss(model(shard(x)), shard(y)).backward()
            if step == 1:
                local_only = copy.deepcopy(model.module[0].weight.grad)
        else:
            nn.functional.mse_loss(model(shard(x)), shard(y)).backward()
    gathered = [munet.zeros_like(local_only) for _ in range(WORLD)]
    dist.all_gather(gathered, local_only)
    if WORLD > 1 and all(np.allclose(g.numpy(), gathered[0].numpy()) for g in gathered):
        raise AssertionError("no_sync: gradients were averaged inside no_sync")
    for (name, p), (_, q) in zip(reference.named_parameters(), model.module.named_parameters()):
        assert_close(p.grad, q.grad, f"accumulated gradient of {name}")


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        munet.manual_seed(1)
        self.trunk = nn.Linear(4, 4)
        self.extra = nn.Linear(4, 4)
        self.never = nn.Linear(4, 4)

    def forward(self, x, use_extra):
        h = self.trunk(x)
        return self.extra(h) if use_extra else h


def check_find_unused():
    x = munet.tensor(np.random.default_rng(7).standard_normal((2 * WORLD, 4)))
    per_rank = [Branchy() for _ in range(WORLD)]  # what each rank computes, to average by hand
    for r, m in enumerate(per_rank):
        m(x[2 * r : 2 * r + 2], use_extra=r == 0).sum().backward()
    model = nn.parallel.DistributedDataParallel(Branchy(), find_unused_parameters=True)
    model(shard(x), use_extra=RANK == 0).sum().backward()
    for name, q in model.module.named_parameters():
        grads = [dict(m.named_parameters())[name].grad for m in per_rank]
        if name.startswith("never"):
            if q.grad is not None:
                raise AssertionError(f"rank {RANK}: {name} is used by no rank, its grad must stay None")
            continue
        expected = sum(g.numpy() if g is not None else 0 for g in grads) / WORLD
        assert_close(q.grad, munet.tensor(expected), f"find_unused_parameters gradient of {name}")
    keys = list(model.state_dict())
    if keys[0] != "module.trunk.weight" or list(model.module.state_dict())[0] != "trunk.weight":
        raise AssertionError(f"state_dict keys: {keys}")


def check_unused_without_flag_raises():
    model = nn.parallel.DistributedDataParallel(Branchy())
    model(shard(munet.ones(2 * WORLD, 4)), use_extra=False).sum().backward()
    try:
        model(shard(munet.ones(2 * WORLD, 4)), use_extra=False)
    except RuntimeError as error:
        if "find_unused_parameters=True" not in str(error) or "extra.weight" not in str(error):
            raise
        return
    raise AssertionError("an unused parameter without find_unused_parameters must raise at the next forward")


def check_broadcast_buffers():
    munet.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    model = nn.parallel.DistributedDataParallel(net)
    with munet.no_grad():
        net[1].running_mean.fill_(float(RANK))
    model.eval()
    model(munet.ones(2, 3))
    assert_close(net[1].running_mean, munet.zeros(4), "running_mean broadcast from rank 0")


def cnn(seed):
    munet.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 3)
    )


def check_sync_batchnorm():
    """DDP + SyncBatchNorm on shards equals BatchNorm on the whole batch: parameters and running statistics."""
    reference = cnn(0)
    model = nn.parallel.DistributedDataParallel(nn.SyncBatchNorm.convert_sync_batchnorm(cnn(RANK)))
    opt_ref = munet.optim.SGD(reference.parameters(), lr=0.05)
    opt = munet.optim.SGD(model.parameters(), lr=0.05)
    rng = np.random.default_rng(5)
    for _ in range(2):
        x = munet.tensor(rng.standard_normal((3 * WORLD, 2, 5, 5)))
        y = munet.tensor(rng.standard_normal((3 * WORLD, 3)))
        for m, o, xb, yb in ((reference, opt_ref, x, y), (model, opt, shard(x), shard(y))):
            o.zero_grad()
            nn.functional.mse_loss(m(xb), yb).backward()
            o.step()
    for (name, p), (_, q) in zip(reference.state_dict().items(), model.module.state_dict().items()):
        assert_close(p.double(), q.double(), f"SyncBatchNorm model {name}")


def check_vulkan():
    """Gradients of vulkan parameters are staged through host memory and averaged the same way."""
    munet.set_default_dtype(munet.float32)
    reference = mlp(0)
    model = nn.parallel.DistributedDataParallel(mlp(RANK).to("vulkan"))
    x, y = batch(0)
    x, y = x.float(), y.float()
    nn.functional.mse_loss(reference(x), y).backward()
    nn.functional.mse_loss(model(shard(x).to("vulkan")), shard(y).to("vulkan")).backward()
    for (name, p), (_, q) in zip(reference.named_parameters(), model.module.named_parameters()):
        if q.grad.device.type != "vulkan" or not np.allclose(p.grad.numpy(), q.grad.cpu().numpy(), atol=1e-5):
            raise AssertionError(f"rank {RANK}: vulkan gradient of {name}")
    munet.set_default_dtype(munet.float64)


model = check_training(bucket_cap_mb=None)
if len(model.reducer.buckets) != 1:
    raise AssertionError("a small model fits one 1 MiB first bucket")
fresh = nn.parallel.DistributedDataParallel(mlp(0), bucket_cap_mb=1e-5)
if len(fresh.reducer.buckets) != 1:
    raise AssertionError("before the first backward, one bucket holds every parameter (PyTorch's layout)")
tiny = check_training(bucket_cap_mb=1e-5)
order = [i for b in tiny.reducer.buckets for i in b.indices]
# rebuilt after the first backward in the order gradients became ready: PyTorch's 5, 4, 3, 2, 1, 0 here
if len(tiny.reducer.buckets) != 6 or order != list(range(6))[::-1]:
    raise AssertionError(f"buckets must follow the gradients' ready order (each bias before its weight), got {order}")

# Overlap: the last layer's bucket is already being reduced while backward reaches the first layer.
started = []


def watch_first_layer(module, args, out):
    out.register_hook(lambda g: started.append(tiny.reducer.buckets[0].work is not None))


tiny.module[0].register_forward_hook(watch_first_layer)
nn.functional.mse_loss(tiny(shard(batch(0)[0])), shard(batch(0)[1])).backward()
if started != [True]:
    raise AssertionError(f"bucket 0 must start reducing during backward, got {started}")
check_no_sync()
check_grad_scaler_agrees()
check_find_unused()
check_unused_without_flag_raises()
check_broadcast_buffers()
check_sync_batchnorm()
if os.environ.get("MUNET_TEST_VULKAN") == "1":
    check_vulkan()
dist.barrier()
print(f"rank {RANK}: ddp ok", flush=True)
dist.destroy_process_group()
