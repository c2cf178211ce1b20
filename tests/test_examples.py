"""The examples in examples/: each runs end to end with tiny settings, learns, and gives sane output.

Each example's ``main(argv)`` runs in-process with small sizes; one test runs a script as a
subprocess to check the command line. The models are also built from the same source with
real PyTorch imports and compared with MuNet's on the same weights, which checks the claim that
the examples are plain PyTorch code with ``import munet as torch``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import munet
from tests.reference import assert_close_to_reference, float64_copy

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def load_example(name: str) -> types.ModuleType:
    """Import examples/<name>.py as a module (examples/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_example_with_torch(name: str) -> types.ModuleType:
    """The same example with ``munet`` imports replaced by ``torch`` (the bundled dataset dropped)."""
    torch = pytest.importorskip("torch")
    source = (EXAMPLES / f"{name}.py").read_text()
    source = source.replace("from munet.datasets import load_digits\n", "load_digits = None\n")
    source = re.sub(r"^(import|from) munet\b", r"\1 torch", source, flags=re.MULTILINE)
    assert "munet" not in re.sub(r'""".*?"""', "", source, flags=re.DOTALL).replace('"munet_', ""), name
    module = types.ModuleType(f"example_{name}_torch")
    module.__file__ = str(EXAMPLES / f"{name}.py")
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - our own file
    assert module.torch is torch
    return module


def copy_torch_weights(torch_model, munet_model) -> None:
    """Load the PyTorch model's state dict into the MuNet model; the keys must be identical."""
    state = torch_model.state_dict()
    assert list(state) == list(munet_model.state_dict())
    munet_model.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in state.items()})


# ---------------------------------------------------------------- train_mlp.py


def test_train_mlp_learns_the_digits():
    result = load_example("train_mlp").main(["--epochs", "3", "--batch-size", "64", "--seed", "0"])
    assert len(result["losses"]) == len(result["val_accuracies"]) == 3
    assert result["losses"][-1] < 0.6 * result["losses"][0]
    assert result["val_accuracies"][-1] > 0.8
    assert result["test_accuracy"] > 0.8


