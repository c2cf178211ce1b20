"""Backend 'nccl' without a GPU: on the fake CuPy (tests/backends/fake_cupy.py), whose ``cupy.cuda.nccl``
really exchanges data between processes. In this process: a one-rank group (the errors when CuPy, a
device or NCCL is missing, backend strings, device_id, blocking waits); on 2 and 4 ranks
(worker_nccl.py), under mpirun and as separate processes: every collective, the NCCL calls they make,
groups and DDP. What this cannot show (NCCL's and the GPU's own behaviour) is test_nccl_gpu.py's."""

import sys
from datetime import timedelta

import numpy as np
import pytest

import munet
import munet.distributed as dist
from tests.backends import fake_cupy
from tests.distributed.launch import needs_mpi, run_ranks, run_separately


@pytest.fixture
def fake_gpus(monkeypatch):
    fake_cupy.install(monkeypatch)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()
    fake_cupy.uninstall()


def _one_rank(backend="nccl", **kwargs):
    dist.init_process_group(backend, store=dist.HashStore(), world_size=1, rank=0, **kwargs)


def test_without_a_gpu_nccl_is_refused_naming_the_backend():
    if munet.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    assert not dist.is_nccl_available() and not dist.is_backend_available("nccl")
    for backend in ("nccl", "cpu:gloo,cuda:nccl"):
        with pytest.raises(RuntimeError, match=r"backend 'nccl' \(cuda tensors through NCCL.*unavailable here"):
            _one_rank(backend)
    assert not dist.is_initialized()


@pytest.mark.usefixtures("fake_gpus")
def test_without_the_nccl_library_or_binding_nccl_is_refused(monkeypatch):
    assert dist.is_nccl_available()
    monkeypatch.setattr(fake_cupy.nccl, "available", False)
    assert not dist.is_nccl_available()
    with pytest.raises(RuntimeError, match=r"backend 'nccl'.*could not load the NCCL library.*nvidia-nccl-cu13"):
        _one_rank()
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", None)  # CuPy built without NCCL: the import fails
    with pytest.raises(RuntimeError, match=r"backend 'nccl'.*CuPy has no NCCL binding"):
        _one_rank()
    assert not dist.is_initialized()


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize(
    ("backend", "message"),
    [("cpu:nccl", "nccl carries cuda tensors only"), ("cuda:ucc", "unknown backend 'cuda:ucc'"),
     ("cpu:gloo,cpu:gloo", "names a device type twice"), ("cpu:gloo,cuda:mpi", "names two host backends"),
     ("cpu:mpi,cuda:nccl", "backend 'cpu:mpi,cuda:nccl' needs ranks started by mpirun")],
)  # fmt: skip
def test_backend_strings_are_checked(backend, message):
    with pytest.raises(ValueError, match=message):
        _one_rank(backend)


@pytest.mark.usefixtures("fake_gpus")
def test_a_one_rank_group_issues_nccl_calls_and_keeps_cpu_tensors_on_the_host():
    _one_rank("cpu:gloo,cuda:nccl")
    assert dist.get_backend() == dist.get_backend_config() == "cpu:gloo,cuda:nccl"
    t = munet.tensor([1.0, 2.0, 3.0]).cuda()
    dist.all_reduce(t, dist.ReduceOp.AVG)
    assert fake_cupy.NCCL_CALLS[-1][:4] == ("allReduce", 3, fake_cupy.NCCL_FLOAT32, fake_cupy.NCCL_AVG)
    assert t.cpu().tolist() == [1.0, 2.0, 3.0]
    calls = len(fake_cupy.NCCL_CALLS)
    c = munet.tensor([1.0, 2.0])
    dist.all_reduce(c)
    dist.broadcast(c, src=0)
    assert len(fake_cupy.NCCL_CALLS) == calls and c.tolist() == [1.0, 2.0]
    out = munet.zeros(3).cuda()
    dist.all_gather_into_tensor(out, t)
    assert out.cpu().tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="needs the output and input on the same transport"):
        dist.all_gather_into_tensor(munet.zeros(3), t)


