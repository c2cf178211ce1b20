"""The direct float32 convolution (munet/backends/cpu/direct_conv.py) against PyTorch:
forward, transposed, gradients, every micro-kernel this CPU runs, thread splits, eager against
compiled, and the calls it declines."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet.backends.cpu import direct_conv, kernels_conv
from munet.compiler.codegen import build
from tests.reference import assert_close_to_reference

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")


def _record(monkeypatch, name: str) -> list:
    """The list that receives the results (None: declined) of ``kernels_conv.<name>`` during the test."""
    results = []
    original = getattr(kernels_conv, name)

    def recording(*args, **kwargs):
        results.append(original(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(kernels_conv, name, recording)
    return results


@pytest.fixture
def served(monkeypatch):
    """direct_conv2d's results during the test."""
    return _record(monkeypatch, "direct_conv2d")


@pytest.fixture(params=direct_conv.ISA_NAMES)
def micro_kernel(request):
    """Each micro-kernel this CPU can run (the others are skipped), restored afterwards."""
    best = direct_conv.isa()
    if not direct_conv.use_isa(request.param):
        pytest.skip(f"this CPU cannot run the {request.param} micro-kernel")
    yield request.param
    assert direct_conv.use_isa(best)


def _inputs(shape, weight, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32), rng.standard_normal(weight).astype(np.float32)


def _torch(fn, x, w, dtype, **kwargs):
    return fn(torch.from_numpy(x.astype(dtype)), torch.from_numpy(w.astype(dtype)), **kwargs).numpy()


# Output channels of at least 32 per group: the AVX-512 kernel's block (a partial one where not a multiple)
FORWARD = [
    ((1, 8, 56, 56), (40, 8, 3, 3), 1, 1, 1, 1),  # ResNet's first stage, narrowed
    ((3, 8, 26, 30), (45, 8, 3, 3), 1, 0, 1, 1),  # the CNN's 32->64 layer's shape, odd sizes
    ((2, 16, 20, 17), (72, 8, 3, 3), 1, 2, 2, 2),  # groups and dilation
    ((2, 8, 19, 40), (45, 8, 5, 2), 1, (2, 0), 1, 1),  # uneven kernel and padding
    ((1, 2, 16, 16), (33, 2, 7, 7), 1, 3, 1, 1),  # more channels than a tile has, a 7x7 kernel
    ((1, 8, 40, 40), (40, 8, 3, 3), 1, 5, 1, 1),  # padding wider than the kernel reaches
    ((1, 3, 70, 128), (32, 3, 7, 7), 2, 3, 1, 1),  # ResNet's stem: stride 2 (four phase planes on AVX2)
    ((1, 16, 31, 136), (72, 8, 3, 4), (3, 2), (1, 2), (2, 1), 2),  # unequal strides, dilation 2 at stride 2
    ((2, 8, 20, 40), (38, 8, 3, 3), 1, 1, 1, 1),  # AVX2: a last tile of 2 rows, stored in place
    ((1, 8, 12, 70), (35, 8, 3, 3), 1, 1, 1, 1),  # AVX2: a last tile of 5 rows: a shorter kernel, through the tile
]

# Shapes only the AVX-512 (channel-vector) kernel serves: narrow planes and any stride
CHANNEL_VECTORS = [
    ((2, 16, 7, 7), (64, 16, 3, 3), 1, 1, 1, 1),  # ResNet's last stage, narrowed: tiles of two 7-wide rows
    ((1, 64, 7, 7), (32, 64, 3, 3), 1, 1, 1, 1),  # one 7x7 image: 49 uses of each weight
    ((2, 16, 7, 9), (40, 16, 3, 3), 1, 1, 1, 1),  # an odd row count: the last pair's second row is dropped
    ((2, 16, 28, 28), (48, 16, 3, 3), 2, 1, 1, 1),  # a 3x3 stride-2 layer: 14-wide rows
    ((1, 8, 40, 50), (32, 8, 3, 3), 3, 1, 1, 1),  # stride 3: the kernel that reads its stride at run time
    ((1, 8, 12, 11), (32, 8, 3, 3), 1, 1, 1, 1),  # 11-wide rows: one tile of 14, 3 positions dropped
    ((1, 16, 9, 20), (32, 16, 3, 3), 1, 1, 1, 1),  # 20-wide rows: a full tile and one of 6
    ((2, 8, 26, 26), (64, 8, 3, 3), 1, 0, 1, 1),  # the CNN's 24-wide rows: two tiles of 12
    ((1, 8, 26, 26), (32, 8, 3, 3), 1, 1, 1, 1),  # 26-wide rows: tiles of 14 and 12
    ((2, 16, 15, 15), (64, 8, 3, 3), 2, 1, 2, 2),  # groups and dilation at stride 2
]


