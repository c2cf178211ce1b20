"""munet.save / munet.load of compiled programs: resume exactly, without the code, and reject bad files."""

import copy
import io
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import munet
from munet import _dtype as D
from munet import nn
from munet.compiler.saving import LoadedProgram
from munet.serialization import CheckpointError, read_file, write_file
from tests.compiler.models import train_step


def _mlp():
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 5))
    opt = munet.optim.AdamW(model.parameters(), lr=3e-2, weight_decay=0.05)
    return model, opt, munet.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)


def _cnn():
    munet.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 3)
    )
    return model, munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), None


def _data(n_in=12, classes=5, batch=16):
    munet.manual_seed(7)
    return munet.randn(batch, n_in), munet.randint(0, classes, (batch,))


def _trained(make, x, y, steps):
    model, opt, sched = make()
    compiled = munet.compile(train_step)
    for _ in range(steps):
        compiled(model, opt, x, y)
        if sched is not None:
            sched.step()
    return compiled, model, opt, sched


def _saved_mlp(tmp_path, steps=3):
    x, y = _data()
    compiled, model, opt, sched = _trained(_mlp, x, y, steps)
    path = tmp_path / "step.munet"
    munet.save(compiled, path)
    return path, (compiled, model, opt, sched), x, y


def _assert_equal_state(program: LoadedProgram, model, opt):
    state = program.state_dict()
    for name, t in model.state_dict().items():
        np.testing.assert_array_equal(state[name].numpy(), t.numpy(), err_msg=name)
    pnames = {id(p): n for n, p in model.named_parameters()}
    for p, st in opt.state.items():
        for key, t in st.items():
            if isinstance(t, munet.Tensor):
                name = f"optimizer.state.{pnames[id(p)]}.{key}"
                np.testing.assert_array_equal(state[name].numpy(), t.numpy(), err_msg=name)


def test_resume_in_process_equals_the_uninterrupted_run_exactly(tmp_path):
    """AdamW, dropout (the program's own generator continues the stream) and a stepped lr."""
    path, (compiled, model, opt, sched), x, y = _saved_mlp(tmp_path, steps=3)
    program = munet.load(path, device="cpu")
    assert isinstance(program, LoadedProgram) and program.signature == ["f32[16, 12]", "i64[16]"]
    _assert_equal_state(program, model, opt)
    lr = "optimizer.param_groups.0.lr"
    assert program.hyperparameters[lr] == opt.param_groups[0]["lr"]
    for _ in range(4):
        expected = compiled(model, opt, x, y)
        got = program(x, y)
        assert got.item() == expected.item()
        sched.step()
        program.hyperparameters[lr] = opt.param_groups[0]["lr"]
    _assert_equal_state(program, model, opt)
    assert program.stats()["calls"] == 4 and compiled.stats()["traces"] == 2
    weights = program.model_state_dict()
    assert list(weights) == ["0.weight", "0.bias", "3.weight", "3.bias"]
    fresh, _, _ = _mlp()
    fresh.load_state_dict(weights)  # a user reads the trained parameters back into a model
    np.testing.assert_array_equal(fresh[3].weight.detach().numpy(), model[3].weight.detach().numpy())


def test_a_version_1_file_still_loads(tmp_path):
    path, (compiled, model, opt, _), x, y = _saved_mlp(tmp_path)
    manifest, _ = read_file(path)
    assert manifest["program_version"] == 2
    assert [v["id"] for v in manifest["graph"]["values"] if v.get("host")]  # Adam's step counts, and from them
    _rewrite(path, as_version_1)
    program = munet.load(path)
    for _ in range(2):
        assert program(x, y).item() == compiled(model, opt, x, y).item()
    _assert_equal_state(program, model, opt)


def test_a_loaded_program_saves_again_and_resumes(tmp_path):
    path, (compiled, model, opt, _), x, y = _saved_mlp(tmp_path)
    program = munet.load(path)
    program(x, y)
    compiled(model, opt, x, y)
    again = tmp_path / "again.munet"
    munet.save(program, again)
    reloaded = munet.load(again)
    for _ in range(2):
        assert reloaded(x, y).item() == compiled(model, opt, x, y).item()
    _assert_equal_state(reloaded, model, opt)


