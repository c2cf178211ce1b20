"""``munet.distributed.device_mesh``: on 4 ranks under ``mpirun --oversubscribe`` and as separate processes
(worker_device_mesh.py holds the checks), and a one-rank mesh in this process."""

import pytest

import munet
import munet.distributed as dist
from munet.distributed.device_mesh import DeviceMesh, init_device_mesh
from tests.distributed.launch import needs_mpi, run_ranks, run_separately


@pytest.mark.parametrize(
    "launch", [pytest.param(run_ranks, marks=needs_mpi, id="mpirun-4"), pytest.param(run_separately, id="separate-4")]
)
def test_device_mesh_groups_local_ranks_and_sub_meshes(launch):
    launch("worker_device_mesh.py", 4, "device mesh ok")


def test_a_one_rank_mesh_in_this_process():
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DeviceMesh("cpu", [0])
    dist.init_process_group("gloo", store=dist.HashStore(), world_size=1, rank=0)
    try:
        mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("dp",))
        assert mesh.get_group("dp") is dist.group.WORLD and mesh["dp"] is mesh and mesh.get_local_rank() == 0
        assert mesh.mesh.tolist() == [0] and repr(mesh) == "DeviceMesh('cpu', [0], mesh_dim_names=('dp',))"
        assert init_device_mesh(munet.device("cpu"), 1).size() == 1, "a device's type and a plain size are taken"
        with pytest.raises(ValueError, match="mesh_shape must hold positive sizes"):
            init_device_mesh("cpu", (0,))
        with pytest.raises(TypeError, match="mesh must hold integer ranks"):
            DeviceMesh("cpu", [0.5])
        with pytest.raises(TypeError, match="mesh_dim must be an int or a dimension name"):
            mesh.size(1.0)
        with pytest.raises(ValueError, match="backend_override should have the same length"):
            DeviceMesh("cpu", [0], backend_override=("gloo", "gloo"))
    finally:
        dist.destroy_process_group()
