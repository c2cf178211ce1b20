"""examples/pytorch_style/: pytorch/examples-style scripts run unmodified with ``import munet as torch``.

Each script runs a few steps in-process under MuNet; where PyTorch is installed, the same source
with ``import torch`` runs too (same seed), and both must learn.
"""

from __future__ import annotations

import math
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "examples" / "pytorch_style"
MUNET_IMPORT = "import munet as torch\n"


def load_script(name: str, backend: str) -> types.ModuleType:
    """examples/pytorch_style/<name>.py as a module, with ``torch`` bound to munet or to PyTorch."""
    source = (SCRIPTS / f"{name}.py").read_text()
    assert source.count(MUNET_IMPORT) == 1, f"{name}.py must import munet exactly as `{MUNET_IMPORT.strip()}`"
    if backend == "torch":
        pytest.importorskip("torch")
        source = source.replace(MUNET_IMPORT, "import torch\n")
    assert "munet" not in source.split('"""', 2)[2].replace(MUNET_IMPORT, ""), "only the import line may name munet"
    module = types.ModuleType(f"pytorch_style_{name}_{backend}")
    module.__file__ = str(SCRIPTS / f"{name}.py")
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - our own file
    assert module.torch.__name__ == backend
    return module


BACKENDS = ["munet", "torch"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_mnist_adadelta_steplr_learns(backend):
    result = load_script("mnist", backend).main(["--epochs", "2", "--train-size", "320", "--seed", "1"])
    losses = result["losses"]
    assert sum(losses[-3:]) / 3 < 0.5 * sum(losses[:3]) / 3
    assert result["accuracy"] > 0.8
    assert result["lr"] == pytest.approx(0.49)  # StepLR(step_size=1, gamma=0.7) after two epochs


@pytest.mark.parametrize("backend", BACKENDS)
def test_dcgan_trains_a_few_steps(backend):
    history = load_script("dcgan", backend).main(["--steps", "6", "--batch-size", "8", "--seed", "1"])
    assert len(history["loss_D"]) == len(history["loss_G"]) == 6
    assert all(math.isfinite(v) for v in history["loss_D"] + history["loss_G"])
    # D starts near chance (2 log 2) on both halves and the generator output has the image shape
    assert 1.0 < history["loss_D"][0] < 1.8
    assert history["samples_shape"] == (8, 3, 16, 16)


@pytest.mark.parametrize("backend", BACKENDS)
def test_actor_critic_learns_the_corridor(backend):
    lengths = load_script("actor_critic", backend).main(["--episodes", "40", "--seed", "543"])["lengths"]
    shortest = 5  # six cells, start at 0
    assert min(lengths) >= shortest
    assert sum(lengths[-10:]) / 10 < 1.5 * shortest < sum(lengths[:5]) / 5


@pytest.mark.parametrize("model", ["LSTM", "Transformer"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_word_language_model_learns(backend, model):
    argv = ["--model", model, "--epochs", "6", "--seed", "1111"]
    if model == "LSTM":  # plain SGD on this tiny corpus needs one long sequence and more updates
        argv += [
            "--epochs",
            "10",
            "--batch-size",
            "1",
            "--dropout",
            "0",
            "--clip",
            "0.5",
            "--nlayers",
            "1",
            "--lr",
            "10",
        ]
    losses = load_script("word_language_model", backend).main(argv)["losses"]
    assert losses[-1] < 0.8 * losses[0]