_RESUME_SCRIPT = textwrap.dedent(
    """
    import sys
    import munet

    program = munet.load(sys.argv[1])
    data = munet.load(sys.argv[2])
    losses = [program(data["x"], data["y"]) for _ in range(int(sys.argv[4]))]
    munet.save({"losses": munet.stack(losses), **program.state_dict()}, sys.argv[3])
    """
)


def test_resume_in_a_subprocess_without_the_model_code(tmp_path):
    """The BatchNorm CNN (running stats are state) continues in a process that only imports munet."""
    munet.manual_seed(3)
    x, y = munet.randn(6, 1, 8, 8), munet.randint(0, 3, (6,))
    compiled, model, opt, _ = _trained(_cnn, x, y, steps=3)
    munet.save(compiled, tmp_path / "cnn.munet")
    munet.save({"x": x, "y": y}, tmp_path / "data.munet")
    script = tmp_path / "resume.py"
    script.write_text(_RESUME_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": root}  # this checkout's munet
    args = [str(tmp_path / n) for n in ("cnn.munet", "data.munet", "out.munet")]
    subprocess.run([sys.executable, str(script), *args, "4"], check=True, cwd=tmp_path, env=env, timeout=300)
    expected = [compiled(model, opt, x, y).item() for _ in range(4)]
    out = munet.load(tmp_path / "out.munet")
    assert out["losses"].tolist() == expected
    for name, t in model.state_dict().items():
        np.testing.assert_array_equal(out[name].numpy(), t.numpy(), err_msg=name)
    assert "running_mean" in " ".join(out) and "optimizer.state.5.weight.momentum_buffer" in out


def test_file_is_plain_safetensors_without_pickle(tmp_path):
    path, _, _, _ = _saved_mlp(tmp_path)
    raw = path.read_bytes()
    assert b"pickle" not in raw and raw[:1] != b"\x80"
    manifest, arrays = read_file(path)
    assert manifest["format"] == "munet-program"
    assert {"state.0.weight", "hyper.optimizer.param_groups.0.lr", "rng.0"} <= set(arrays)
    ops = {node["op"] for node in manifest["graph"]["nodes"]}
    assert {"matmul", "bernoulli", "constant"} <= ops
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    assert safetensors_numpy.load_file(str(path))["state.0.weight"].shape == (32, 12)


# validation ----------------------------------------------------------------------------------------


def _rewrite(path, edit):
    """Apply ``edit(manifest, arrays)`` and write the file again with valid hashes (a deliberate forgery)."""
    manifest, arrays = read_file(path)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    edit(manifest, arrays)
    manifest.pop("sha256")
    entries = [(k, D.from_numpy_dtype(a.dtype), a.shape, a.tobytes()) for k, a in arrays.items()]
    write_file(path, entries, manifest)


def _node(manifest, op):
    return next(n for n in manifest["graph"]["nodes"] if n["op"] == op)


def test_damaged_file_fails_its_hash_check(tmp_path):
    path, _, _, _ = _saved_mlp(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x10
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="SHA-256"):
        munet.load(path)


def _set_op(name):
    def edit(m, a):
        _node(m, "matmul")["op"] = name

    return edit


def _set_attr(op, key, value):
    def edit(m, a):
        _node(m, op)["attrs"][key] = value

    return edit


def _shrink_state(m, a):
    a["state.0.weight"] = a["state.0.weight"][:4]


def _newer_version(m, a):
    m["program_version"] = 99


def _dangling_input(m, a):
    _node(m, "relu")["args"] = [{"value": 10**6}]


def _extra_tensor(m, a):
    a["state.smuggled"] = np.zeros(3, np.float32)


def _host_mark(m, a):
    m["graph"]["values"][0]["host"] = "yes"


def as_version_1(m, a):
    """A file as program version 1 wrote it: no host marks."""
    m["program_version"] = 1
    for v in m["graph"]["values"]:
        v.pop("host", None)


@pytest.mark.parametrize(
    "edit, message",
    [
        (_set_op("os.system"), "unknown op 'os.system'"),
        (
            _set_op("relu"),
            r"node \d+ \(relu\): the op's rule gives float32\[16, 12\] for %\d+, the graph says f32\[16, 32\]",
        ),
        (_set_attr("permute", "dims", {"tuple": [0, 0]}), r"node \d+ \(permute\): invalid arguments or attributes"),
        (_set_attr("permute", "dims", {"tuple": [1, 0, 2]}), r"dims=\(1, 0, 2\) for an input of rank 2"),
        (_set_attr("permute", "dims", {"pickle": "gASV"}), "unknown tag 'pickle'"),
        (_set_attr("sum", "keepdim", {"float": "not-a-float"}), "malformed float"),
        (_set_attr("sum", "dims", {"tuple": [5]}), r"\(sum\): invalid arguments or attributes"),
        (_set_attr("cast", "dtype", {"dtype": "complex512"}), "unknown dtype 'complex512'"),
        (_set_attr("bernoulli", "generator", {"generator": 3}), "refers to generator 3"),
        (_shrink_state, r"state '0.weight' is float32\[4, 12\] in the file but the graph uses it as f32\[32, 12\]"),
        (_newer_version, "newer MuNet"),
        (_dangling_input, "does not define"),
        (_extra_tensor, "does not use"),
        (_set_op("to_device"), r"a to_device node takes one tensor value, no attributes"),
        (_host_mark, "malformed host mark 'yes'"),
    ],
)
def test_tampered_programs_raise_clear_errors(tmp_path, edit, message):
    path, _, _, _ = _saved_mlp(tmp_path)
    _rewrite(path, edit)
    with pytest.raises(CheckpointError, match=message):
        munet.load(path)


@pytest.mark.parametrize(
    "old, new",
    [
        (b'{\\"float\\":\\"0x1.4000000000000p+1\\"}', b'{\\"float\\":\\"0x1.4000000000000p+2\\"}'),  # 2.5 -> 5
        (b'\\"attrs\\":{\\"dim\\":1}', b'\\"attrs\\":{\\"dim\\":0}'),  # gather's dim
    ],
)
def test_an_edited_constant_or_attribute_is_refused(tmp_path, old, new):
    """Edits a forger would make by hand, keeping the file well formed: the header digest fails."""
    f = munet.compile(lambda x, i: (x * 2.5).gather(1, i))
    f(munet.randn(3, 4), munet.zeros(3, 2, dtype=munet.int64))
    path = tmp_path / "gather.munet"
    munet.save(f, path)
    raw = path.read_bytes()
    assert raw.count(old) == 1
    path.write_bytes(raw.replace(old, new))  # the same length: sizes and offsets still agree
    with pytest.raises(CheckpointError, match=f"{path}: header fails its SHA-256 digest check"):
        munet.load(path)


def _poison_role(m, a):
    m["roles"][2][1] = ["0.weight"]


def _poison_state_output(m, a):
    m["state_outputs"][0][1] = ["0.weight"]


def _poison_cleared(m, a):
    m["cleared"] = [["0.weight"]]


def _poison_compare(m, a):
    m["guards"][0]["compare"] = ["eq"]


def _poison_guard_input(m, a):
    m["guards"][0]["scalar"] = {"input": [63]}


def _poison_guard_op(m, a):
    """A guard on an expression of a hyperparameter whose op is a list, not a scalar op's name."""
    m["guards"][0]["scalar"] = {"op": ["sub"], "args": [m["guards"][0]["scalar"], 1]}


def _poison_cast_dtype(m, a):
    _node(m, "cast")["attrs"]["dtype"] = 10**30


def _poison_where_condition(m, a):
    """A number where the condition tensor goes: the op's rule refuses it."""
    wheres = [n for n in m["graph"]["nodes"] if n["op"] == "where"]
    wheres[-1]["args"][0] = -1


@pytest.mark.parametrize(
    "edit, message",
    [
        (_poison_role, r"state \['0.weight'\] is not declared"),
        (_poison_state_output, r"state output \['0.weight'\] is not declared"),
        (_poison_cleared, r"cleared state \['0.weight'\] is not declared"),
        (_poison_compare, "malformed guard"),
        (_poison_guard_input, r"guard reads %\[63\]"),
        (_poison_guard_op, r"unknown scalar op \['sub'\]"),
        (_poison_cast_dtype, r"\(cast\): the op's rule gives 1000000000000000000000000000000"),
        (_poison_where_condition, r"\(where\): invalid arguments .*condition to be a bool tensor, got int"),
    ],
)
def test_lists_and_numbers_in_place_of_names_raise_checkpoint_errors(tmp_path, edit, message):
    path, _, _, _ = _saved_mlp(tmp_path)
    _rewrite(path, edit)
    with pytest.raises(CheckpointError, match=f"{path}: .*{message}"):
        munet.load(path)


_POISON = (["x"], {"k": [1]}, 1.5, None, "s", -1, 10**30, True, [[[]]])


def _paths(x, prefix=()):
    """Every path into a JSON tree, as key sequences."""
    if prefix:
        yield prefix
    children = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in children:
        yield from _paths(v, prefix + (k,))


def test_seeded_fuzz_of_the_program_manifest(tmp_path):
    """Any field replaced by a wrong type loads or raises CheckpointError, never anything else."""
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Dropout(0.2), nn.Linear(3, 2))
    opt = munet.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    compiled = munet.compile(train_step)
    for _ in range(2):
        compiled(model, opt, munet.randn(2, 4), munet.randint(0, 2, (2,)))
    stream = io.BytesIO()
    munet.save(compiled, stream)
    stream.seek(0)
    manifest, arrays = read_file(stream)
    manifest.pop("sha256")
    entries = [(k, D.from_numpy_dtype(a.dtype), a.shape, np.array(a).tobytes()) for k, a in arrays.items()]
    paths = list(_paths(manifest))
    rng = random.Random(0)
    for _ in range(60):  # a program that loads compiles its kernels: keep the count small
        where, poison = rng.choice(paths), rng.choice(_POISON)
        forged = copy.deepcopy(manifest)
        parent = forged
        for key in where[:-1]:
            parent = parent[key]
        parent[where[-1]] = copy.deepcopy(poison)
        stream = io.BytesIO()
        write_file(stream, entries, forged)
        stream.seek(0)
        try:
            munet.load(stream)
        except CheckpointError:
            pass


