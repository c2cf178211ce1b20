"""munet.save / munet.load of compiled programs on vulkan: the state is read back from the device
to save and uploaded once to load, the file is the same whatever device wrote it, and a loaded
program trains on like the unsaved compiled one.

Tolerances follow tests/compiler/test_compile_vulkan.py: a program saved and loaded on vulkan
runs the same kernels as the compiled one (equal bit for bit); across devices (a cpu file on
vulkan, a vulkan file on the cpu) losses and state agree to ``VULKAN_RTOL`` relative to each
tensor's largest magnitude.
"""

import re

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import _dtype as D
from munet import nn
from munet.compiler.saving import LoadedProgram
from munet.serialization import CheckpointError, read_file, write_file

VULKAN_RTOL = 2e-5
LR = "optimizer.param_groups.0.lr"


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _mlp(device):
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 5)).to(device)
    opt = munet.optim.AdamW(model.parameters(), lr=3e-2, weight_decay=0.05)
    return model, opt, munet.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)


def _mlp_dropout(device):
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 5)).to(device)
    return model, munet.optim.Adam(model.parameters(), lr=1e-2), None


def _cnn(device):
    munet.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, bias=False),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 3 * 3, 3),
    ).to(device)
    return model, munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), None


def _data(make, device):
    munet.manual_seed(7)
    if make in (_mlp, _mlp_dropout):
        x, y = munet.randn(16, 12), munet.randint(0, 5, (16,))
    else:
        x, y = munet.randn(6, 1, 8, 8), munet.randint(0, 3, (6,))
    return x.to(device), y.to(device)


def _trained(make, device, steps=3):
    model, opt, sched = make(device)
    x, y = _data(make, device)
    compiled = munet.compile(_step)
    for _ in range(steps):
        compiled(model, opt, x, y)
        if sched is not None:
            sched.step()
    return compiled, model, opt, sched, (x, y)


