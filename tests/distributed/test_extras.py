"""torch.distributed's batched point-to-point, object point-to-point/scatter/gather, coalesced collectives and
subgroups, under mpirun and as separate processes (tests/distributed/worker_extras.py holds the checks)."""

import pytest

from tests.distributed.launch import needs_mpi, run_ranks, run_separately


@pytest.mark.parametrize(
    ("launch", "nprocs"),
    [pytest.param(run_ranks, 2, marks=needs_mpi, id="mpirun-2"), pytest.param(run_ranks, 4, marks=needs_mpi, id="mpirun-4"),
     pytest.param(run_separately, 2, id="separate-2"), pytest.param(run_separately, 4, id="separate-4")],
)  # fmt: skip
def test_extra_names_match_torch_semantics(launch, nprocs):
    launch("worker_extras.py", nprocs, "extras ok")