@pytest.mark.usefixtures("fake_gpus")
def test_the_functional_all_reduce_reduces_cuda_tensors_where_they_live_and_refuses_a_graph_capture():
    from munet.distributed.functional_collectives import all_reduce

    _one_rank("cpu:gloo,cuda:nccl")
    t = munet.tensor([[1.0, 2.0], [3.0, 4.0]]).cuda()
    calls = len(fake_cupy.NCCL_CALLS)
    out = all_reduce(t.t(), "avg")  # a strided view: the kernel reduces a contiguous copy
    assert out.device == t.device and out.cpu().tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert [c[:4] for c in fake_cupy.NCCL_CALLS[calls:]] == [
        ("allReduce", 4, fake_cupy.NCCL_FLOAT32, fake_cupy.NCCL_AVG)
    ]
    cpu = munet.tensor([5.0])
    assert all_reduce(cpu).tolist() == [5.0] and len(fake_cupy.NCCL_CALLS) == calls + 1  # the host transport
    with pytest.raises(RuntimeError, match="all_reduce: a collective cannot run inside a CUDA graph capture"):
        with munet.cuda.graph(munet.cuda.CUDAGraph()):
            all_reduce(t)


@pytest.mark.usefixtures("fake_gpus")
def test_device_id_makes_the_communicator_at_once_and_pins_the_group_to_its_device():
    _one_rank(device_id=munet.device("cuda", 1))
    pg = dist.group.WORLD
    assert pg._nccl is not None and pg._nccl.index == 1 and pg._nccl.comm.device_id() == 1
    dist.all_reduce(munet.ones(2).to("cuda:1"))
    with pytest.raises(ValueError, match=r"communicator is on cuda:1, the tensor on cuda:0; a rank uses one cuda"):
        dist.all_reduce(munet.ones(2).to("cuda:0"))
    dist.destroy_process_group()
    with pytest.raises(ValueError, match="device_id must be a cuda device"):
        _one_rank(device_id="cpu")


@pytest.mark.usefixtures("fake_gpus")
def test_blocking_wait_times_out_and_aborts_the_communicator(monkeypatch):
    _one_rank()
    t = munet.ones(4).to("cuda")
    work = dist.all_reduce(t, async_op=True)
    assert work.is_completed()
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "1")
    hung = dist.all_reduce(t, async_op=True)
    hung.request.event.done = False  # as if a peer never arrived: the event never completes
    assert not hung.is_completed()
    with pytest.raises(dist.DistBackendError, match=r"all_reduce: timed out after 0.05 s"):
        hung.wait(timedelta(milliseconds=50))
    with pytest.raises(dist.DistBackendError, match=r"the NCCL communicator of this group was aborted"):
        dist.all_reduce(t)


@pytest.mark.usefixtures("fake_gpus")
def test_nccl_errors_become_dist_backend_errors(monkeypatch):
    _one_rank()

    def broken(*args):
        raise fake_cupy.NcclError("NCCL_ERROR_UNHANDLED_CUDA_ERROR: a fake failure")

    monkeypatch.setattr(dist.group.WORLD.nccl_comm(0, "test").comm, "allReduce", broken)
    with pytest.raises(dist.DistBackendError, match="all_reduce: NCCL failed: NCCL_ERROR_UNHANDLED_CUDA_ERROR"):
        dist.all_reduce(munet.ones(2).to("cuda"))


@pytest.mark.usefixtures("fake_gpus")
def test_the_fake_nccl_exchanges_data_between_communicators_of_one_id():
    """The fake itself: two communicators of one id in two threads reduce each other's arrays."""
    import threading

    uid = fake_cupy.nccl.get_unique_id()
    arrays = [fake_cupy.array(np.arange(4.0) + r) for r in range(2)]
    comms = [None, None]

    def rank(r):
        comms[r] = fake_cupy.nccl.NcclCommunicator(2, uid, r)
        p = arrays[r].data.ptr
        comms[r].allReduce(p, p, 4, fake_cupy.NCCL_FLOAT64, fake_cupy.NCCL_SUM, 0)
        comms[r].destroy()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for a in arrays:
        assert np.asarray(a).tolist() == [1.0, 3.0, 5.0, 7.0]


@pytest.mark.parametrize(
    ("launch", "nprocs", "backend"),
    [pytest.param(run_separately, 2, "nccl", id="separate-2"),
     pytest.param(run_separately, 4, "cpu:gloo,cuda:nccl", id="separate-4-mixed"),
     pytest.param(run_ranks, 2, "nccl", marks=needs_mpi, id="mpirun-2")],
)  # fmt: skip
def test_every_collective_and_ddp_through_the_fake_nccl(launch, nprocs, backend, monkeypatch):
    fake_cupy.skip_without_emulation()  # DDP's cuda kernels run on the CPU emulation
    monkeypatch.setenv("MUNET_TEST_NCCL_BACKEND", backend)
    launch("worker_nccl.py", nprocs, "nccl ok", timeout=400)