def _forward_matches_torch(shape, weight, stride, padding, dilation, groups, served):
    x, w = _inputs(shape, weight)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    got = F.conv2d(munet.tensor(x), munet.tensor(w), **kwargs).numpy()
    reference = _torch(torch.nn.functional.conv2d, x, w, np.float64, **kwargs)
    assert_close_to_reference(got, _torch(torch.nn.functional.conv2d, x, w, np.float32, **kwargs), reference)
    assert served and served[-1] is not None


@pytest.mark.parametrize("shape, weight, stride, padding, dilation, groups", FORWARD)
def test_forward_matches_torch(shape, weight, stride, padding, dilation, groups, micro_kernel, served):
    _forward_matches_torch(shape, weight, stride, padding, dilation, groups, served)


@pytest.mark.parametrize("shape, weight, stride, padding, dilation, groups", CHANNEL_VECTORS)
def test_channel_vector_kernel_matches_torch(shape, weight, stride, padding, dilation, groups, served):
    best = direct_conv.isa()
    if not direct_conv.use_isa("avx512"):
        pytest.skip("this CPU cannot run the avx512 micro-kernel")
    try:
        _forward_matches_torch(shape, weight, stride, padding, dilation, groups, served)
    finally:
        assert direct_conv.use_isa(best)


@pytest.mark.parametrize(
    "shape, weight, padding, dilation, groups, output_padding",
    [
        ((2, 8, 24, 24), (8, 40, 3, 3), 1, 1, 1, 0),  # the input gradient of a padded 3x3
        ((1, 16, 18, 20), (16, 32, 3, 3), 0, 2, 2, 1),  # groups, dilation, output padding
        ((2, 16, 30, 17), (16, 40, 2, 4), (1, 2), 1, 1, 0),  # cropping more than the kernel's overlap
    ],
)
def test_transposed_matches_torch(shape, weight, padding, dilation, groups, output_padding, micro_kernel, served):
    x, w = _inputs(shape, weight, seed=1)
    kwargs = dict(padding=padding, dilation=dilation, groups=groups, output_padding=output_padding)
    got = F.conv_transpose2d(munet.tensor(x), munet.tensor(w), **kwargs).numpy()
    fn = torch.nn.functional.conv_transpose2d
    reference = _torch(fn, x, w, np.float64, **kwargs)
    assert_close_to_reference(got, _torch(fn, x, w, np.float32, **kwargs), reference)
    assert served and served[-1] is not None


@pytest.mark.parametrize(
    "shape, weight, stride, padding, dilation",
    [
        ((2, 8, 28, 28), (40, 8, 3, 3), 1, 1, 1),
        ((2, 16, 30, 30), (36, 16, 3, 3), 1, 0, 1),  # no padding
        ((2, 8, 70, 130), (33, 8, 3, 3), 2, 1, 1),  # stride 2: the weight gradient reads phase planes
        ((2, 16, 24, 31), (32, 16, 2, 3), 1, (1, 2), 2),  # dilation, uneven kernel and padding
    ],
)
def test_gradients_match_torch(shape, weight, stride, padding, dilation, micro_kernel, served, monkeypatch):
    grads = []
    original = kernels_conv.direct_weight_grad
    monkeypatch.setattr(
        kernels_conv, "direct_weight_grad", lambda *a, **k: grads.append(original(*a, **k)) or grads[-1]
    )
    x, w = _inputs(shape, weight, seed=2)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation)
    tx, tw = munet.tensor(x, requires_grad=True), munet.tensor(w, requires_grad=True)
    (F.conv2d(tx, tw, **kwargs).relu() ** 2).sum().backward()
    for dtype in (np.float32, np.float64):
        rx = torch.from_numpy(x.astype(dtype)).requires_grad_()
        rw = torch.from_numpy(w.astype(dtype)).requires_grad_()
        (torch.nn.functional.conv2d(rx, rw, **kwargs).relu() ** 2).sum().backward()
        if dtype == np.float32:
            expected = rx.grad.numpy(), rw.grad.numpy()
    assert_close_to_reference(tx.grad.numpy(), expected[0], rx.grad.numpy(), what="input gradient")
    assert_close_to_reference(tw.grad.numpy(), expected[1], rw.grad.numpy(), what="weight gradient")
    assert served[0] is not None  # the forward
    assert grads and grads[-1] is not None


