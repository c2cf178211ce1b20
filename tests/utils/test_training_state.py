"""An interrupted and resumed run ends bit-identical to an uninterrupted one."""

import numpy as np
import pytest

import munet
import munet.nn as nn
import munet.nn.functional as F
import munet.optim as optim
from munet.utils.data import DataLoader, TensorDataset
from munet.utils.training_state import load_training_state, save_training_state


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(munet.randn(6, 16) * 0.3)
        self.w2 = nn.Parameter(munet.randn(16, 3) * 0.3)

    def forward(self, x):
        return F.dropout(F.relu(x @ self.w1), p=0.2, training=self.training) @ self.w2


def _data():
    rng = np.random.default_rng(0)
    x = munet.tensor(rng.standard_normal((40, 6)).astype(np.float32))
    y = munet.tensor(rng.integers(0, 3, 40))
    return TensorDataset(x, y)


def _setup():
    munet.manual_seed(1)
    model = MLP()
    opt = optim.AdamW(model.parameters(), lr=0.01)
    sched = optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    gen = munet.Generator().manual_seed(2)
    loader = DataLoader(_data(), batch_size=8, shuffle=True, generator=gen)
    return model, opt, sched, gen, loader


def _epochs(model, opt, sched, loader, n):
    for _ in range(n):
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        sched.step()


def test_resume_is_bit_identical(tmp_path):
    model, opt, sched, _, loader = _setup()
    _epochs(model, opt, sched, loader, 4)
    expected = {k: v.numpy().copy() for k, v in model.state_dict().items()}

    model, opt, sched, gen, loader = _setup()
    _epochs(model, opt, sched, loader, 2)
    path = tmp_path / "run.safetensors"
    save_training_state(
        path, model=model, optimizer=opt, scheduler=sched, step=2, generators={"data": gen}, extra={"note": "half"}
    )
    munet.manual_seed(999)  # the resumed process starts from unrelated state

    model2, opt2, sched2, gen2, loader2 = _setup()
    munet.manual_seed(12345)
    info = load_training_state(path, model=model2, optimizer=opt2, scheduler=sched2, generators={"data": gen2})
    assert info == {"step": 2, "extra": {"note": "half"}}
    _epochs(model2, opt2, sched2, loader2, 2)
    for k, v in model2.state_dict().items():
        assert v.numpy().tobytes() == expected[k].tobytes(), k


def test_bad_state_changes_nothing(tmp_path):
    model, opt, sched, gen, loader = _setup()
    _epochs(model, opt, sched, loader, 1)
    path = tmp_path / "run.safetensors"
    save_training_state(path, model=model, optimizer=opt, step=1)
    other_model, other_opt, other_sched, _, _ = _setup()
    other_model.w2 = nn.Parameter(munet.zeros(16, 4))
    before = other_model.w1.detach().clone()
    with pytest.raises(RuntimeError, match="size mismatch for w2"):
        load_training_state(path, model=other_model, optimizer=other_opt)
    assert munet.equal(other_model.w1.detach(), before)
    with pytest.raises(ValueError, match="no scheduler state"):
        load_training_state(path, model=model, optimizer=opt, scheduler=other_sched)
