"""munet/ops/sampling.py: interpolate, grid_sample, affine_grid, pixel_shuffle/unshuffle and
unfold/fold against PyTorch (forward and gradients), float32/float64, errors."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from tests.reference import check, noncontiguous, randn

F64 = "float64"
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
RESIZES = [
    {"size": (7, 4)},
    {"size": 10},
    {"scale_factor": 1.7},
    {"scale_factor": (2, 0.5)},
    {"scale_factor": 2.3, "recompute_scale_factor": True},
    {"scale_factor": 3},
    {"size": (1, 1)},
]


@pytest.mark.parametrize("kw", RESIZES)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic", "area"])
def test_interpolate_2d(mode, kw):
    x = randn(2, 3, 5, 6, dtype=F64)
    corners = [None] if mode in ("nearest", "nearest-exact", "area") else [False, True]
    for align in corners:
        check(
            lambda x: F.interpolate(x, mode=mode, align_corners=align, **kw),
            lambda x: TF.interpolate(x, mode=mode, align_corners=align, **kw),
            x,
        )


@pytest.mark.parametrize("mode", ["nearest", "linear", "nearest-exact"])
def test_interpolate_1d(mode):
    x = randn(2, 3, 7, dtype=F64)
    for kw in ({"size": 12}, {"scale_factor": 0.6}, {"scale_factor": 2}):
        check(lambda x: F.interpolate(x, mode=mode, **kw), lambda x: TF.interpolate(x, mode=mode, **kw), x)
    if mode == "linear":
        check(
            lambda x: F.interpolate(x, 11, mode=mode, align_corners=True),
            lambda x: TF.interpolate(x, 11, mode=mode, align_corners=True),
            x,
        )


def test_interpolate_3d_float32_noncontiguous():
    x = randn(1, 2, 3, 4, 5)
    for mode in ("trilinear", "nearest"):
        check(
            lambda x: F.interpolate(x, scale_factor=(1.5, 2, 0.7), mode=mode),
            lambda x: TF.interpolate(x, scale_factor=(1.5, 2, 0.7), mode=mode),
            x,
        )
    x4 = noncontiguous(randn(2, 3, 6, 5))
    for mode in ("bilinear", "bicubic", "nearest"):
        check(
            lambda x: F.interpolate(x, size=(9, 7), mode=mode), lambda x: TF.interpolate(x, size=(9, 7), mode=mode), x4
        )
    check(lambda x: F.upsample_bilinear(x, scale_factor=2), lambda x: TF.upsample_bilinear(x, scale_factor=2), x4)
    check(lambda x: F.upsample_nearest(x, size=8), lambda x: TF.upsample_nearest(x, size=8), x4)


ANTIALIAS_RESIZES = [
    {"size": (5, 7)},  # down by 3.4 and 3.3: wide filters
    {"size": (16, 12)},  # up: the plain filter
    {"scale_factor": 0.37},
    {"scale_factor": (2.5, 0.6)},
    {"size": (1, 1)},
]


@pytest.mark.parametrize("kw", ANTIALIAS_RESIZES)
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_antialias(mode, kw):
    x = randn(2, 3, 17, 23, dtype=F64)
    for align in (False, True):
        check(
            lambda x: F.interpolate(x, mode=mode, align_corners=align, antialias=True, **kw),
            lambda x: TF.interpolate(x, mode=mode, align_corners=align, antialias=True, **kw),
            x,
        )
    check(  # float32 and a non-contiguous input
        lambda x: F.interpolate(x, mode=mode, antialias=True, **kw),
        lambda x: TF.interpolate(x, mode=mode, antialias=True, **kw),
        noncontiguous(randn(2, 3, 17, 23)),
        float64_reference=True,  # both round the weights to float32 in their own order
    )


def test_interpolate_errors():
    x = munet.zeros(1, 1, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        F.interpolate(x, size=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="got 4D input, but linear mode needs 3D input"):
        F.interpolate(x, size=2, mode="linear")
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful with an explicit size"):
        F.interpolate(x, size=2, recompute_scale_factor=True)
    with pytest.raises(NotImplementedError, match="mode 'lanczos' is not supported"):
        F.interpolate(x, size=2, mode="lanczos")
    for mode, shape in (("nearest", (1, 1, 4, 4)), ("area", (1, 1, 4, 4)), ("linear", (1, 1, 4))):
        with pytest.raises(ValueError, match="Anti-alias option is restricted to bilinear and bicubic modes"):
            F.interpolate(munet.zeros(*shape), size=2, mode=mode, antialias=True)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample(mode, padding_mode, align):
    x = randn(2, 3, 5, 6, dtype=F64)
    grid = randn(2, 4, 3, 2, dtype=F64, seed=2) * 1.4  # some samples fall outside [-1, 1]
    check(
        lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align),
        lambda x, g: TF.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align),
        x,
        grid,
    )


def test_grid_sample_float32_affine_pipeline():
    x = randn(2, 3, 6, 5)
    theta = (np.eye(2, 3)[None] + 0.2 * randn(2, 2, 3, dtype=F64, seed=4)).astype(np.float32)

    def warp(fns):
        return lambda x, t: fns.grid_sample(
            x, fns.affine_grid(t, (2, 3, 4, 7), align_corners=False), align_corners=False
        )

    check(warp(F), warp(TF), x, theta, float64_reference=True)
    with pytest.raises(RuntimeError, match=r"grid_sample: expected grid of shape \(N, H_out, W_out, 2\)"):
        F.grid_sample(munet.zeros(2, 1, 3, 3), munet.zeros(2, 3, 3))
    with pytest.raises(ValueError, match="expected padding_mode to be 'zeros', 'border', or 'reflection'"):
        F.grid_sample(munet.zeros(1, 1, 3, 3), munet.zeros(1, 2, 2, 2), padding_mode="wrap")


PADDINGS = ["zeros", "border", "reflection"]
# grid values PyTorch's samplers define: NaN, +-inf, the corners +-1, signed zeros, a point far out
GRID_SPECIALS = [np.nan, np.inf, -np.inf, 1.0, -1.0, 0.0, -0.0, 40.0]


def _grid(shape, dtype=F64, seed=2, specials=True) -> np.ndarray:
    """Sampling points in [-1.5, 1.5] (some outside the input), the specials first when asked."""
    grid = np.random.default_rng(seed).uniform(-1.5, 1.5, shape).astype(dtype)
    if specials:
        grid.reshape(-1)[: len(GRID_SPECIALS)] = GRID_SPECIALS
    return grid


def _sampled(fns, mode, padding_mode, align):
    return lambda x, g: fns.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align)


@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_bicubic(padding_mode, align):
    """Cubic convolution (A = -0.75) of the 4 x 4 taps, each tap's coordinate padded on its own:
    float64 with NaN and infinite grid values, a float32 non-contiguous input, size-1 axes."""
    m, t = _sampled(F, "bicubic", padding_mode, align), _sampled(TF, "bicubic", padding_mode, align)
    check(m, t, randn(2, 3, 5, 6, dtype=F64), _grid((2, 4, 3, 2)))
    check(m, t, noncontiguous(randn(2, 2, 4, 7)), noncontiguous(_grid((2, 3, 5, 2), np.float32, specials=False)))
    for shape in ((1, 2, 1, 5), (1, 2, 4, 1), (1, 1, 1, 1)):
        check(m, t, randn(*shape, dtype=F64), _grid((1, 3, 2, 2), seed=3, specials=False))
    check(m, t, randn(2, 3, 4, 5, dtype=F64), _grid((2, 0, 3, 2), specials=False))  # no samples
    check(m, t, randn(2, 0, 4, 5, dtype=F64), _grid((2, 2, 3, 2), specials=False))  # no channels


@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_3d(mode, padding_mode, align):
    """Volumetric sampling (trilinear, nearest): float64 with NaN and infinite grid values (PyTorch's
    3-D kernel clamps a NaN under padding, and moves a non-finite point off the input), a float32
    non-contiguous input, size-1 axes."""
    m, t = _sampled(F, mode, padding_mode, align), _sampled(TF, mode, padding_mode, align)
    check(m, t, randn(2, 3, 4, 5, 6, dtype=F64), _grid((2, 3, 4, 2, 3)))
    check(m, t, noncontiguous(randn(2, 2, 3, 4, 5)), noncontiguous(_grid((2, 2, 3, 4, 3), np.float32, specials=False)))
    for shape in ((1, 2, 1, 3, 4), (1, 1, 1, 1, 1)):
        check(m, t, randn(*shape, dtype=F64), _grid((1, 2, 2, 3, 3), seed=3, specials=False))
    check(m, t, randn(2, 3, 2, 4, 5, dtype=F64), _grid((2, 0, 3, 2, 3), specials=False))  # no samples
    check(m, t, randn(2, 0, 2, 4, 5, dtype=F64), _grid((2, 1, 3, 2, 3), specials=False))  # no channels


@pytest.mark.parametrize("device_type", ["cpu", "vulkan"])
def test_grid_sample_bicubic_and_3d_float32_on_devices(device_type, request):
    """float32 forward and gradients, NaN and infinite grid values among the points, on each device
    (on vulkan the decompositions' gathers and scatters run there; a missing kernel skips with the
    device's message)."""
    device = "cpu" if device_type == "cpu" else str(request.getfixturevalue("vulkan"))
    cases = [("bicubic", (2, 3, 5, 6), (2, 4, 3, 2)), ("bilinear", (2, 2, 3, 4, 5), (2, 2, 3, 4, 3))]
    cases.append(("nearest", (2, 2, 3, 4, 5), (2, 2, 3, 4, 3)))
    for mode, shape, grid_shape in cases:
        for padding_mode in PADDINGS:
            for align in (False, True):
                grid = _grid(grid_shape, np.float32)
                m, t = _sampled(F, mode, padding_mode, align), _sampled(TF, mode, padding_mode, align)
                check(m, t, randn(*shape), grid, device=device)


def test_grid_sampler_2d_and_3d_take_integer_modes():
    """``torch.grid_sampler_2d`` / ``grid_sampler_3d`` / ``grid_sampler``: (input, grid,
    interpolation_mode, padding_mode, align_corners), bilinear 0, nearest 1, bicubic 2."""
    x2, g2 = randn(2, 3, 5, 6, dtype=F64), _grid((2, 4, 3, 2), specials=False)
    x3, g3 = randn(1, 2, 3, 4, 5, dtype=F64), _grid((1, 2, 3, 4, 3), specials=False)
    for mode, padding_mode, align in ((2, 1, False), (0, 2, True), (1, 0, False)):
        args = (mode, padding_mode, align)
        check(lambda x, g: munet.grid_sampler_2d(x, g, *args), lambda x, g: torch.grid_sampler_2d(x, g, *args), x2, g2)
        check(lambda x, g: munet.grid_sampler(x, g, *args), lambda x, g: torch.grid_sampler(x, g, *args), x2, g2)
        if mode != 2:
            check(
                lambda x, g: munet.grid_sampler_3d(x, g, *args), lambda x, g: torch.grid_sampler_3d(x, g, *args), x3, g3
            )
            check(lambda x, g: munet.grid_sampler(x, g, *args), lambda x, g: torch.grid_sampler(x, g, *args), x3, g3)
    with pytest.raises(RuntimeError, match="grid_sampler_3d: expected 5-D input"):
        munet.grid_sampler_3d(munet.zeros(1, 1, 3, 3), munet.zeros(1, 2, 2, 2), 0, 0, False)
    with pytest.raises(RuntimeError, match=r"grid_sampler_2d: expected interpolation_mode 0 \(bilinear\)"):
        munet.grid_sampler_2d(munet.zeros(1, 1, 3, 3), munet.zeros(1, 2, 2, 2), 3, 0, False)


def test_grid_sample_volumetric_errors():
    with pytest.raises(RuntimeError, match="grid_sample: bicubic interpolation only supports 4-D input"):
        F.grid_sample(munet.zeros(1, 1, 2, 3, 3), munet.zeros(1, 2, 2, 2, 3), mode="bicubic")
    with pytest.raises(RuntimeError, match=r"grid_sample: expected grid of shape \(N, D_out, H_out, W_out, 3\)"):
        F.grid_sample(munet.zeros(1, 1, 2, 3, 3), munet.zeros(1, 2, 2, 2, 2))
    with pytest.raises(RuntimeError, match=r"grid_sample: expected 4-D \(N, C, H, W\) or 5-D"):
        F.grid_sample(munet.zeros(1, 1, 3), munet.zeros(1, 2, 2))


def _bicubic_step(x, grid):
    """A step through bicubic grid_sample (reflection padding) and trilinear grid_sample (border):
    the loss and the gradients of both inputs and both grids."""
    x.requires_grad_(True)
    grid.requires_grad_(True)
    y = F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection", align_corners=False)  # (2, 3, 4, 5)
    volume = y.unsqueeze(2).expand(2, 3, 2, 4, 5)
    points = munet.cat([grid, grid[..., :1] * 0.5], -1).unsqueeze(1).expand(2, 2, 4, 5, 3)
    z = F.grid_sample(volume, points, padding_mode="border", align_corners=True)
    loss = (y * y).sum() + (z * y.unsqueeze(2)).sum()
    loss.backward()
    return loss, x.grad, grid.grad


@pytest.mark.parametrize("device_type", ["cpu", "vulkan"])
def test_a_compiled_step_through_bicubic_and_3d_grid_sample(device_type, request, tmp_path, monkeypatch):
    """The compiled step decomposes the samplers and their gradients into gathers and scatters,
    and equals the eager step."""
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    device = "cpu" if device_type == "cpu" else request.getfixturevalue("vulkan")
    data = [randn(2, 3, 6, 7, seed=5), _grid((2, 4, 5, 2), np.float32, specials=False)]

    def inputs():
        return [munet.tensor(a, device=device) for a in data]

    compiled = munet.compile(_bicubic_step)
    try:
        got = compiled(*inputs())
        want = _bicubic_step(*inputs())
    except munet.DeviceError as exc:
        pytest.skip(f"on {device}: {exc}")
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), rtol=1e-5, atol=1e-5)
    names = {n.name for n in compiled.graph.nodes}
    assert not names & {"grid_sampler_2d_bicubic", "grid_sampler_2d_bicubic_backward", "grid_sampler_3d"}
    assert {"gather", "scatter"} <= names