@pytest.mark.parametrize("shape", [(1, 32, 30, 30), (5, 32, 20, 20)])  # channel splits, image splits
def test_the_same_bits_at_every_thread_count(shape, served, monkeypatch):
    """The direct kernels' order does not depend on the thread split. Every convolution here (the
    forward, the input gradient's 40 -> 32 channels, the weight gradient) runs them: the column path's
    products are OpenBLAS's, whose bits move with the blocks a product is cut into (OpenBLAS 0.3.31)."""
    grads = _record(monkeypatch, "direct_weight_grad")
    x, w = _inputs(shape, (40, shape[1], 3, 3), seed=3)
    before = munet.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 3):
            munet.set_num_threads(threads)
            tx, tw = munet.tensor(x, requires_grad=True), munet.tensor(w, requires_grad=True)
            y = F.conv2d(tx, tw, padding=1)
            (y * y).sum().backward()
            results.append((y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()))
    finally:
        munet.set_num_threads(before)
    assert sum(r is not None for r in served) == 6  # the forward and the input gradient, at each count
    assert len(grads) == 3 and all(g is not None for g in grads)
    for result in results[1:]:
        for got, first in zip(result, results[0]):
            np.testing.assert_array_equal(got, first)


@pytest.mark.parametrize("shape", [(1, 32, 30, 30), (5, 32, 20, 20)])  # channel splits, image splits
def test_tasks_on_the_openmp_team_give_the_same_bits(shape, served, monkeypatch):
    """Above one thread a call's tasks run in the library's OpenMP loop, or with
    ``MUNET_CONV_TASKS=threads`` on ``run_tasks``'s threads: either way the forward, input and weight
    gradients keep the one-thread bits."""
    grads = _record(monkeypatch, "direct_weight_grad")
    x, w = _inputs(shape, (40, shape[1], 3, 3), seed=3)

    def step(threads: int, pool: str):
        monkeypatch.setenv(direct_conv.TASKS_ENV, pool)
        munet.set_num_threads(threads)
        assert direct_conv._on_team(direct_conv.library(), threads) == (threads == 1 or pool != "threads")
        tx, tw = munet.tensor(x, requires_grad=True), munet.tensor(w, requires_grad=True)
        y = F.conv2d(tx, tw, padding=1)
        y.square().sum().backward()
        return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()

    before = munet.get_num_threads()
    try:
        first, *others = [step(*config) for config in ((1, ""), (2, ""), (3, ""), (2, "threads"), (3, "threads"))]
    finally:
        munet.set_num_threads(before)
    assert sum(r is not None for r in served) == 10 and len(grads) == 5 and all(g is not None for g in grads)
    for other in others:
        for got, expected in zip(other, first):
            np.testing.assert_array_equal(got, expected)


def _conv_in_child(x, w):
    from munet import _threads

    assert _threads.kernel_threads() == 1
    return F.conv2d(munet.tensor(x), munet.tensor(w), padding=1).numpy()


def test_a_forked_child_runs_the_direct_kernel_without_hanging(served):
    """The parent runs the tasks on the OpenMP team; libgomp's team does not survive fork, so the
    child runs them on its own thread, with the same bits."""
    import multiprocessing

    x, w = _inputs((1, 32, 30, 30), (40, 32, 3, 3), seed=3)
    before = munet.get_num_threads()
    munet.set_num_threads(2)
    try:
        first = F.conv2d(munet.tensor(x), munet.tensor(w), padding=1).numpy()
        with multiprocessing.get_context("fork").Pool(1) as pool:
            child = pool.apply_async(_conv_in_child, (x, w)).get(timeout=120)
    finally:
        munet.set_num_threads(before)
    assert served[0] is not None
    np.testing.assert_array_equal(child, first)


