"""A 2-layer MLP trained with manual SGD on vulkan matches the same loop on cpu."""

import numpy as np

import munet


def train(device, steps=20):
    rng = np.random.default_rng(0)
    x = munet.tensor(rng.standard_normal((64, 10)).astype(np.float32), device=device)
    y = munet.tensor(rng.standard_normal((64, 1)).astype(np.float32), device=device)
    params = [
        munet.tensor(rng.standard_normal((10, 32)).astype(np.float32) * 0.3, device=device),
        munet.zeros(32, device=device),
        munet.tensor(rng.standard_normal((32, 1)).astype(np.float32) * 0.3, device=device),
        munet.zeros(1, device=device),
    ]
    for p in params:
        p.requires_grad_()
    losses = []
    for _ in range(steps):
        w1, b1, w2, b2 = params
        pred = (x @ w1 + b1).relu() @ w2 + b2
        diff = pred - y
        loss = (diff * diff).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with munet.no_grad():
            for p in params:
                p.sub_(p.grad * 0.05)
        losses.append(loss.item())
    return losses, [p.detach().cpu().numpy() for p in params]


def test_mlp_training_matches_cpu(vulkan):
    cpu_losses, cpu_params = train("cpu")
    gpu_losses, gpu_params = train(vulkan)
    assert cpu_losses[-1] < cpu_losses[0] * 0.7
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4)
    for g, c in zip(gpu_params, cpu_params):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-5)