def test_a_dtype_that_disagrees_with_the_ops_rule_is_rejected(tmp_path):
    path, _, _, _ = _saved_mlp(tmp_path)

    def edit(m, a):
        out = _node(m, "matmul")["outputs"][0]
        next(v for v in m["graph"]["values"] if v["id"] == out)["dtype"] = "float64"

    _rewrite(path, edit)
    with pytest.raises(CheckpointError, match=r"the op's rule gives float32\[16, 32\]"):
        munet.load(path)


# guards ------------------------------------------------------------------------------------------------


def test_loaded_program_rejects_another_signature_instead_of_retracing(tmp_path):
    path, _, x, y = _saved_mlp(tmp_path)
    program = munet.load(path)
    with pytest.raises(
        ValueError, match=r"argument 0 expected float32\[16, 12\].*got float32\[8, 12\].*cannot retrace"
    ):
        program(x[:8], y[:8])
    with pytest.raises(ValueError, match=r"argument 1 expected int64\[16\]"):
        program(x, y.to(munet.int32))
    with pytest.raises(TypeError, match=r"expected 2 tensor arguments \['f32\[16, 12\]', 'i64\[16\]'\], got 1"):
        program(x)
    before = program.state_dict()["0.weight"].numpy().copy()
    np.testing.assert_array_equal(program.state_dict()["0.weight"].numpy(), before)  # nothing ran