def test_a_failing_task_on_the_team_returns_its_status():
    """The first non-zero status of a task comes back from the OpenMP loop (here -2: a packed weight
    given with a block that does not start at a multiple of 32 channels)."""
    lib = direct_conv.library()
    if lib is None or not lib.munet_conv_channel_vectors():
        pytest.skip("the channel-vector kernel does not run on this CPU")
    x, w = _inputs((2, 16, 10, 10), (64, 16, 3, 3), seed=8)
    pack = np.zeros((1, 64 * 16 * 9), np.float32)
    assert lib.munet_conv_pack_weights(w.ctypes.data, pack.ctypes.data, 64, 16 * 9) == 0
    out = np.empty((2, 64, 10, 10), np.float32)
    geometry = np.array((16, 10, 10, 3, 3, 10, 10, 1, 1, 1, 1, 1, 1, 1600, 6400), np.int64)
    pitch = np.zeros(5, np.int64)
    for tasks, expected in (([(0, 0, 1, 0, 32), (0, 1, 2, 32, 64)], 0), ([(0, 0, 1, 0, 32), (0, 1, 2, 16, 64)], -2)):
        bounds = np.array(tasks, np.int64)
        for threads in (1, 2):
            status = lib.munet_conv2d_forward_tasks(
                x.ctypes.data, w.ctypes.data, pack.ctypes.data, out.ctypes.data, geometry.ctypes.data, 2,
                bounds.ctypes.data, pitch.ctypes.data, None, None, 0, 1, threads,
            )  # fmt: skip
            assert status == expected


def test_compiled_gives_eager_bits(served):
    x, w = _inputs((2, 8, 24, 24), (40, 8, 3, 3), seed=4)
    weight = munet.tensor(w)

    def step(t):
        return F.conv2d(t, weight, padding=1).relu()

    compiled = munet.compile(step)
    np.testing.assert_array_equal(compiled(munet.tensor(x)).numpy(), step(munet.tensor(x)).numpy())
    assert len([r for r in served if r is not None]) >= 2


@pytest.mark.parametrize(
    "shape, weight, dtype, stride",
    [
        ((2, 8, 9, 6), (32, 8, 3, 3), np.float32, 1),  # 6-wide rows: narrower than any kernel's tile
        ((2, 8, 30, 30), (32, 8, 3, 3), np.float64, 1),
        ((2, 8, 30, 30), (6, 8, 3, 3), np.float32, 3),  # AVX2: stride 3 (10 output columns); AVX-512: 6 channels
        ((2, 64, 33, 67), (32, 64, 1, 1), np.float32, 2),  # a 1x1 downsample reads one position in 4
        ((2, 1, 30, 30), (32, 1, 3, 3), np.float32, 1),  # the CNN's first layer: a contraction of 9
        ((2, 8, 30, 30), (3, 8, 3, 3), np.float32, 1),  # fewer output channels than any tile has
    ],
)
def test_declined_calls_run_the_column_path(shape, weight, dtype, stride, served):
    x, w = _inputs(shape, weight, seed=5)
    x, w = x.astype(dtype), w.astype(dtype)
    padding = 1 if weight[-1] > 1 else 0
    got = F.conv2d(munet.tensor(x), munet.tensor(w), stride=stride, padding=padding).numpy()
    reference = _torch(torch.nn.functional.conv2d, x, w, np.float64, stride=stride, padding=padding)
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-4)
    assert all(r is None for r in served)