@pytest.mark.parametrize("align", [False, True])
def test_affine_grid(align):
    theta = randn(2, 2, 3, dtype=F64)
    check(
        lambda t: F.affine_grid(t, (2, 3, 4, 5), align_corners=align),
        lambda t: TF.affine_grid(t, (2, 3, 4, 5), align_corners=align),
        theta,
    )
    check(
        lambda t: F.affine_grid(t, (2, 1, 1, 3), align_corners=align),
        lambda t: TF.affine_grid(t, (2, 1, 1, 3), align_corners=align),
        theta,
    )
    with pytest.raises(ValueError, match="expected a batch of 2D affine matrices of shape Nx2x3"):
        F.affine_grid(munet.zeros(2, 3, 3), (2, 1, 4, 4))


def test_pixel_shuffle_unshuffle():
    check(lambda x: munet.pixel_shuffle(x, 2), lambda x: torch.pixel_shuffle(x, 2), randn(2, 8, 3, 2))
    check(lambda x: F.pixel_shuffle(x, 3), lambda x: TF.pixel_shuffle(x, 3), noncontiguous(randn(9, 2, 3)))
    check(lambda x: munet.pixel_unshuffle(x, 2), lambda x: torch.pixel_unshuffle(x, 2), randn(2, 1, 2, 4, 6))
    with pytest.raises(
        RuntimeError, match=r"divisible by the square of upscale_factor, but input.size\(-3\)=5 is not divisible by 4"
    ):
        F.pixel_shuffle(munet.zeros(1, 5, 2, 2), 2)
    with pytest.raises(
        RuntimeError, match="pixel_unshuffle expects height and width to be divisible by downscale_factor"
    ):
        F.pixel_unshuffle(munet.zeros(1, 1, 3, 4), 2)


