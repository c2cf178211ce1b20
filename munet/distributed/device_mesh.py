"""``munet.distributed.device_mesh``: PyTorch's ``DeviceMesh`` and ``init_device_mesh``.

A mesh lays the ranks out in an n-dimensional array (``init_device_mesh("cuda", (2, 4),
mesh_dim_names=("dp", "tp"))`` puts rank ``r`` at ``divmod(r, 4)``). Along each mesh dimension, the
ranks that differ only in that coordinate form a process group: ``get_group("tp")`` is this rank's
row, ``get_group("dp")`` its column. Building a mesh makes every such group with ``new_group``, so
every rank of the default group builds the same meshes in the same order (as PyTorch requires); a
group that spans the whole default group in its order *is* the default group. ``mesh["tp"]`` (or
``mesh["dp", "tp"]``) is the sub-mesh through this rank along those dimensions; it reuses the
parent's groups and makes none.
"""

from __future__ import annotations

import os

import numpy as np

from munet.distributed import world

__all__ = ["DeviceMesh", "init_device_mesh"]


def _check_device_type(device_type) -> str:
    if not isinstance(device_type, str):
        device_type = getattr(device_type, "type", device_type)
    if not isinstance(device_type, str):
        raise TypeError(f"DeviceMesh: device_type must be a string such as 'cuda' or 'cpu', got {device_type!r}")
    if ":" in device_type:
        raise RuntimeError(
            f"Device type with index is not supported but got {device_type}. If you maintained a 'munet.device' "
            "object, it's recommended to pass in 'device.type'."
        )
    return device_type


def _check_names(names, ndim: int):
    if names is None:
        return None
    names = tuple(names)
    if len(names) != ndim:
        raise RuntimeError(
            "mesh_shape and mesh_dim_names should have same length! "
            f"Found len(mesh_dim_names): {len(names)} and len(mesh_shape):{ndim}."
        )
    if len(set(names)) != len(names):
        raise RuntimeError(f"Each mesh_dim_name must be unique. Found repeated mesh_dim_name in mesh_dim_names {names}")
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"DeviceMesh: mesh_dim_names must be strings, got {names}")
    return names


