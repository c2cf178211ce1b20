"""Eager cuda ops through the whole wired path on the fake devices: the kernel table's rendered
kernels (``kernels_rendered.py``), NVRTC (sm_90), the launcher (``launch.py``: module load, argument
packing, grid) and the fake CuPy's module loader, which runs the kernel's CUDA C on the CPU
(``emulation.py``). Results are compared with the cpu backend's on the same inputs.

A representative subset (broadcast, non-contiguous, Python-number and missing operands, 16-bit
floats, integers, in place with aliasing, every reduction with both layouts, the Philox kernels) keeps
the emulation's C++ builds to a few dozen; ``test_cuda_emulation.py`` checks every formula op's
kernel against the CPU, ``test_cuda_gpu.py`` (marker ``cuda``) the same path on a real GPU.
"""

import numpy as np
import pytest

import munet
from munet.backends.cuda.registry import KERNELS
from tests.backends import fake_cupy
from tests.backends.cuda_cases import EAGER_ELEMENTWISE, EAGER_REDUCTIONS, pair, same

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")


@pytest.mark.parametrize("case", EAGER_ELEMENTWISE)
def test_elementwise_ops_match_the_cpu(case):
    (x, xc), (y, yc) = pair((4, 6), seed=1), pair((4, 6), seed=2)
    fn = EAGER_ELEMENTWISE[case]
    same(fn(xc, yc), fn(x, y))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_floats_of_other_widths(dtype):
    (x, xc), (y, yc) = pair((3, 5), dtype, seed=3), pair((5,), dtype, seed=4)
    same(xc * yc + 1, x * y + 1)
    same(munet.exp(xc), munet.exp(x), exact=dtype != "float64")  # CUDA's exp vs the C library's


def test_integers_wrap_as_on_the_cpu():
    x = munet.tensor(np.arange(-60, 60, 7, dtype=np.int8))
    same(x.to("cuda:0") + 100, x + 100)
    a = munet.tensor(np.arange(12, dtype=np.int64).reshape(3, 4))
    same(a.to("cuda:0") * a.to("cuda:0").t().t() - 5, a * a - 5)


def test_in_place_ops_write_their_first_argument():
    x, xc = pair((5, 5), seed=5)
    y, yc = pair((5,), seed=6)
    before = xc.data_ptr()
    xc.add_(yc)
    x.add_(y)
    assert xc.data_ptr() == before
    same(xc, x)
    xc.mul_(xc.t())  # the operand aliases the output at other positions: computed through a copy
    x.mul_(x.t().clone())
    same(xc, x)


def test_size_zero_launches_nothing():
    x, xc = pair((0, 3))
    fake_cupy.LAUNCHES.clear()
    same(xc + 1, x + 1)
    assert fake_cupy.LAUNCHES == []


@pytest.mark.parametrize("case", EAGER_REDUCTIONS)
def test_reductions_match_the_cpu(case):
    x, xc = pair((12, 20), seed=7)
    fn = EAGER_REDUCTIONS[case]
    # the device sums in double and rounds once; the cpu sums float32 pairwise
    same(fn(xc), fn(x), exact="sum" not in case)


def test_reductions_of_integers_and_nan():
    a = munet.tensor(np.arange(1, 13, dtype=np.int32).reshape(3, 4))
    same(a.to("cuda:0").sum(1), a.sum(1))
    same(a.to("cuda:0").prod(0), a.prod(0))
    x = munet.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, -1.0]])
    same(x.to("cuda:0").amax(1), x.amax(1))
    same(x.to("cuda:0").argmax(1), x.argmax(1))


def test_random_streams_match_the_cpu():
    for draw, exact in (
        (lambda d: munet.rand(7, 3, device=d), True),
        (lambda d: munet.randint(-5, 9, (11,), device=d), True),
        (lambda d: munet.randn(9, device=d, dtype=munet.float64), False),
    ):
        munet.manual_seed(3)
        cpu = draw("cpu")
        munet.manual_seed(3)
        same(draw("cuda:0"), cpu, exact)


def test_every_launch_went_through_the_fake_module_loader():
    x, xc = pair((2, 3))
    fake_cupy.LAUNCHES.clear()
    same(munet.sqrt(xc.abs()), munet.sqrt(x.abs()))
    names = [name for name, _, _ in fake_cupy.LAUNCHES]
    assert len(names) == 2 and names[0].startswith("munet_abs_") and names[1].startswith("munet_sqrt_")


def test_an_op_without_a_cuda_kernel_is_a_device_error(monkeypatch):
    monkeypatch.delitem(KERNELS, "multinomial")  # the table without the op's entry
    x = munet.tensor([0.25, 0.5, 1.0]).to("cuda:0")
    with pytest.raises(munet.DeviceError, match=r"multinomial: no kernel for device 'cuda:0'"):
        munet.multinomial(x, 2)


def test_each_device_loads_its_own_module_and_runs_there():
    x, xc = pair((3, 4), device="cuda:1")
    fake_cupy.LAUNCHES.clear()
    with munet.cuda.device(0):
        result = xc * 3 - 1
    assert result.device == munet.device("cuda", 1)
    np.testing.assert_array_equal(result.cpu().numpy(), (x * 3 - 1).numpy())
    assert len(fake_cupy.LAUNCHES) == 2