@pytest.mark.parametrize(
    "kw",
    [
        {"kernel_size": 2},
        {"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": (2, 1)},
        {"kernel_size": 3, "stride": 2},
    ],
)
def test_unfold_fold(kw):
    x = randn(2, 3, 5, 6, dtype=F64)
    check(lambda x: F.unfold(x, **kw), lambda x: TF.unfold(x, **kw), x)
    cols = TF.unfold(torch.zeros(2, 3, 5, 6), **kw)
    c = randn(*cols.shape, dtype=F64, seed=2)
    check(lambda c: F.fold(c, (5, 6), **kw), lambda c: TF.fold(c, (5, 6), **kw), c)
    check(lambda c: F.fold(c, (5, 6), **kw), lambda c: TF.fold(c, (5, 6), **kw), c[0])
    check(lambda x: F.unfold(x, **kw), lambda x: TF.unfold(x, **kw), noncontiguous(randn(3, 5, 6)))


def test_unfold_fold_errors():
    with pytest.raises(
        RuntimeError,
        match=r"fold: .*expected size of input's dimension 2 to match the calculated number of sliding blocks 4 \* 5 = 20, but got input.size\(2\)=7",
    ):
        F.fold(munet.zeros(1, 12, 7), (5, 6), 2)
    with pytest.raises(RuntimeError, match=r"unfold: expected input of rank 3 or 4 \(N, C, H, W\), got shape \(5, 6\)"):
        F.unfold(munet.zeros(5, 6), 2)