def test_hyperparameter_that_flips_a_traced_branch_raises(tmp_path):
    path, _, x, y = _saved_mlp(tmp_path)
    program = munet.load(path)
    program.hyperparameters["optimizer.param_groups.0.weight_decay"] = 0.0  # the trace took `weight_decay != 0`
    with pytest.raises(RuntimeError, match="cannot retrace"):
        program(x, y)
    program.hyperparameters["optimizer.param_groups.0.weight_decay"] = 0.01  # same branch: fine
    program(x, y)


def test_saving_before_the_steady_step_raises(tmp_path):
    x, y = _data()
    model, opt, _ = _mlp()
    compiled = munet.compile(train_step)
    with pytest.raises(RuntimeError, match="not been called"):
        munet.save(compiled, tmp_path / "a.munet")
    compiled(model, opt, x, y)
    with pytest.raises(RuntimeError, match="created optimizer state"):
        munet.save(compiled, tmp_path / "a.munet")
    assert not (tmp_path / "a.munet").exists()


def test_module_arguments_are_guarded_on_training():
    """A model passed as an argument: eval() retraces (dropout off), as for modules in closures."""
    x, y = _data()
    model, opt, _ = _mlp()
    forward = munet.compile(lambda m, x: m(x))
    train_out = forward(model, x)
    model.eval()
    eval_out = forward(model, x)
    np.testing.assert_array_equal(eval_out.detach().numpy(), model(x).detach().numpy())
    assert forward.stats()["traces"] == 2 and not np.array_equal(train_out.detach().numpy(), eval_out.detach().numpy())
