"""The column path's blocks on the OpenMP team (munet/backends/cpu/column_tasks.py) against PyTorch:
groups, strides, dilation, padding, 1-d, images side by side, one image cut into bands of rows,
non-contiguous inputs, float64; eager against compiled; the calls it leaves to ``run_tasks``."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet.backends.cpu import column_tasks, kernels_conv
from munet.compiler.codegen import build
from tests.reference import assert_close_to_reference

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")


@pytest.fixture
def team_runs(monkeypatch):
    """The column path only (the direct kernel declines everything), and the list of
    ``column_tasks.run``'s (served, block count, side by side) per call during the test."""
    monkeypatch.setattr(kernels_conv, "direct_conv2d", lambda *args, **kwargs: None)
    runs = []
    original = column_tasks.run

    def recording(x, w, result, blocks, side, geometry, threads):
        runs.append((original(x, w, result, blocks, side, geometry, threads), len(blocks), side))
        return runs[-1][0]

    monkeypatch.setattr(column_tasks, "run", recording)
    return runs


@pytest.fixture
def threads():
    """Runs the test's body at the thread counts it asks for, then restores the budget."""
    before = munet.get_num_threads()
    yield munet.set_num_threads
    munet.set_num_threads(before)


CASES = [
    ((1, 16, 30, 30), (24, 16, 1, 1), 2, 0, 1, 1),  # ResNet's 1x1 downsample at batch 1: bands of rows
    ((9, 8, 21, 21), (12, 8, 3, 3), 1, 1, 1, 1),  # blocks of images
    ((6, 16, 7, 7), (10, 16, 3, 3), 1, 1, 1, 1),  # 49 positions an image: side by side
    ((3, 6, 13, 11), (9, 2, 3, 2), (2, 1), (1, 2), (2, 1), 3),  # groups, unequal stride, dilation and padding
    ((2, 4, 12, 12), (6, 2, 3, 3), 1, "same", 2, 2),  # 'same' padding with dilation and groups
    ((4, 3, 40), (5, 3, 3), 2, 1, 1, 1),  # 1-d
    ((2, 1, 28, 28), (32, 1, 3, 3), 1, 0, 1, 1),  # the CNN's first layer: a contraction of 9
]


@pytest.mark.parametrize("shape, weight, stride, padding, dilation, groups", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocks_on_the_team_match_torch(shape, weight, stride, padding, dilation, groups, dtype, team_runs, threads):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(weight).astype(dtype)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    conv, tconv = (F.conv1d, torch.nn.functional.conv1d) if len(shape) == 3 else (F.conv2d, torch.nn.functional.conv2d)
    reference = tconv(torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64)), **kwargs)
    for count in (2, 3):
        threads(count)
        got = conv(munet.tensor(x), munet.tensor(w), **kwargs).numpy()
        if dtype == np.float64:
            np.testing.assert_allclose(got, reference.numpy(), rtol=1e-9, atol=1e-9)
        else:
            peer = tconv(torch.from_numpy(x), torch.from_numpy(w), **kwargs).numpy()
            assert_close_to_reference(got, peer, reference.numpy())
    assert len(team_runs) == 2 and all(served for served, _, _ in team_runs)


def test_a_single_image_is_cut_into_bands_and_images_side_by_side_into_blocks(team_runs, threads):
    threads(2)
    rng = np.random.default_rng(4)
    for shape, weight, side in (((1, 16, 56, 56), (24, 16, 1, 1), False), ((16, 8, 14, 14), (8, 8, 3, 3), True)):
        x, w = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(weight).astype(np.float32)
        F.conv2d(munet.tensor(x), munet.tensor(w), stride=2 if weight[-1] == 1 else 1)
        served, blocks, got_side = team_runs[-1]
        assert served and got_side == side and blocks >= 2 and blocks % 2 == 0  # every thread has a share


def test_a_non_contiguous_input(team_runs, threads):
    threads(2)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 8, 20, 18)).astype(np.float32)
    w = rng.standard_normal((6, 8, 3, 3)).astype(np.float32)
    view = munet.tensor(x).transpose(2, 3)
    got = F.conv2d(view, munet.tensor(w), padding=1, stride=2).numpy()
    reference = torch.nn.functional.conv2d(
        torch.from_numpy(x).transpose(2, 3), torch.from_numpy(w), padding=1, stride=2
    )
    np.testing.assert_allclose(got, reference.numpy(), rtol=1e-5, atol=1e-5)
    assert team_runs and team_runs[-1][0]


def test_compiled_gives_eager_bits_on_the_team(team_runs, threads):
    """Eager calls pass no im2col, the compiler its generated one: on the team both use the generated
    im2col and the same products, so the bits agree (with and without padding, side by side too)."""
    threads(2)
    rng = np.random.default_rng(6)
    for shape, weight, stride, padding in (((3, 8, 24, 24), (16, 8, 3, 3), 1, 1), ((1, 8, 30, 30), (16, 8, 1, 1), 2, 0),
                                           ((8, 4, 9, 9), (6, 4, 3, 3), 1, 2)):  # fmt: skip
        x, w = (
            rng.standard_normal(shape).astype(np.float32),
            munet.tensor(rng.standard_normal(weight).astype(np.float32)),
        )

        def step(t, w=w, stride=stride, padding=padding):
            return F.conv2d(t, w, stride=stride, padding=padding)

        compiled = munet.compile(step)
        np.testing.assert_array_equal(compiled(munet.tensor(x)).numpy(), step(munet.tensor(x)).numpy())
    assert len(team_runs) == 6 and all(served for served, _, _ in team_runs)


def test_whole_images_give_the_same_bits_at_two_and_three_threads(team_runs, threads):
    """Blocks of whole images (9 blocks at two threads, 13 at three): each image's products keep their shape however the
    images are grouped, so the thread count does not move the bits."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((25, 8, 18, 18)).astype(np.float32)
    w = rng.standard_normal((12, 8, 3, 3)).astype(np.float32)
    results = []
    for count in (2, 3):
        threads(count)
        results.append(F.conv2d(munet.tensor(x), munet.tensor(w), padding=1).numpy())
    np.testing.assert_array_equal(results[0], results[1])
    assert [side for _, _, side in team_runs] == [False, False] and team_runs[0][1] != team_runs[1][1]


def test_without_a_compiler_the_blocks_run_on_python_threads(team_runs, threads, monkeypatch):
    threads(2)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    F.conv2d(munet.tensor(x), munet.tensor(w), padding=1)  # the kernels built while a compiler is found
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert build.find_compiler() is None
    got = F.conv2d(munet.tensor(x), munet.tensor(w), padding=1).numpy()
    reference = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5)
    assert team_runs[-1][0] is False
