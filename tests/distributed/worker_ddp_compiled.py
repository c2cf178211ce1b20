"""Run under mpirun by test_ddp_compiled.py: a munet.compile'd training step under DDP equals eager DDP.

The all-reduce is a node of the compiled graph (the ``all_reduce`` op), run by the program
between backward and the optimizer step; no Python hook runs when the plan replays.
"""

import tempfile

import numpy as np

import munet
import munet.distributed as dist
from munet import nn

dist.init_process_group("gloo")
RANK, WORLD = dist.get_rank(), dist.get_world_size()
munet.set_default_dtype(munet.float64)
TOL = 1e-10


def mlp():
    munet.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def shard_of(step, per_rank=4):
    rng = np.random.default_rng(100 + step)
    x = rng.standard_normal((per_rank * WORLD, 5))
    y = rng.standard_normal((per_rank * WORLD, 3))
    rows = slice(RANK * per_rank, (RANK + 1) * per_rank)
    return munet.tensor(x[rows]), munet.tensor(y[rows])


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def run(compiled: bool, bucket_cap_mb=None, steps=4):
    model = nn.parallel.DistributedDataParallel(mlp(), bucket_cap_mb=bucket_cap_mb)
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = munet.compile(train_step) if compiled else train_step
    losses = [step(model, opt, *shard_of(s)).item() for s in range(steps)]
    return model, losses, step


def check(bucket_cap_mb):
    eager, eager_losses, _ = run(False, bucket_cap_mb)
    model, losses, step = run(True, bucket_cap_mb)
    if not np.allclose(losses, eager_losses, rtol=0, atol=TOL):
        raise AssertionError(f"rank {RANK}: losses {losses} != eager {eager_losses}")
    for (name, p), (_, q) in zip(eager.module.named_parameters(), model.module.named_parameters()):
        diff = np.abs(p.detach().numpy() - q.detach().numpy()).max()
        if diff > TOL:
            raise AssertionError(f"rank {RANK}: parameter {name} differs from eager DDP by {diff:g}")
    reductions = [n for n in step.graph.nodes if n.op.name == "all_reduce"]
    if len(reductions) != len(model.reducer.buckets):
        raise AssertionError(
            f"rank {RANK}: {len(reductions)} all_reduce nodes for {len(model.reducer.buckets)} buckets"
        )
    everyone = [None] * WORLD
    dist.all_gather_object(everyone, [float(p.detach().sum()) for p in model.parameters()])
    if any(e != everyone[0] for e in everyone):
        raise AssertionError(f"rank {RANK}: the ranks' parameters differ: {everyone}")


def check_functional_all_reduce():
    from munet.distributed.functional_collectives import all_reduce

    x = munet.full((2, 3), float(RANK + 1))
    total = sum(range(1, WORLD + 1))
    for op, expected in [("sum", total), (dist.ReduceOp.AVG, total / WORLD), (dist.ReduceOp.MAX, WORLD)]:
        out = all_reduce(x.t(), op)  # a strided view is fine: the kernel reduces a contiguous copy
        if out.shape != (3, 2) or not np.all(out.numpy() == expected) or not np.all(x.numpy() == RANK + 1):
            raise AssertionError(f"rank {RANK}: functional all_reduce {op}: {out.numpy()} (input {x.numpy()})")
    compiled = munet.compile(lambda t: all_reduce(t * 2.0, "sum") + 1.0)
    for _ in range(2):  # the trace, then a replay
        if not np.all(compiled(x).numpy() == 2 * total + 1):
            raise AssertionError(f"rank {RANK}: compiled functional all_reduce gave {compiled(x).numpy()}")
    with tempfile.TemporaryDirectory() as folder:  # a saved program reduces over the default group
        munet.save(compiled, f"{folder}/program.munet")
        loaded = munet.load(f"{folder}/program.munet")
        if not np.all(loaded(x).numpy() == 2 * total + 1):
            raise AssertionError(f"rank {RANK}: the loaded program gave {loaded(x).numpy()}")


def check_grad_scaler_agrees():
    """Compiled as eager: an overflow on the last rank only skips the step on every rank (the
    scaler's flag is all-reduced by a node of the program) and the scale backs off everywhere."""

    def scaled_step(model, opt, scaler, x, y, poison):
        opt.zero_grad()
        scaler.scale(nn.functional.mse_loss(model(x), y)).backward()
        if RANK == WORLD - 1:
            model.module[0].weight.grad.mul_(poison)  # poison 1.0: clean; inf: an overflow on this rank only
        scaler.step(opt)
        scaler.update()

    model = nn.parallel.DistributedDataParallel(mlp())
    opt = munet.optim.SGD(model.parameters(), lr=0.1)
    scaler = munet.amp.GradScaler(init_scale=4.0)
    step = munet.compile(scaled_step)
    step(model, opt, scaler, *shard_of(0), munet.tensor(1.0))  # the first step's program (optimizer state made)
    for poison, scale in [(float("inf"), 2.0), (1.0, 2.0), (float("inf"), 1.0)]:
        before = [p.detach().clone() for p in model.parameters()]
        step(model, opt, scaler, *shard_of(1), munet.tensor(poison))
        moved = any(not np.array_equal(p.detach().numpy(), b.numpy()) for p, b in zip(model.parameters(), before))
        if moved != (poison == 1.0) or scaler.get_scale() != scale:
            raise AssertionError(
                f"rank {RANK}: compiled step with poison {poison} on rank {WORLD - 1}: moved {moved}, "
                f"scale {scaler.get_scale()} (expected {scale})"
            )
    if not any(n.op.name == "all_reduce" and n.outputs[0].dtype is munet.int32 for n in step.graph.nodes):
        raise AssertionError(f"rank {RANK}: the scaler's flag is not all-reduced inside the program")


check_functional_all_reduce()
check_grad_scaler_agrees()
check(None)  # one bucket
check(1e-5)  # one bucket per parameter: six collectives in the program
dist.barrier()
print(f"rank {RANK}: compiled ddp ok", flush=True)
dist.destroy_process_group()
