"""``munet.compile`` on the fake cuda devices (``fake_cupy``): the cuda compile target
(``lower_cuda.CudaTarget``) launches fused kernels through NVRTC and the launcher, which the
fake's module loader runs under the CPU emulation, and matmuls through the fake cuBLAS; results
are compared with the same function run eagerly on the cpu. No GPU: ``test_cuda_gpu.py`` is the
real device's."""

import numpy as np
import pytest

import munet
from tests.backends import fake_cupy

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")


def _inputs(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [munet.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]


def test_a_fused_elementwise_chain_and_a_row_reduction():
    def f(x, y):
        z = munet.tanh(x * 2 + y) - x.sigmoid()
        return z, munet.softmax(z, dim=1)

    x, y = _inputs((6, 100), (100,))
    compiled = munet.compile(f)
    got = compiled(x.cuda(), y.cuda())
    for g, w in zip(got, f(x, y)):
        assert g.is_cuda
        np.testing.assert_allclose(g.cpu().numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    stats = compiled.stats()
    assert stats["generated_kernels"] >= 1 and stats["fallback"] is None, compiled.describe()
    fused = [name for name, _, _ in fake_cupy.LAUNCHES if not name.startswith("munet_")]
    assert len(fused) >= 2, fake_cupy.LAUNCHES  # the rendered fused kernels ran, not only eager ones


def test_a_training_step_updates_the_parameters_on_the_device():
    munet.manual_seed(0)
    model = munet.nn.Sequential(munet.nn.Linear(8, 16), munet.nn.ReLU(), munet.nn.Linear(16, 3))
    reference = munet.nn.Sequential(munet.nn.Linear(8, 16), munet.nn.ReLU(), munet.nn.Linear(16, 3))
    reference.load_state_dict(model.state_dict())
    model.cuda()
    opt = munet.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = munet.optim.SGD(reference.parameters(), lr=0.1)
    x, target = _inputs((5, 8), (5, 3), seed=1)

    def step(model, opt, x, target):
        opt.zero_grad()
        loss = munet.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        return loss

    compiled = munet.compile(lambda a, b: step(model, opt, a, b))
    for _ in range(2):
        got = compiled(x.cuda(), target.cuda())
        want = step(reference, ref_opt, x, target)
        np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert compiled.stats()["generated_kernels"] >= 1, compiled.describe()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert p.is_cuda
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
