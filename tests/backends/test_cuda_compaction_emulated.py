"""``nonzero``, ``masked_select``, ``unique`` and ``unique_consecutive`` on the fake cuda devices: the
compaction kernels (``kernels_compaction.py``: count, scan, scatter) run under the CPU emulation and
give the cpu kernels' results, element for element, for inputs spanning several chunks; NVRTC
compiles every one of them for sm_80 and sm_90."""

import ml_dtypes
import numpy as np
import pytest

import munet
from munet.backends.cuda import kernels_compaction as C
from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import nvrtc
from tests.backends import fake_cupy

fake_cupy.skip_without_emulation()
CHUNK = C.CHUNK


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_the_compaction_kernels_compile(arch):
    sources = [render(dtype, rank) for render in (C.render_nonzero_count, C.render_nonzero_write)
               for dtype in E.DTYPES for rank in (0, 1, 3)]  # fmt: skip
    sources += [C.render_unique_count(dtype, nan_equal) for dtype in E.DTYPES for nan_equal in (False, True)]
    sources += [C.render_unique_write(dtype, nan_equal, sorted_keys) for dtype in E.DTYPES
                for nan_equal in (False, True) for sorted_keys in (False, True)]  # fmt: skip
    sources.append(C.render_run_lengths())
    sources += [render(dtype) for render in (C.render_row_merge_pass, C.render_gather_rows) for dtype in E.DTYPES]
    sources += [C.render_row_runs(dtype, write) for dtype in E.DTYPES for write in (False, True)]
    assert nvrtc.compile_source(nvrtc.combine(sources), arch, name=f"compaction_{arch}.cu").data


def _launched(prefix: str) -> list:
    return [name for name, _, _ in fake_cupy.LAUNCHES if name.startswith(prefix)]


def _sparse(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.integers(-3, 4, size=shape) * (rng.random(shape) < 0.3)
    if dtype == "bool":
        return values != 0
    array = values.astype(np.float32 if dtype == "bfloat16" else dtype)
    if np.issubdtype(array.dtype, np.floating):
        array.flat[:: max(array.size // 5, 1)] = np.nan  # NaN is non-zero
        array.flat[1] = -0.0
    return array.astype(ml_dtypes.bfloat16) if dtype == "bfloat16" else array


def _pair(array):
    host = munet.tensor(array)
    return host, host.cuda()


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int8", "uint8", "bool"])
def test_nonzero_equals_the_cpu_over_several_chunks(dtype):
    host, device = _pair(_sparse((7, 3 * CHUNK + 5), dtype))
    got = munet.nonzero(device)
    assert got.is_cuda and got.dtype is munet.int64
    np.testing.assert_array_equal(got.cpu().numpy(), munet.nonzero(host).numpy())
    assert _launched("munet_nonzero_count") and _launched("munet_nonzero_write"), fake_cupy.LAUNCHES


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("shape", [(), (0,), (5, 0, 2), (1,), (3, 4, 5)])
def test_nonzero_of_scalars_empty_and_3d_tensors(shape):
    array = (np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) % 3) if shape else np.float32(2)
    host, device = _pair(array)
    for as_tuple in (False, True):
        got, want = munet.nonzero(device, as_tuple=as_tuple), munet.nonzero(host, as_tuple=as_tuple)
        got, want = (got, want) if as_tuple else ((got,), (want,))
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g.cpu().numpy(), w.numpy())


@pytest.mark.usefixtures("fake_gpus")
def test_nonzero_reads_a_strided_view_in_row_major_order():
    host, device = _pair(_sparse((CHUNK + 3, 9), "float32", seed=2))
    for view in (lambda t: t.t(), lambda t: t[::2, 1::3]):
        np.testing.assert_array_equal(munet.nonzero(view(device)).cpu().numpy(), munet.nonzero(view(host)).numpy())


@pytest.mark.usefixtures("fake_gpus")
def test_masked_select_runs_on_the_device_kernels():
    rng = np.random.default_rng(3)
    x, mask = rng.standard_normal((5, 2 * CHUNK)).astype(np.float32), rng.random((2 * CHUNK,)) < 0.4
    got = munet.masked_select(munet.tensor(x).cuda(), munet.tensor(mask).cuda())
    np.testing.assert_array_equal(got.cpu().numpy(), x[np.broadcast_to(mask, x.shape)])
    assert _launched("munet_nonzero_write")


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "int16", "bool"])
@pytest.mark.parametrize("consecutive", [False, True])
def test_unique_and_unique_consecutive_equal_the_cpu(dtype, consecutive):
    rng = np.random.default_rng(4)
    array = np.repeat(rng.integers(-4, 5, size=(3, 40)), rng.integers(1, 4, size=40), axis=1)
    array = (array > 0) if dtype == "bool" else array.astype(dtype)
    if dtype.startswith("float"):
        array[0, ::7] = np.nan
        array[1, 3] = np.nan
    host, device = _pair(array)
    fn = munet.unique_consecutive if consecutive else munet.unique
    got = fn(device, return_inverse=True, return_counts=True)
    want = fn(host, return_inverse=True, return_counts=True)
    for name, g, w in zip(("values", "inverse", "counts"), got, want):
        assert g.is_cuda and g.dtype is w.dtype and g.shape == w.shape, name
        np.testing.assert_array_equal(g.cpu().numpy(), w.numpy(), err_msg=name)
    assert _launched("munet_unique_write"), fake_cupy.LAUNCHES


