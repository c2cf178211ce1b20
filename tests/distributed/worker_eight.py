"""Run by test_eight_ranks.py on 8 ranks of one machine (``mpirun --oversubscribe``): an all-reduce against
its sum, and DDP steps on the MLP against single-process training on the whole batch (float64, 1e-10)."""

import numpy as np

import munet
import munet.distributed as dist
from munet import nn

dist.init_process_group("gloo")
RANK, WORLD = dist.get_rank(), dist.get_world_size()
assert WORLD == 8, "run on 8 ranks"
t = munet.tensor(np.arange(5.0) + RANK)
dist.all_reduce(t)
assert t.tolist() == (np.arange(5.0) * WORLD + sum(range(WORLD))).tolist()
big = munet.full((1 << 15,), float(RANK))  # 256 KiB: the TCP transport's ring, MPI's large all-reduce
dist.all_reduce(big, dist.ReduceOp.AVG)
assert (big.numpy() == (WORLD - 1) / 2).all()


def mlp(seed):
    munet.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).to(munet.float64)


reference, ddp = mlp(0), nn.parallel.DistributedDataParallel(mlp(RANK), bucket_cap_mb=1e-4)
opt_ref = munet.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
opt = munet.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
for step in range(3):
    rng = np.random.default_rng(step)
    x, y = munet.tensor(rng.standard_normal((2 * WORLD, 5))), munet.tensor(rng.standard_normal((2 * WORLD, 3)))
    for model, optimizer, (xs, ys) in (
        (reference, opt_ref, (x, y)),
        (ddp, opt, (x[2 * RANK : 2 * RANK + 2], y[2 * RANK : 2 * RANK + 2])),
    ):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(xs), ys).backward()
        optimizer.step()
    for (name, p), q in zip(reference.named_parameters(), ddp.module.parameters()):
        difference = np.abs(p.detach().numpy() - q.detach().numpy()).max()
        assert difference < 1e-10, f"rank {RANK}: step {step}: {name} differs by {difference:g}"
dist.destroy_process_group()
print(f"rank {RANK}: eight ok", flush=True)
