"""Device-side checks on the fake cuda devices (``fake_cupy``): the ``check`` op and the bounds-checked
``gather``/``index`` kernels (``kernels_checks.py``, ``kernels_indexing.py``) record a fault that
the next synchronization raises (``device_asserts.py``) with the cpu kernels' error and message;
cross_entropy, nll_loss and embedding, eager and compiled (graph replays included), equal the cpu.
The kernels run under the CPU emulation; NVRTC compiles them for sm_80 and sm_90."""

import numpy as np
import pytest

import munet
from munet.backends.cuda import nvrtc
from munet.backends.cuda.kernels_checks import CHECK
from munet.backends.cuda.kernels_indexing import render_take
from munet.ops.checks import IndexOutOfRangeError
from tests.backends import fake_cupy

fake_cupy.skip_without_emulation()
F = munet.nn.functional


def _logits(*shape, seed=0):
    return munet.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _close(got, want):
    assert got.device.type == "cuda"
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_the_checked_kernels_compile(arch):
    sources = [CHECK] + [render_take(size, rank, k) for size in (1, 2, 4, 8) for rank in (1, 3) for k in (1, 2)]
    assert nvrtc.compile_source(nvrtc.combine(sources), arch, name=f"checks_{arch}.cu").data


@pytest.mark.usefixtures("fake_gpus")
def test_gather_and_index_equal_the_cpu():
    x = _logits(4, 6, 5)
    gi = munet.tensor(np.random.default_rng(1).integers(0, 6, (4, 3, 5)))
    _close(
        munet.gather(x.cuda().transpose(0, 2), 1, gi.transpose(0, 2).cuda()),
        munet.gather(x.transpose(0, 2), 1, gi.transpose(0, 2)),
    )
    i0, i2 = munet.tensor([[0, -1], [3, 2]]), munet.tensor([4, -5])
    _close(x.cuda()[i0.cuda(), :, i2.cuda()], x[i0, :, i2])  # non-adjacent: the index dims go first
    _close(x.cuda()[:, i0.cuda(), i2.cuda()], x[:, i0, i2])  # adjacent: in place
    _close(x.to(munet.float16).cuda()[i0.cuda()].float(), x.to(munet.float16)[i0].float())
    _close(x.cuda()[munet.tensor([], dtype=munet.int64).cuda()], x[munet.tensor([], dtype=munet.int64)])


@pytest.mark.usefixtures("fake_gpus")
def test_losses_and_embedding_equal_the_cpu_eagerly():
    x, w = _logits(5, 4), munet.tensor([1.0, 2.0, 0.5, 1.5])
    t = munet.tensor([0, 3, -100, 1, 2])
    _close(F.cross_entropy(x.cuda(), t.cuda()), F.cross_entropy(x, t))
    got = F.cross_entropy(x.cuda(), t.cuda(), weight=w.cuda(), label_smoothing=0.1, reduction="none")
    _close(got, F.cross_entropy(x, t, weight=w, label_smoothing=0.1, reduction="none"))
    _close(
        F.nll_loss(x.log_softmax(1).cuda(), t.cuda(), reduction="sum"), F.nll_loss(x.log_softmax(1), t, reduction="sum")
    )
    image, target = _logits(2, 3, 4, 4), munet.tensor(np.random.default_rng(2).integers(0, 3, (2, 4, 4)))
    _close(F.cross_entropy(image.cuda(), target.cuda()), F.cross_entropy(image, target))
    weight, ids = _logits(7, 3), munet.tensor([[1, 6], [0, 1]], dtype=munet.int32)
    _close(F.embedding(ids.cuda(), weight.cuda()), F.embedding(ids, weight))


