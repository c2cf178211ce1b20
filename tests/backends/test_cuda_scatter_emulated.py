"""The put kernel (``kernels_indexing.py``: ``scatter``, ``scatter_reduce``, ``index_put`` and what is
built on them) on the fake cuda devices, run by the CPU emulation through the whole eager path, equal
to the cpu backend: every reduce mode, duplicate and negative indices (a plain write keeps the last
value, as on the cpu), 16-bit floats accumulating in float32, wrapping integers, in-place writes into
views; out-of-range indices raise the cpu's error at the next synchronization; and the gradients this
enables (cross_entropy, nll_loss, embedding), eagerly and in a compiled training step replayed as a
CUDA graph. NVRTC compiles every put kernel for sm_80 and sm_90."""

import numpy as np
import pytest

import munet
from munet.backends.cuda import nvrtc
from munet.backends.cuda.kernels_indexing import ATOMIC_TYPES, PUT_MODES, render_put
from munet.ops.checks import IndexOutOfRangeError
from tests.backends import fake_cupy
from tests.backends.cuda_cases import EAGER_INDEXING, compiled_sgd_twins, same_within

fake_cupy.skip_without_emulation()
F = munet.nn.functional


def put_sources() -> list:
    """Every mode x element type at rank 2 with one index tensor, and a few other ranks and counts."""
    kinds = [("set", width) for width in (1, 2, 4, 8)]
    kinds += [(mode, dtype) for mode in PUT_MODES if mode != "set" for dtype in ATOMIC_TYPES]
    sources = [render_put(mode, dtype, 2, 1) for mode, dtype in kinds]
    return sources + [render_put(m, d, r, k) for m, d in (("set", 2), ("add", "float32"), ("amax", "int64"))
                      for r, k in ((1, 1), (3, 2), (4, 3))]  # fmt: skip


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_the_put_kernels_compile(arch):
    assert nvrtc.compile_source(nvrtc.combine(put_sources()), arch, name=f"put_{arch}.cu").data


def test_a_mode_without_a_kernel_is_refused():
    with pytest.raises(ValueError, match="render_put: mode must be one of set, add, mul, amax, amin, got 'or'"):
        render_put("or", "int32", 1, 1)


def _cuda(t):
    return t.to("cuda:0")


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("case", EAGER_INDEXING)
def test_scatter_and_index_put_equal_the_cpu(case):
    fn, rtol = EAGER_INDEXING[case]
    same_within(fn(_cuda), fn(lambda t: t), rtol)


@pytest.mark.usefixtures("fake_gpus")
def test_an_in_place_write_keeps_the_tensor_and_reads_an_aliased_source_first():
    x = munet.arange(12.0).reshape(3, 4)
    xc = _cuda(x)
    before = xc.data_ptr()
    index = munet.tensor([[2, 0, 1, 0]])
    xc.scatter_(0, _cuda(index), xc[1:2])  # the source is a row of the tensor written
    x.scatter_(0, index, x[1:2].clone())
    assert xc.data_ptr() == before
    same_within(xc, x, 0)
    xc.t()[_cuda(munet.tensor([3, 1]))] += 1.0  # read, then an index_put_ into a transposed view
    x.t()[munet.tensor([3, 1])] += 1.0
    same_within(xc, x, 0)


def _cpu_error(fn, *tensors) -> str:
    with pytest.raises(IndexError) as error:
        fn(*tensors)
    return str(error.value)


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize(
    "write",
    [
        lambda x, i, s: munet.scatter(x, 0, i, s),
        lambda x, i, s: x.scatter_add(0, i, s),
        lambda x, i, s: x.scatter_reduce(0, i, s, "amax", include_self=False),
        lambda x, i, s: munet.index_put(x, (i[1],), s[0, 0], accumulate=True),
        lambda x, i, s: munet.index_put(x, (i[1],), s[0, 0]),
    ],
    ids=["scatter", "scatter_add", "scatter_reduce", "index_put accumulate", "index_put"],
)
@pytest.mark.parametrize("bad", [4, -5])
def test_an_out_of_range_index_raises_the_cpus_error_at_the_next_synchronization(write, bad):
    x, s = munet.zeros(4, 3), munet.ones(2, 3)
    index = munet.tensor([[0, 1, 2], [3, bad, 1]])
    message = _cpu_error(write, x, index, s)
    out = write(_cuda(x), _cuda(index), _cuda(s))  # recorded on the device, raised at the read
    with pytest.raises(IndexOutOfRangeError) as error:
        out.cpu()
    assert str(error.value).startswith(message + " (raised by cuda:0 at the first synchronization")
    fine = index.clamp(0, 3)
    same_within(write(_cuda(x), _cuda(fine), _cuda(s)), write(x, fine, s), 0)  # the device goes on