@pytest.mark.usefixtures("fake_gpus")
def test_unique_of_an_empty_tensor():
    got = munet.unique(munet.zeros(0, 3).cuda(), return_inverse=True, return_counts=True)
    assert [tuple(t.shape) for t in got] == [(0,), (0, 3), (0,)]


def _slices(dtype):
    """Rows (along dim 1 of a 3 x 150 x 2 tensor, so several chunks) drawn from few patterns, repeated
    consecutively now and then; float rows with NaNs and a -0.0 against 0.0."""
    rng = np.random.default_rng(9)
    patterns = rng.integers(-2, 3, size=(6, 3, 2))
    picks = np.repeat(rng.integers(0, 6, size=75), 2)
    array = np.moveaxis(patterns[picks], 0, 1)
    array = (array > 0) if dtype == "bool" else array.astype(dtype)
    if dtype.startswith("float"):
        array[0, 5, 1] = array[0, 40, 1] = np.nan
        array[2, 7, 0], array[2, 8, 0] = -0.0, 0.0
    return array


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool"])
@pytest.mark.parametrize("consecutive", [False, True])
@pytest.mark.parametrize("dim", [1, 0, -1])
def test_unique_slices_equal_the_cpu(dtype, consecutive, dim):
    host, device = _pair(_slices(dtype))
    host, device = host.transpose(0, 2), device.transpose(0, 2)  # strided input: 3 x 2 x 150
    fn = munet.unique_consecutive if consecutive else munet.unique
    got = fn(device, return_inverse=True, return_counts=True, dim=dim)
    want = fn(host, return_inverse=True, return_counts=True, dim=dim)
    for name, g, w in zip(("values", "inverse", "counts"), got, want):
        assert g.is_cuda and g.dtype is w.dtype and g.shape == w.shape, name
        np.testing.assert_array_equal(g.cpu().numpy(), w.numpy(), err_msg=name)
    assert _launched("munet_row_runs_write"), fake_cupy.LAUNCHES
    assert bool(_launched("munet_row_merge_pass")) is (not consecutive and device.shape[dim] > 1)


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("shape, dim", [((0, 3), 0), ((3, 0), 1), ((1, 4), 0), ((4, 1), 0)])
def test_unique_slices_of_empty_and_single_rows(shape, dim):
    host = munet.arange(float(np.prod(shape))).reshape(shape)
    for fn in (munet.unique, munet.unique_consecutive):
        got = fn(host.cuda(), return_inverse=True, return_counts=True, dim=dim)
        want = fn(host, return_inverse=True, return_counts=True, dim=dim)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype is w.dtype
            np.testing.assert_array_equal(g.cpu().numpy(), w.numpy())