@pytest.mark.usefixtures("fake_gpus")
def test_an_out_of_range_target_raises_at_the_next_synchronization():
    x, bad = _logits(3, 4).cuda(), munet.tensor([0, 9, 1]).cuda()
    loss = F.cross_entropy(x, bad)  # the check only recorded a fault on the device
    with pytest.raises(IndexError, match=r"cross_entropy: target 9 is out of bounds for 4 classes .*raised by cuda:0"):
        loss.item()
    assert F.cross_entropy(x, bad.clamp(0, 3)).item() > 0  # the fault was cleared: the device goes on
    F.nll_loss(x, munet.tensor([0, 1, -3]).cuda())
    with pytest.raises(IndexError, match="nll_loss: target -3 is out of bounds"):
        munet.cuda.synchronize()
    F.embedding(munet.tensor([2, 7]).cuda(), x)
    with pytest.raises(IndexOutOfRangeError, match="got 7"):
        munet.cuda.synchronize()
    x.cuda()[munet.tensor([1, -5]).cuda()]
    with pytest.raises(IndexOutOfRangeError, match="index: index -5 is out of bounds for dimension 0 with size 3"):
        x.cpu()
    munet.cuda.synchronize()  # nothing left to raise


@pytest.mark.usefixtures("fake_gpus")
def test_launch_blocking_raises_at_the_op(monkeypatch):
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    x = _logits(3, 4).cuda()
    with pytest.raises(IndexError, match=r"target 4 is out of bounds for 4 classes \(expected 0 <= target < 4\)$"):
        F.cross_entropy(x, munet.tensor([0, 4, 1]).cuda())


@pytest.mark.usefixtures("fake_gpus")
def test_compiled_losses_check_on_the_device_and_in_graph_replays():
    def step(x, t, ids, weight):
        return F.cross_entropy(x, t) + F.embedding(ids, weight).sum()

    compiled = munet.compile(step)
    x, weight = _logits(6, 5), _logits(8, 3, seed=1)
    rng = np.random.default_rng(3)
    for _ in range(4):  # run, capture, replays
        t, ids = munet.tensor(rng.integers(0, 5, 6)), munet.tensor(rng.integers(0, 8, (2, 3)))
        _close(compiled(x.cuda(), t.cuda(), ids.cuda(), weight.cuda()), step(x, t, ids, weight))
    stats = compiled.stats()
    assert stats["cuda_graphs"] is True and "replayed" in stats["cuda_graph"], stats["cuda_graph"]
    out = compiled(x.cuda(), munet.tensor([0, 1, 2, 3, 4, 5]).cuda(), ids.cuda(), weight.cuda())
    with pytest.raises(IndexError, match="cross_entropy: target 5 is out of bounds for 5 classes"):
        out.item()
    out = compiled(x.cuda(), t.cuda(), munet.tensor([[0, 1, 8], [0, 0, 0]]).cuda(), weight.cuda())
    with pytest.raises(IndexOutOfRangeError, match="got 8"):
        out.cpu()
    _close(compiled(x.cuda(), t.cuda(), ids.cuda(), weight.cuda()), step(x, t, ids, weight))


# integer division: Python's floor and C's truncated remainder, a zero divisor raises at the sync ---------

INTEGERS = ("int8", "uint8", "int16", "int32", "int64")


