"""AveragedModel (SWA/EMA) and SWALR against PyTorch."""

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
import munet.optim as optim
from munet.optim import swa_utils


class Tiny(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(munet.tensor(w))
        self.register_buffer("count", munet.tensor(0))

    def forward(self, x):
        return x * self.w


def _sequence(steps=5):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(3).astype(np.float32) for _ in range(steps)]


@pytest.mark.parametrize("kind", ["swa", "ema", "ema_single"])
def test_averaged_model_matches_pytorch(kind):
    values = _sequence()
    model = Tiny(values[0])
    t_model = torch.nn.Linear(3, 1, bias=False)
    if kind == "swa":
        ours, theirs = swa_utils.AveragedModel(model), torch.optim.swa_utils.AveragedModel(t_model)
    elif kind == "ema":
        ours = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9))
        theirs = torch.optim.swa_utils.AveragedModel(
            t_model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9)
        )
    else:
        ours = swa_utils.AveragedModel(model, avg_fn=swa_utils.get_ema_avg_fn(0.8))
        theirs = torch.optim.swa_utils.AveragedModel(t_model, avg_fn=torch.optim.swa_utils.get_ema_avg_fn(0.8))
    for v in values:
        with munet.no_grad():
            model.w.copy_(munet.tensor(v))
            model.count.add_(1)
        with torch.no_grad():
            t_model.weight.copy_(torch.tensor(v)[None])
        ours.update_parameters(model)
        theirs.update_parameters(t_model)
    np.testing.assert_allclose(ours.module.w.detach().numpy(), theirs.module.weight.detach().numpy()[0], rtol=1e-6)
    assert ours.n_averaged.item() == theirs.n_averaged.item() == 5
    assert ours.module.count.item() == 5  # buffers follow the model when use_buffers=False
    assert [k for k in ours.state_dict()] == ["n_averaged", "module.w", "module.count"]


def test_swalr_matches_pytorch():
    for strategy, epochs in (("cos", 3), ("linear", 4), ("cos", 0)):
        mp, tp = munet.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
        m_opt, t_opt = optim.SGD([mp], lr=0.5), torch.optim.SGD([tp], lr=0.5)
        m = swa_utils.SWALR(m_opt, swa_lr=0.05, anneal_epochs=epochs, anneal_strategy=strategy)
        t = torch.optim.swa_utils.SWALR(t_opt, swa_lr=0.05, anneal_epochs=epochs, anneal_strategy=strategy)
        for _ in range(7):
            m_opt.step()
            t_opt.step()
            m.step()
            t.step()
            assert m.get_last_lr() == pytest.approx(t.get_last_lr(), rel=1e-12)