class DeviceMesh:
    """Ranks laid out as ``mesh`` (an integer tensor of global ranks), one process group per dimension.

    ``get_group(mesh_dim)``, ``get_all_groups()``, ``size(mesh_dim=None)``, ``ndim``, ``shape``,
    ``get_rank()`` (the global rank), ``get_local_rank(mesh_dim)`` (the rank in that dimension's group,
    which is this rank's coordinate there), ``get_coordinate()``, ``mesh``, ``mesh_dim_names``,
    ``device_type`` and ``mesh[name]`` / ``mesh[name, ...]`` (a sub-mesh) are PyTorch's.
    """

    def __init__(self, device_type, mesh, *, mesh_dim_names=None, backend_override=None, _init_backend=True):
        self.device_type = _check_device_type(device_type)
        ranks = np.asarray(mesh.tolist() if hasattr(mesh, "tolist") else mesh)
        if ranks.size and not np.issubdtype(ranks.dtype, np.integer):
            raise TypeError(f"DeviceMesh: mesh must hold integer ranks, got {ranks.dtype}")
        self._ranks = ranks.astype(np.int64)
        self.mesh_dim_names = _check_names(mesh_dim_names, self._ranks.ndim)
        if _init_backend:
            self._groups = self._make_groups(self._check_overrides(backend_override))

    # construction -----------------------------------------------------------------------------------
    def _check_overrides(self, backend_override) -> list:
        overrides = [None] * self.ndim
        if backend_override is None:
            return overrides
        items = backend_override.items() if isinstance(backend_override, dict) else enumerate(backend_override)
        if not isinstance(backend_override, dict) and len(backend_override) != self.ndim:
            raise ValueError(
                f"backend_override should have the same length as the number of mesh dimensions ({self.ndim}), "
                f"but got {len(backend_override)}."
            )
        for dim, backend in items:
            overrides[self._dim_index(dim, "backend_override")] = backend[0] if isinstance(backend, tuple) else backend
        return overrides

    def _make_groups(self, backends: list) -> list:
        """This rank's group along each dimension; every rank of the default group makes every group."""
        default = world.default_group("DeviceMesh")
        size = default.size()
        flat = self._ranks.reshape(-1)
        if flat.size == 0 or flat.min() < 0 or flat.max() >= size or len(set(flat.tolist())) != flat.size:
            raise RuntimeError(
                f"DeviceMesh: the mesh must hold distinct ranks of the default group (0..{size - 1}), got "
                f"{self._ranks.tolist()}; the mesh should not be bigger than the world size"
            )
        me = world.get_rank()
        groups = []
        for dim in range(self.ndim):
            lines = np.moveaxis(self._ranks, dim, -1).reshape(-1, self._ranks.shape[dim])
            mine = None
            for line in lines.tolist():
                if line == default.ranks and backends[dim] is None:
                    group = default  # the whole default group, in its order: PyTorch reuses it too
                else:
                    group = world.new_group(line, backend=backends[dim])
                if me in line:
                    mine = group
            groups.append(mine)
        return groups

    @classmethod
    def _sub_mesh(cls, parent: DeviceMesh, dims: list[int]) -> DeviceMesh:
        coordinate = parent.get_coordinate()
        index = tuple(slice(None) if d in dims else coordinate[d] for d in range(parent.ndim))
        names = tuple(parent.mesh_dim_names[d] for d in dims)
        out = cls(parent.device_type, parent._ranks[index], mesh_dim_names=names, _init_backend=False)
        out._groups = [parent._groups[d] for d in dims]
        return out

    # queries ----------------------------------------------------------------------------------------
    @property
    def mesh(self):
        """The global ranks, as an int64 tensor of the mesh's shape."""
        from munet.ops.creation import from_numpy

        return from_numpy(self._ranks.copy())

    @property
    def ndim(self) -> int:
        return self._ranks.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._ranks.shape)

    def _dim_index(self, mesh_dim, where: str) -> int:
        if isinstance(mesh_dim, str):
            if self.mesh_dim_names is None or mesh_dim not in self.mesh_dim_names:
                raise KeyError(
                    f"Mesh dimension '{mesh_dim}' does not exist. Available mesh dimensions are: mesh_dim_names="
                    f"{self.mesh_dim_names}"
                )
            return self.mesh_dim_names.index(mesh_dim)
        if isinstance(mesh_dim, bool) or not isinstance(mesh_dim, (int, np.integer)):
            raise TypeError(f"{where}: mesh_dim must be an int or a dimension name, got {mesh_dim!r}")
        if not -self.ndim <= mesh_dim < self.ndim:
            raise IndexError(f"{where}: mesh_dim {mesh_dim} is out of range for a mesh of {self.ndim} dimension(s)")
        return int(mesh_dim) % self.ndim

    def _member(self, where: str) -> list[int]:
        coordinate = self.get_coordinate()
        if coordinate is None:
            raise RuntimeError(
                f"DeviceMesh.{where}: rank {world.get_rank()} is not part of this mesh {self._ranks.tolist()}"
            )
        return coordinate

    def get_group(self, mesh_dim=None):
        """The process group of this rank along ``mesh_dim`` (an index or a name; optional on a 1-D mesh)."""
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(
                    f"Found the DeviceMesh have {self.ndim} dimensions. Optional kwarg `mesh_dim` needs to be specified "
                    "when device_mesh.ndim > 1. If you want to get the list of all the ProcessGroups in the DeviceMesh,"
                    " please use `get_all_groups()` instead."
                )
            mesh_dim = 0
        dim = self._dim_index(mesh_dim, "get_group")
        self._member("get_group")
        return self._groups[dim]

    def get_all_groups(self) -> list:
        self._member("get_all_groups")
        return list(self._groups)

    def size(self, mesh_dim=None) -> int:
        """How many ranks the mesh holds (along ``mesh_dim`` when given)."""
        if mesh_dim is None:
            return int(self._ranks.size)
        return int(self._ranks.shape[self._dim_index(mesh_dim, "size")])

    def get_rank(self) -> int:
        """This process's global rank."""
        return world.get_rank()

    def get_local_rank(self, mesh_dim=None) -> int:
        """This rank's rank in its group along ``mesh_dim``: its coordinate there."""
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(
                    f"Found the DeviceMesh have {self.ndim} dimensions. Optional kwarg `mesh_dim` needs to be specified "
                    "when device_mesh.ndim > 1."
                )
            mesh_dim = 0
        return self._member("get_local_rank")[self._dim_index(mesh_dim, "get_local_rank")]

    def get_coordinate(self) -> list[int] | None:
        """This rank's index in the mesh, or None when it is not part of it."""
        found = np.argwhere(self._ranks == world.get_rank())
        return [int(c) for c in found[0]] if len(found) else None

    def __getitem__(self, mesh_dim_names) -> DeviceMesh:
        """The sub-mesh through this rank along the named dimensions (in the mesh's order)."""
        if self.mesh_dim_names is None:
            raise RuntimeError("Cannot slice a DeviceMesh without mesh_dim_names!")
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
        if not names or any(n not in self.mesh_dim_names for n in names):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Valid mesh_dim_names are {self.mesh_dim_names}.")
        dims = [self.mesh_dim_names.index(n) for n in names]
        if dims != sorted(set(dims)):
            raise KeyError(
                f"Invalid mesh_dim_names {names} specified. Found mesh dim indices to slice: {dims}. Mesh dim indices "
                "should be in ascending order."
            )
        if names == self.mesh_dim_names:
            return self
        self._member("__getitem__")
        return DeviceMesh._sub_mesh(self, dims)

    def __repr__(self) -> str:
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self._ranks.tolist()}{names})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, DeviceMesh):
            return NotImplemented
        return (self.device_type, self.shape, self._ranks.tolist(), self.mesh_dim_names) == (
            other.device_type,
            other.shape,
            other._ranks.tolist(),
            other.mesh_dim_names,
        )

    def __hash__(self) -> int:
        return hash((self.device_type, self.shape, tuple(self._ranks.reshape(-1).tolist()), self.mesh_dim_names))


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None) -> DeviceMesh:
    """A mesh of ``mesh_shape`` over ranks 0..N-1 in row-major order (every rank calls it).

    Joins the default process group first when there is none (with ``get_default_backend_for_device``'s
    backend: gloo for cpu and vulkan, nccl for cuda; then a cuda rank takes device ``LOCAL_RANK``).
    """
    device_type = _check_device_type(device_type)
    shape = tuple(int(n) for n in (mesh_shape if isinstance(mesh_shape, (tuple, list)) else (mesh_shape,)))
    if any(n <= 0 for n in shape):
        raise ValueError(f"init_device_mesh: mesh_shape must hold positive sizes, got {shape}")
    _check_names(mesh_dim_names, len(shape))
    if not world.is_initialized():
        world.init_process_group(world.get_default_backend_for_device(device_type))
        if device_type == "cuda" and "LOCAL_RANK" in os.environ:
            import munet

            munet.cuda.set_device(world.get_node_local_rank() % munet.cuda.device_count())
    count = int(np.prod(shape))
    if count > world.get_world_size():
        raise RuntimeError(
            f"Mesh should not be bigger than default world size {world.get_world_size()}, but found {count} ranks!"
        )
    ranks = np.arange(count, dtype=np.int64).reshape(shape)
    return DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names, backend_override=backend_override)