def _torch_pair(values, dtype):
    import torch

    return munet.tensor(values).to(getattr(munet, dtype)), torch.tensor(values).to(getattr(torch, dtype))


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_division_equals_torch(dtype):
    import torch

    rng = np.random.default_rng(4)
    low = 0 if dtype == "uint8" else -100
    a_values, b_values = rng.integers(low, 100, (6, 5)), rng.integers(low, 100, (5,))
    b_values[b_values == 0] = -1 if low else 1
    a, ta = _torch_pair(a_values, dtype)
    b, tb = _torch_pair(b_values, dtype)
    ac, bc = a.cuda().t().contiguous().t(), b.cuda()  # a transposed operand, a broadcast one
    cases = [
        (ac // bc, ta // tb),
        (munet.fmod(ac, bc), torch.fmod(ta, tb)),
        (munet.remainder(ac, bc), torch.remainder(ta, tb)),
        (munet.div(ac, bc, rounding_mode="trunc"), torch.div(ta, tb, rounding_mode="trunc")),
        (munet.div(ac, bc, rounding_mode="floor"), torch.div(ta, tb, rounding_mode="floor")),
        (ac // 7, ta // 7),
        (ac % 3, ta % 3),
    ]
    if dtype != "uint8":
        cases += [(ac // -3, ta // -3), (munet.fmod(ac, -4), torch.fmod(ta, -4))]
    for got, want in cases:
        assert got.is_cuda and got.dtype == a.dtype
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    inplace = a.cuda()
    inplace //= bc
    np.testing.assert_array_equal(inplace.cpu().numpy(), (ta // tb).numpy())


@pytest.mark.usefixtures("fake_gpus")
def test_the_minimum_integer_divided_by_minus_one_wraps_as_torch():
    a, ta = _torch_pair([-(2**63), -(2**63), 9], "int64")
    b, tb = _torch_pair([-1, 2, -1], "int64")
    np.testing.assert_array_equal((a.cuda() // b.cuda()).cpu().numpy(), (ta // tb).numpy())
    np.testing.assert_array_equal(munet.fmod(a.cuda(), b.cuda()).cpu().numpy(), np.array([0, 0, 0]))


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("op", ["floor_divide", "fmod", "remainder"])
def test_an_integer_zero_divisor_raises_zero_division_at_the_next_synchronization(op):
    fn = getattr(munet, op)
    a, b = munet.tensor([5, -3, 7]), munet.tensor([2, 0, 1])
    with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):  # the cpu: at the op
        fn(a, b)
    out = fn(a.cuda(), b.cuda())  # cuda: the kernel recorded the fault
    with pytest.raises(RuntimeError, match=r"^ZeroDivisionError \(raised by cuda:0 at the first synchronization"):
        out.cpu()
    np.testing.assert_array_equal(fn(a.cuda(), 2).cpu().numpy(), fn(a, 2).numpy())  # the device goes on
    fn(a.cuda(), 0)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        munet.cuda.synchronize()


@pytest.mark.usefixtures("fake_gpus")
def test_compiled_integer_division_is_one_fused_kernel_that_records_a_zero_divisor():
    # the cuda target fuses integer division (CompileTarget.fuses_integer_division): the rendered
    # kernel takes the fault record, so a zero divisor raises at the next synchronization as eager's
    def f(a, b):
        return (a // b) * 2 + munet.remainder(a, b)

    compiled = munet.compile(f)
    a, b = munet.tensor([[7, -8, 9], [1, 2, -3]]), munet.tensor([2, -3, 4])
    for _ in range(3):  # run, capture, replay
        np.testing.assert_array_equal(compiled(a.cuda(), b.cuda()).cpu().numpy(), f(a, b).numpy())
    assert [n.name for n in compiled.graph.nodes] == ["fused"], compiled.describe()
    assert compiled.stats()["cuda_graphs"] is True, compiled.stats()["cuda_graph"]
    out = compiled(a.cuda(), munet.tensor([2, 0, 4]).cuda())  # a replay
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        out.cpu()
    np.testing.assert_array_equal(compiled(a.cuda(), b.cuda()).cpu().numpy(), f(a, b).numpy())


def test_a_zero_divisor_fills_the_fault_record_under_emulation():
    from munet.backends.cuda import emulation
    from munet.backends.cuda import kernels_elementwise as E
    from munet.backends.cuda.device_asserts import ZERO_DIVISION_SITE

    src = E.render_elementwise("div_floor", ("int32", "int32"), rank=1)
    assert src.faults and src.params[-1] == ("unsigned long long *", "munet_fault_record")
    a, b = np.array([7, 8, 9], np.int32), np.array([2, 0, 0], np.int32)
    out, record = np.full(3, 5, np.int32), np.zeros(3, np.int64)
    args = src.arguments((3,), (out, [1], 0), [(a, [1], 0), (b, [1], 0)], record.ctypes.data)
    emulation.Emulator([src]).run(src, 3, [v for _, v in args])
    np.testing.assert_array_equal(out, [3, 0, 0])
    assert record[0] == ZERO_DIVISION_SITE
    with pytest.raises(ValueError, match="needs the fault record"):
        src.arguments((3,), (out, [1], 0), [(a, [1], 0), (b, [1], 0)])
