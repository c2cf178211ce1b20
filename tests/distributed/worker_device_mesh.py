"""Run by test_device_mesh.py on 4 ranks: ``init_device_mesh`` and ``DeviceMesh`` (groups per mesh
dimension, local ranks, sub-meshes, PyTorch's errors), each group's collectives against their sums.
Exits non-zero on the first mismatch."""

import munet
import munet.distributed as dist
from munet.distributed.device_mesh import DeviceMesh, init_device_mesh
from tests.distributed.launch import expect_raises

mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))  # joins the default group (gloo) itself
assert dist.is_initialized() and dist.get_backend() == "gloo"
RANK, WORLD = dist.get_rank(), dist.get_world_size()
assert WORLD == 4, "run on 4 ranks"
dp, tp = divmod(RANK, 2)


def ranks(group):
    return dist.get_process_group_ranks(group)


def summed(value, group) -> float:
    t = munet.tensor([float(value)])
    dist.all_reduce(t, group=group)
    return t.item()


# the mesh and its groups
assert mesh.mesh.tolist() == [[0, 1], [2, 3]] and mesh.mesh.dtype is munet.int64
assert mesh.shape == (2, 2) and mesh.ndim == 2 and mesh.device_type == "cpu" and mesh.mesh_dim_names == ("dp", "tp")
assert mesh.size() == 4 and mesh.size(1) == 2 and mesh.size("dp") == 2
assert mesh.get_rank() == RANK and mesh.get_coordinate() == [dp, tp]
assert mesh.get_local_rank("dp") == dp and mesh.get_local_rank(1) == tp
tp_group, dp_group = mesh.get_group("tp"), mesh.get_group(0)
assert ranks(tp_group) == [2 * dp, 2 * dp + 1] and ranks(dp_group) == [tp, tp + 2]
assert mesh.get_all_groups() == [dp_group, tp_group] and mesh.get_group(-1) is tp_group
assert dist.get_rank(tp_group) == tp and dist.get_rank(dp_group) == dp
assert summed(RANK, tp_group) == 4 * dp + 1 and summed(RANK, dp_group) == 2 * tp + 2
assert summed(summed(RANK + 1, dp_group), tp_group) == 10, "over dp then tp is over every rank"
assert repr(mesh) == "DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))"

# sub-meshes reuse the parent's groups
sub = mesh["tp"]
assert sub.mesh.tolist() == [2 * dp, 2 * dp + 1] and sub.mesh_dim_names == ("tp",) and sub.ndim == 1
assert sub.get_group() is tp_group and sub.get_local_rank() == tp and sub.get_coordinate() == [tp]
assert mesh["dp"].mesh.tolist() == [tp, tp + 2] and mesh["dp"].get_group() is dp_group
assert mesh["dp", "tp"] is mesh

# PyTorch's errors
expect_raises(RuntimeError, ["`mesh_dim` needs to be specified"], mesh.get_group)
expect_raises(KeyError, ["Invalid mesh_dim_names ('pp',)"], lambda: mesh["pp"])
expect_raises(KeyError, ["ascending order"], lambda: mesh["tp", "dp"])
expect_raises(KeyError, ["Mesh dimension 'pp' does not exist"], lambda: mesh.get_group("pp"))
expect_raises(IndexError, ["out of range"], lambda: mesh.get_local_rank(2))
expect_raises(
    RuntimeError, ["bigger than default world size 4, but found 8 ranks"], lambda: init_device_mesh("cpu", (2, 4))
)
expect_raises(RuntimeError, ["same length"], lambda: init_device_mesh("cpu", (2, 2), mesh_dim_names=("a",)))
expect_raises(RuntimeError, ["must be unique"], lambda: init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "a")))
expect_raises(RuntimeError, ["Device type with index is not supported"], lambda: init_device_mesh("cuda:0", (4,)))

# a 1-D mesh over the whole world is the default group; a 3-D mesh; an explicit layout; a partial mesh
line = init_device_mesh("cpu", (4,))
assert line.get_group() is dist.group.WORLD and line.get_local_rank() == RANK and line.mesh_dim_names is None
expect_raises(RuntimeError, ["Cannot slice a DeviceMesh without mesh_dim_names"], lambda: line["x"])
cube = init_device_mesh("cpu", (1, 2, 2), mesh_dim_names=("pp", "dp", "tp"))
assert ranks(cube.get_group("pp")) == [RANK] and cube.get_coordinate() == [0, dp, tp]
assert cube["dp", "tp"].mesh.tolist() == [[0, 1], [2, 3]] and ranks(cube["dp", "tp"].get_group("tp")) == ranks(tp_group)
assert cube["pp", "tp"].mesh.tolist() == [[2 * dp, 2 * dp + 1]]
custom = DeviceMesh("cpu", [[0, 2], [1, 3]], mesh_dim_names=("a", "b"))
assert ranks(custom.get_group("b")) == [RANK % 2, RANK % 2 + 2] and ranks(custom.get_group("a")) == [2 * dp, 2 * dp + 1]
assert custom.get_coordinate() == [RANK % 2, RANK // 2] and summed(RANK, custom.get_group("b")) == 2 * (RANK % 2) + 2
part = DeviceMesh("cpu", [0, 1])
if RANK < 2:
    assert ranks(part.get_group()) == [0, 1] and part.get_local_rank() == RANK
else:
    assert part.get_coordinate() is None
    expect_raises(RuntimeError, [f"rank {RANK} is not part of this mesh"], part.get_group)
expect_raises(RuntimeError, ["distinct ranks of the default group"], lambda: DeviceMesh("cpu", [0, 0]))
assert init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")) == mesh != custom
assert hash(mesh) == hash(DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=("dp", "tp")))

# groups of a backend of their own
over = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"), backend_override={"tp": "gloo"})
assert dist.get_backend(over.get_group("tp")) == "gloo" and summed(RANK, over.get_group("tp")) == 4 * dp + 1
dist.destroy_process_group()
print(f"rank {RANK}: device mesh ok", flush=True)