def test_train_mlp_runs_as_a_script():
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    command = [sys.executable, str(EXAMPLES / "train_mlp.py"), "--epochs", "1", "--batch-size", "32", "--lr", "1e-2"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    match = re.search(r"test accuracy (\d\.\d+)", done.stdout)
    assert match, done.stdout
    assert float(match.group(1)) > 0.5


def test_train_mlp_model_matches_pytorch():
    torch = pytest.importorskip("torch")
    ours, theirs = load_example("train_mlp"), load_example_with_torch("train_mlp")
    torch.manual_seed(0)
    reference = theirs.make_model(32).eval()
    model = ours.make_model(32).eval()
    copy_torch_weights(reference, model)
    x = np.random.default_rng(0).random((5, 8, 8), dtype=np.float32)
    exact = float64_copy(reference)(torch.tensor(x).double())
    assert_close_to_reference(model(munet.tensor(x)), reference(torch.tensor(x)), exact)


# ---------------------------------------------------------------- char_gpt.py

TINY_GPT = ["--context", "16", "--width", "32", "--layers", "1", "--heads", "2", "--batch-size", "16"]


def test_char_gpt_trains_and_samples():
    args = [*TINY_GPT, "--steps", "40", "--lr", "1e-2", "--log-every", "20", "--eval-batches", "2"]
    result = load_example("char_gpt").main([*args, "--sample-length", "40", "--prompt", "We the"])
    steps = [step for step, _, _ in result["history"]]
    train_losses = [train for _, train, _ in result["history"]]
    assert steps == [0, 20, 40]
    assert train_losses[0] > 4.0  # about log(vocabulary) at initialization
    assert train_losses[-1] < train_losses[0] - 0.8
    sample = result["sample"]
    assert isinstance(sample, str)
    assert len(sample) == len("We the") + 40  # longer than the context: generation crops it
    assert sample.startswith("We the")
    assert set(sample) <= set(result["vocabulary"])


def test_char_gpt_vocabulary_and_weight_tying():
    gpt = load_example("char_gpt")
    text = (EXAMPLES / "data" / "public_domain.txt").read_text(encoding="utf-8")
    tokenizer = gpt.CharTokenizer(text)
    assert tokenizer.decode(tokenizer.encode(text[:500])) == text[:500]
    with pytest.raises(ValueError, match="do not occur"):
        tokenizer.encode("\u00e9")
    tied = gpt.GPT(tokenizer.vocab_size, context=8, width=16, layers=1, heads=2)
    untied = gpt.GPT(tokenizer.vocab_size, context=8, width=16, layers=1, heads=2, tie_weights=False)
    assert tied.head.weight is tied.tok_emb.weight
    assert untied.head.weight is not untied.tok_emb.weight
    n_tied = sum(p.numel() for p in tied.parameters())
    assert sum(p.numel() for p in untied.parameters()) == n_tied + tokenizer.vocab_size * 16
    with pytest.raises(ValueError, match="longer than the context"):
        tied(munet.zeros(1, 9, dtype=munet.long))


def test_char_gpt_model_matches_pytorch():
    torch = pytest.importorskip("torch")
    ours, theirs = load_example("char_gpt"), load_example_with_torch("char_gpt")
    torch.manual_seed(0)
    reference = theirs.GPT(vocab_size=20, context=12, width=16, layers=2, heads=4)
    model = ours.GPT(vocab_size=20, context=12, width=16, layers=2, heads=4)
    copy_torch_weights(reference, model)
    assert reference.head.weight is reference.tok_emb.weight and model.head.weight is model.tok_emb.weight
    exact = float64_copy(reference)
    idx = np.random.default_rng(1).integers(0, 20, size=(3, 12))
    logits_t, loss_t = reference(torch.tensor(idx[:, :-1]), torch.tensor(idx[:, 1:]))
    logits_r, loss_r = exact(torch.tensor(idx[:, :-1]), torch.tensor(idx[:, 1:]))
    logits_m, loss_m = model(munet.tensor(idx[:, :-1]), munet.tensor(idx[:, 1:]))
    assert_close_to_reference(logits_m, logits_t, logits_r, what="logits")
    assert_close_to_reference(loss_m, loss_t, loss_r, what="loss")
    for loss in (loss_t, loss_r, loss_m):
        loss.backward()
    params_t, params_r = dict(reference.named_parameters()), dict(exact.named_parameters())
    for name, p in model.named_parameters():
        assert_close_to_reference(p.grad, params_t[name].grad, params_r[name].grad, what=f"grad of {name}")


# ---------------------------------------------------------------- resnet_cnn.py


@pytest.mark.parametrize("scheduler", ["onecycle", "cosine"])
def test_resnet_cnn_trains_checkpoints_and_reloads(tmp_path, scheduler):
    checkpoint = tmp_path / "resnet.safetensors"
    args = ["--epochs", "2", "--width", "4", "--batch-size", "32", "--lr", "0.2", "--scheduler", scheduler]
    result = load_example("resnet_cnn").main([*args, "--checkpoint", str(checkpoint)])
    assert checkpoint.is_file()
    assert result["losses"][-1] < 0.5 * result["losses"][0]
    assert result["test_accuracy"] > 0.7
    assert result["restored_accuracy"] == result["test_accuracy"]


def test_resnet_cnn_model_matches_pytorch():
    torch = pytest.importorskip("torch")
    ours, theirs = load_example("resnet_cnn"), load_example_with_torch("resnet_cnn")
    torch.manual_seed(0)
    reference = theirs.ResNet(width=4, blocks_per_stage=(1, 2, 1))
    model = ours.ResNet(width=4, blocks_per_stage=(1, 2, 1))
    # Non-trivial BatchNorm scales (the example zero-initializes the last one of each block).
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if name.endswith("bn2.weight"):
                p.uniform_(0.5, 1.5)
    copy_torch_weights(reference, model)
    exact = float64_copy(reference)
    x = np.random.default_rng(2).random((6, 1, 8, 8), dtype=np.float32)
    target = np.arange(6) % 10
    loss_t = torch.nn.functional.cross_entropy(reference(torch.tensor(x)), torch.tensor(target))
    loss_r = torch.nn.functional.cross_entropy(exact(torch.tensor(x).double()), torch.tensor(target))
    loss_m = munet.nn.functional.cross_entropy(model(munet.tensor(x)), munet.tensor(target))
    assert_close_to_reference(loss_m, loss_t, loss_r, what="loss")
    for loss in (loss_t, loss_r, loss_m):
        loss.backward()
    params_t, params_r = dict(reference.named_parameters()), dict(exact.named_parameters())
    for name, p in model.named_parameters():
        assert_close_to_reference(p.grad, params_t[name].grad, params_r[name].grad, what=f"grad of {name}")
    buffers_t, buffers_r = dict(reference.named_buffers()), dict(exact.named_buffers())
    for name, b in model.named_buffers():
        assert_close_to_reference(b, buffers_t[name], buffers_r[name], what=name)
    for m in (reference, exact, model):
        m.eval()
    exact_out = exact(torch.tensor(x).double())
    assert_close_to_reference(model(munet.tensor(x)), reference(torch.tensor(x)), exact_out, what="eval output")