def _close(name, got, want, rtol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if rtol == 0:
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    bound = rtol * max(np.abs(want).max(initial=0.0), 1e-30)
    worst = np.abs(got - want).max(initial=0.0)
    assert worst <= bound, f"{name}: max |loaded - compiled| = {worst:.3g} > {bound:.3g}"


def _host(t):
    return t.detach().cpu().numpy()


def _assert_state(program: LoadedProgram, model, opt, rtol):
    state = program.state_dict()
    for name, t in model.state_dict().items():
        _close(name, _host(state[name]), _host(t), rtol)
    names = {id(p): n for n, p in model.named_parameters()}
    for p, entries in opt.state.items():
        for key, t in entries.items():
            name = f"optimizer.state.{names[id(p)]}.{key}"
            _close(name, _host(state[name]), _host(t), rtol)


def _resume(program, compiled, model, opt, sched, batch, rtol, steps=3):
    """``steps`` more steps of the loaded program next to the compiled one; losses and state agree."""
    x, y = batch
    for i in range(steps):
        want = compiled(model, opt, x, y).item()
        got = program(*(t.to(program.device) for t in batch)).item()
        assert got == pytest.approx(want, rel=rtol, abs=0), (i, got, want)
        if sched is not None:
            sched.step()
            program.hyperparameters[LR] = opt.param_groups[0]["lr"]
    _assert_state(program, model, opt, rtol)


@pytest.mark.parametrize(
    "make", [_mlp, _mlp_dropout, _cnn], ids=["mlp_adamw", "mlp_dropout_own_generator", "cnn_sgd_batchnorm"]
)
def test_a_vulkan_program_saves_and_resumes_on_vulkan_exactly(vulkan, tmp_path, make):
    compiled, model, opt, sched, batch = _trained(make, vulkan)
    path = tmp_path / "step.munet"
    munet.save(compiled, path)
    program = munet.load(path, device=vulkan)
    assert program.device == vulkan and program.stats()["backend"] == str(vulkan)
    _assert_state(program, model, opt, 0)
    state = program.state_dict()
    for name, _ in model.named_parameters():
        assert state[name].device == vulkan  # uploaded once, updated on the device
        if make is not _cnn:
            step = state[f"optimizer.state.{name}.step"]
            assert step.device == munet.device("cpu")  # a host value, as in the compiled program
    _resume(program, compiled, model, opt, sched, batch, 0)
    again = tmp_path / "again.munet"
    munet.save(program, again)  # read back from the device
    reloaded = munet.load(again, device=vulkan)
    _resume(reloaded, compiled, model, opt, sched, batch, 0, steps=2)


@pytest.mark.parametrize("make", [_mlp, _cnn], ids=["mlp_adamw", "cnn_sgd_batchnorm"])
def test_a_cpu_program_loads_on_vulkan_and_trains_like_the_compiled_vulkan_step(vulkan, tmp_path, make):
    compiled, model, opt, sched, _ = _trained(make, "cpu")
    munet.save(compiled, tmp_path / "cpu.munet")
    program = munet.load(tmp_path / "cpu.munet", device=vulkan)
    # the reference: the same training state moved to vulkan, stepped by a vulkan compiled step
    v_model, v_opt, v_sched = make(vulkan)
    v_model.load_state_dict(model.state_dict())
    v_opt.load_state_dict(opt.state_dict())
    if v_sched is not None:
        v_sched.load_state_dict(sched.state_dict())
    v_compiled = munet.compile(_step)
    batch = _data(make, vulkan)
    _assert_state(program, v_model, v_opt, 0)
    _resume(program, v_compiled, v_model, v_opt, v_sched, batch, VULKAN_RTOL, steps=4)
    if make is _mlp:  # Adam's step count is float64 arithmetic, which vulkan lacks: it stays on the host
        assert "to_device" in program.describe()


def test_a_vulkan_file_does_not_depend_on_the_device_and_loads_on_the_cpu(vulkan, tmp_path):
    compiled, model, opt, sched, batch = _trained(_mlp, vulkan)
    munet.save(compiled, tmp_path / "vulkan.munet")
    manifest, _ = read_file(tmp_path / "vulkan.munet")
    text = str({k: v for k, v in manifest.items() if k != "device"})  # "device": where it was saved, for information
    assert "vulkan" not in text
    transfers = [n for n in manifest["graph"]["nodes"] if n["op"] == "to_device"]
    assert transfers and all(n["attrs"] == {} for n in transfers)
    assert any(v.get("host") for v in manifest["graph"]["values"])
    program = munet.load(tmp_path / "vulkan.munet", device="cpu")
    assert program.device == munet.device("cpu") and "to_device" not in program.describe()
    _resume(program, compiled, model, opt, sched, batch, VULKAN_RTOL, steps=4)


def test_transfers_in_a_saved_program_run_on_either_device(vulkan, tmp_path):
    compiled = munet.compile(lambda x: ((x * 2.0).cpu() + 1.0, (x.cpu() * 3.0).to(vulkan)))
    x = munet.randn(4, 3).to(vulkan)
    compiled(x)
    munet.save(compiled, tmp_path / "f.munet")
    on_vulkan = munet.load(tmp_path / "f.munet", device=vulkan)
    host, back = on_vulkan(x)
    assert host.device == munet.device("cpu") and back.device == vulkan  # each output where it was
    np.testing.assert_array_equal(host.numpy(), x.cpu().numpy() * 2.0 + 1.0)
    np.testing.assert_array_equal(back.cpu().numpy(), x.cpu().numpy() * 3.0)
    on_cpu = munet.load(tmp_path / "f.munet", device="cpu")
    host, back = on_cpu(x.cpu())
    assert host.device == back.device == munet.device("cpu")
    np.testing.assert_array_equal(back.numpy(), x.cpu().numpy() * 3.0)


def test_a_cpu_program_that_moves_values_to_another_device_refuses_to_save(vulkan, tmp_path):
    compiled = munet.compile(lambda x: (x.to(vulkan) * 2.0).cpu())
    compiled(munet.ones(3))
    with pytest.raises(RuntimeError, match=re.escape(f"compiled program on 'cpu' holds values on ['{vulkan}']")):
        munet.save(compiled, tmp_path / "f.munet")
    assert not (tmp_path / "f.munet").exists()


def test_a_version_1_cpu_file_loads_on_vulkan(vulkan, tmp_path):
    """Version 1 files have no host marks: loading onto vulkan places the step counts as a cpu trace would."""
    compiled, model, opt, sched, _ = _trained(_mlp, "cpu")
    path = tmp_path / "v1.munet"
    munet.save(compiled, path)
    manifest, arrays = read_file(path)
    manifest["program_version"] = 1
    for v in manifest["graph"]["values"]:
        v.pop("host", None)
    manifest.pop("sha256")
    entries = [(k, D.from_numpy_dtype(a.dtype), a.shape, np.array(a).tobytes()) for k, a in arrays.items()]
    write_file(path, entries, manifest)
    program = munet.load(path, device=vulkan)
    assert "to_device" in program.describe()
    reference = munet.load(tmp_path / "v1.munet", device="cpu")
    x, y = _data(_mlp, "cpu")
    for _ in range(3):
        want = reference(x, y).item()
        assert program(x.to(vulkan), y.to(vulkan)).item() == pytest.approx(want, rel=VULKAN_RTOL, abs=0)


def _scaled_step_with_ema(model, opt, scaler, ema, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    ema.update_parameters(model)
    return loss


@pytest.mark.parametrize("saved_on", ["cpu", "vulkan"])
def test_a_grad_scaler_and_ema_step_loads_on_vulkan(vulkan, tmp_path, saved_on):
    """GradScaler's scale is float64 arithmetic (host values); EMA averages and n_averaged are state."""
    device = vulkan if saved_on == "vulkan" else "cpu"
    model, opt, _ = _mlp(device)
    scaler = munet.amp.GradScaler(growth_interval=2)
    ema = munet.optim.swa_utils.AveragedModel(model, multi_avg_fn=munet.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    x, y = _data(_mlp, device)
    compiled = munet.compile(_scaled_step_with_ema)
    for _ in range(3):
        compiled(model, opt, scaler, ema, x, y)
    munet.save(compiled, tmp_path / "step.munet")
    program = munet.load(tmp_path / "step.munet", device=vulkan)
    rtol = 0 if saved_on == "vulkan" else VULKAN_RTOL
    for i in range(3):
        want = compiled(model, opt, scaler, ema, x, y).item()
        got = program(x.to(vulkan), y.to(vulkan)).item()
        assert got == pytest.approx(want, rel=rtol, abs=0), (i, got, want)
    state = program.state_dict()
    assert state["module1.n_averaged"].item() == ema.n_averaged.item() == 6
    assert scaler.get_scale() in [t.item() for t in state.values() if t.dtype == munet.float64 and t.ndim == 0]
    _close("ema 0.weight", _host(state["module1.module.0.weight"]), _host(ema.module[0].weight), rtol)


def test_a_state_updated_on_another_device_than_it_lives_on_is_rejected(vulkan, tmp_path):
    compiled, *_ = _trained(_mlp, vulkan)
    path = tmp_path / "step.munet"
    munet.save(compiled, path)
    manifest, arrays = read_file(path)
    index = next(i for i, name in manifest["state_outputs"] if name.endswith(".step"))
    update = manifest["graph"]["outputs"][index]
    for v in manifest["graph"]["values"]:
        if v["id"] == update:
            del v["host"]  # a forged file: the step count lives on the host, its update on the device
    manifest.pop("sha256")
    entries = [(k, D.from_numpy_dtype(a.dtype), a.shape, np.array(a).tobytes()) for k, a in arrays.items()]
    write_file(path, entries, manifest)
    with pytest.raises(CheckpointError, match=r"state 'optimizer.state.0.weight.step' lives on cpu but the graph"):
        munet.load(path, device=vulkan)