def test_without_a_compiler_the_column_path_serves(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert direct_conv.library() is None
    x, w = _inputs((1, 3, 30, 30), (4, 3, 3, 3), seed=6)
    assert direct_conv.direct_conv2d(x, w, (1, 1), ((1, 1), (1, 1)), (1, 1), 1, (30, 30)) is None
    got = F.conv2d(munet.tensor(x), munet.tensor(w), padding=1).numpy()
    reference = _torch(torch.nn.functional.conv2d, x, w, np.float64, padding=1)
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
def test_weight_gradient_of_one_input_channel(threads, micro_kernel, monkeypatch):
    # the CNN's first layer: a contraction of 9 keeps the forward on the column path, but its weight
    # gradient (9 rows of a tile, summed over the output positions) runs the direct kernel, in image blocks
    grads = _record(monkeypatch, "direct_weight_grad")
    x, w = _inputs((6, 1, 28, 28), (12, 1, 3, 3), seed=7)
    before = munet.get_num_threads()
    munet.set_num_threads(threads)
    try:
        tw = munet.tensor(w, requires_grad=True)
        (F.conv2d(munet.tensor(x), tw).relu() ** 2).sum().backward()
    finally:
        munet.set_num_threads(before)
    results = []
    for dtype in (np.float32, np.float64):
        rw = torch.from_numpy(w.astype(dtype)).requires_grad_()
        (torch.nn.functional.conv2d(torch.from_numpy(x.astype(dtype)), rw).relu() ** 2).sum().backward()
        results.append(rw.grad.numpy())
    assert_close_to_reference(tw.grad.numpy(), results[0], results[1], what="weight gradient")
    assert grads and grads[-1] is not None
    assert len(direct_conv._image_blocks(6, 12 * 9)) == direct_conv.IMAGE_BLOCKS


def _channel_vectors_or_skip():
    lib = direct_conv.library()
    if lib is None or not lib.munet_conv_channel_vectors():
        pytest.skip("packed weights serve the channel-vector (AVX-512) kernel only")
    return lib


@pytest.mark.parametrize("groups", [1, 2])
def test_a_packed_weight_gives_the_same_bits_and_follows_its_version(groups):
    lib = _channel_vectors_or_skip()
    x, w = _inputs((2, 16, 12, 12), (80, 16 // groups, 3, 3), seed=8)  # 40 channels per group: a partial block
    args = (x, w, (1, 1), ((1, 1), (1, 1)), (1, 1), groups, (12, 12))
    unpacked = direct_conv.direct_conv2d(*args)
    version = [0]
    pack = direct_conv.WeightPack(lambda: version[0])
    first = direct_conv.direct_conv2d(*args, pack=pack)
    assert pack._kept[1] is None  # one call at a version: packed per call, not kept
    np.testing.assert_array_equal(first, unpacked)
    np.testing.assert_array_equal(direct_conv.direct_conv2d(*args, pack=pack), unpacked)
    kept = pack.packed(lib, w, groups)
    assert kept is not None  # the same version twice: packed once and kept
    np.testing.assert_array_equal(direct_conv.direct_conv2d(*args, pack=pack), unpacked)
    w += 1  # changed in place, as the token says: the pack must not be served
    version[0] += 1
    changed = direct_conv.direct_conv2d(*args)
    assert not np.array_equal(changed, unpacked)
    for _ in range(3):  # per call at first, then a new pack
        np.testing.assert_array_equal(direct_conv.direct_conv2d(*args, pack=pack), changed)
    assert pack.packed(lib, w, groups) is not kept


def test_compiled_inference_repacks_a_weight_updated_in_place(monkeypatch):
    lib = _channel_vectors_or_skip()
    packs = []
    original = direct_conv.WeightPack.packed
    monkeypatch.setattr(
        direct_conv.WeightPack, "packed", lambda self, *a: packs.append(original(self, *a)) or packs[-1]
    )
    conv = munet.nn.Conv2d(16, 40, 3, padding=1).eval()
    compiled = munet.compile(conv)
    x = munet.tensor(_inputs((1, 16, 10, 10), (1,), seed=9)[0])

    def expected():
        tw, tb = (torch.from_numpy(p.detach().numpy().copy()) for p in (conv.weight, conv.bias))
        return torch.nn.functional.conv2d(torch.from_numpy(x.numpy()), tw, tb, padding=1).numpy()

    with munet.no_grad():
        for _ in range(3):
            np.testing.assert_allclose(compiled(x).numpy(), expected(), rtol=1e-5, atol=1e-5)
        assert packs[-1] is not None  # the weight did not change: its pack is kept and used
        conv.weight.add_(1)
        for _ in range(3):  # a stale pack would give the old weight's result
            np.testing.assert_allclose(compiled(x).numpy(), expected(), rtol=1e-5, atol=1e-5)
        assert packs[-1] is not None and packs[-1] is not packs[2]
    assert lib.munet_conv_channel_vectors()


def test_a_compiled_training_step_packs_per_call(monkeypatch):
    # the weight changes every step: no whole-weight pack is written each call
    _channel_vectors_or_skip()
    packs = []
    original = direct_conv.WeightPack.packed
    monkeypatch.setattr(
        direct_conv.WeightPack, "packed", lambda self, *a: packs.append(original(self, *a)) or packs[-1]
    )
    conv = munet.nn.Conv2d(16, 40, 3, padding=1)
    optimizer = munet.optim.SGD(conv.parameters(), lr=0.1)
    x = munet.tensor(_inputs((2, 16, 10, 10), (1,), seed=10)[0])

    @munet.compile
    def step(x):
        optimizer.zero_grad()
        loss = (conv(x) ** 2).mean()
        loss.backward()
        optimizer.step()
        return loss

    losses = [step(x).item() for _ in range(4)]
    assert packs and all(p is None for p in packs)
    assert losses[-1] < losses[0]
