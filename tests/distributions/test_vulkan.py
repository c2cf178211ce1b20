"""The distributions are public munet ops, so they run on the Vulkan device: values match the CPU."""

import types

import numpy as np
import pytest
import torch

import munet
import munet.distributions as D
from tests.distributions.cases import CASES, build

ON_DEVICE = [
    "Normal",
    "Gamma",
    "Beta",
    "Dirichlet",
    "Categorical",
    "Bernoulli",
    "Poisson",
    "Laplace",
    "StudentT",
    "Binomial",
]


def _on(device):
    """A stand-in for ``munet`` whose ``tensor`` makes tensors on ``device``."""
    return types.SimpleNamespace(
        tensor=lambda v, dtype, requires_grad=False: munet.tensor(v, dtype=dtype, device=device)
    )


@pytest.mark.parametrize("case", ON_DEVICE)
def test_log_prob_entropy_and_sampling_on_vulkan(case, vulkan):
    params = CASES[case][0](np.random.default_rng(0), (3,))
    cpu, _ = build(D, munet, case, params, munet.float32)
    dev, _ = build(D, _on(vulkan), case, params, munet.float32)
    value = cpu.sample((2,))
    np.testing.assert_allclose(
        dev.log_prob(value.to(vulkan)).cpu().numpy(), cpu.log_prob(value).numpy(), rtol=1e-5, atol=1e-5
    )
    if case != "Poisson":  # Poisson has no entropy, as in PyTorch
        np.testing.assert_allclose(dev.entropy().cpu().numpy(), cpu.entropy().numpy(), rtol=1e-5, atol=1e-5)
    draw = dev.sample((4,))
    assert draw.device == vulkan and tuple(draw.shape) == (4,) + tuple(value.shape[1:])


def test_gamma_rsample_gradient_on_vulkan(vulkan):
    alpha = munet.tensor([0.5, 2.0, 5.0], device=vulkan, requires_grad=True)
    x = D.Gamma(alpha, munet.ones(3, device=vulkan)).rsample((4,))
    (grad,) = munet.autograd.grad(x.sum(), [alpha])
    xs = torch.tensor(x.detach().cpu().numpy(), dtype=torch.float64)
    expected = torch._standard_gamma_grad(torch.tensor([0.5, 2.0, 5.0], dtype=torch.float64).expand(4, 3), xs).sum(0)
    assert grad.device == vulkan
    # torch's rational approximation is good to about 1e-3 relative (see test_sampling.py)
    np.testing.assert_allclose(grad.cpu().numpy(), expected.numpy(), rtol=2e-3)