@pytest.mark.usefixtures("fake_gpus")
def test_negative_indices_wrap_where_the_op_allows_them():
    x, i = munet.zeros(5), munet.tensor([-1, -5, 4])
    same_within(munet.index_put(_cuda(x), (_cuda(i),), _cuda(munet.ones(3)), accumulate=True),
                munet.index_put(x, (i,), munet.ones(3), accumulate=True), 0)  # fmt: skip
    _cuda(x).scatter(0, _cuda(i), 1.0)  # scatter takes none: -1 is out of range
    with pytest.raises(IndexOutOfRangeError, match="scatter: index -1 is out of bounds for dimension 0 with size 5"):
        munet.cuda.synchronize()


# the gradients that need scatter and index_put ----------------------------------------------------------


def _logits(*shape, seed=0):
    return munet.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _grads(fn, *tensors, device):
    leaves = [t.detach().to(device).requires_grad_() if t.is_floating_point() else t.to(device) for t in tensors]
    fn(*leaves).backward()
    return [t.grad for t in leaves if t.is_floating_point() and t.grad is not None]


LOSSES = {
    "cross_entropy": lambda x, t, w: F.cross_entropy(x, t),
    "cross_entropy, weights and smoothing": lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
    "nll_loss, summed": lambda x, t, w: F.nll_loss(x.log_softmax(1), t, reduction="sum"),
    "nll_loss, weighted": lambda x, t, w: F.nll_loss(x.log_softmax(1), t, weight=w),
}


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("loss", LOSSES)
def test_loss_gradients_equal_the_cpu(loss):
    x, t, w = _logits(6, 4), munet.tensor([0, 3, -100, 1, 2, 3]), munet.tensor([1.0, 2.0, 0.5, 1.5])
    for got, want in zip(_grads(LOSSES[loss], x, t, w, device="cuda:0"), _grads(LOSSES[loss], x, t, w, device="cpu")):
        same_within(got, want, 1e-6)


@pytest.mark.usefixtures("fake_gpus")
def test_image_cross_entropy_and_embedding_gradients_equal_the_cpu():
    image, target = _logits(2, 3, 4, 4), munet.tensor(np.random.default_rng(2).integers(0, 3, (2, 4, 4)))
    (got,), (want,) = (_grads(F.cross_entropy, image, target, device=d) for d in ("cuda:0", "cpu"))
    same_within(got, want, 1e-6)
    weight, ids = _logits(7, 3, seed=1), munet.tensor([[1, 6, 1], [0, 1, 6]])
    for kwargs in ({}, {"padding_idx": 6}, {"scale_grad_by_freq": True}):

        def lookup(w, i):
            return (F.embedding(i, w, **kwargs) * munet.arange(3.0, device=w.device)).sum()

        (got,), (want,) = (_grads(lookup, weight, ids, device=d) for d in ("cuda:0", "cpu"))
        same_within(got, want, 1e-6)


@pytest.mark.usefixtures("fake_gpus")
def test_a_compiled_embedding_classifier_trains_as_on_the_cpu_and_replays_as_a_graph():
    munet.manual_seed(0)

    class Net(munet.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.head = munet.nn.Embedding(10, 4), munet.nn.Linear(4, 3)

        def forward(self, ids):
            return self.head(self.embed(ids).mean(1))

    compiled, eager, model, reference = compiled_sgd_twins(Net, F.cross_entropy, 0.5)
    rng = np.random.default_rng(5)
    for _ in range(4):  # run, capture, replays
        ids, labels = munet.tensor(rng.integers(0, 10, (5, 3))), munet.tensor(rng.integers(0, 3, 5))
        same_within(compiled(_cuda(ids), _cuda(labels)), eager(ids, labels), 1e-5)
    assert compiled.stats()["cuda_graphs"] is True, compiled.stats()["cuda_graph"]
    for p, q in zip(model.parameters(), reference.parameters()):
        same_within(p.detach(), q.detach(), 1e-5)
