"""Logging: ``munet.*`` loggers, only a NullHandler installed by the library, no print() diagnostics."""

import ast
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import munet
import munet.nn as nn
from munet.utils.data import DataLoader, TensorDataset

ROOT = Path(__file__).resolve().parents[1]
# Modules whose output is their purpose: the `munet` command, the demo, the coverage table.
# command-line programs, which print to their user (munet-run is distributed/run.py)
PRINTING_MODULES = {"cli.py", "demo.py", "_coverage.py", "_pytorch_coverage.py", "distributed/run.py"}


def test_import_installs_only_a_null_handler():
    code = (
        "import logging, munet\n"
        "handlers = {name: [type(h).__name__ for h in logger.handlers]\n"
        "            for name, logger in logging.Logger.manager.loggerDict.items()\n"
        "            if isinstance(logger, logging.Logger) and logger.handlers and name.split('.')[0] == 'munet'}\n"
        "print(handlers, [type(h).__name__ for h in logging.getLogger().handlers], logging.getLogger().level)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "{'munet': ['NullHandler']} [] 30"  # root untouched: no handler, WARNING


def test_retraces_are_logged_at_info_first_traces_at_debug(caplog):
    def doubled(x):
        return x * 2.0

    f = munet.compile(doubled)
    with caplog.at_level(logging.DEBUG, logger="munet.compiler.compiled"):
        f(munet.ones(2))
        f(munet.ones(3))
    records = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "munet.compiler.compiled"]
    retrace = "tracing doubled (retrace: argument 0 changed: float32[2] on cpu -> float32[3] on cpu)"
    assert records == [("DEBUG", "tracing doubled (first_call)"), ("INFO", retrace)]


def test_checkpoint_save_and_load_are_logged(caplog, tmp_path):
    path = tmp_path / "linear.munet"
    with caplog.at_level(logging.INFO, logger="munet.serialization"):
        munet.save(nn.Linear(3, 2).state_dict(), path)
        munet.load(path)
    messages = [r.getMessage() for r in caplog.records if r.name == "munet.serialization"]
    assert messages[0] == f"saved {path}: 2 tensors, 32 bytes of tensor data"
    assert messages[1].startswith(f"loaded {path}: 2 tensors, ")


def test_dataloader_workers_starting_and_exiting_are_logged(caplog):
    loader = DataLoader(TensorDataset(munet.arange(4.0)), batch_size=2, num_workers=1)
    with caplog.at_level(logging.DEBUG, logger="munet.utils.data.dataloader"):
        assert len(list(loader)) == 2
    messages = [r.getMessage() for r in caplog.records if r.name == "munet.utils.data.dataloader"]
    assert len(messages) == 2
    assert messages[0].startswith("DataLoader: started worker 0 (pid ")
    assert messages[1].endswith("exited (exit code 0)")


def test_vulkan_device_open_and_loss_are_logged(vulkan, caplog):
    from munet.backends.vulkan.runtime import Runtime

    adapter = munet._device.get_backend(vulkan).runtime.adapter
    with caplog.at_level(logging.INFO, logger="munet.backends.vulkan.runtime"):
        runtime = Runtime(adapter, "vulkan:test")
        with pytest.raises(munet.DeviceLostError):
            runtime.check_lost(RuntimeError("Parent device is lost"))  # what wgpu-native reports
        with pytest.raises(munet.DeviceLostError):
            runtime.check_lost(RuntimeError("Parent device is lost"))  # logged once, when it is lost
    records = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "munet.backends.vulkan.runtime"]
    assert [level for level, _ in records] == ["INFO", "ERROR"]
    assert records[0][1].startswith("opened vulkan:test: ")
    assert records[1][1] == "vulkan:test: the device was lost (Parent device is lost)"


def test_eager_ops_log_nothing_even_at_debug(caplog):
    x = munet.randn(4, 4, requires_grad=True)
    with caplog.at_level(logging.DEBUG, logger="munet"):
        ((x @ x).relu().sum() * 2.0).backward()
        x.grad.numpy()
    assert [r.name for r in caplog.records if r.name.startswith("munet")] == []


def test_library_code_does_not_print():
    offenders = []
    for path in sorted((ROOT / "munet").rglob("*.py")):
        source = path.read_text()
        if "print(" not in source or path.relative_to(ROOT / "munet").as_posix() in PRINTING_MODULES:
            continue
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"print() in library code (log to a munet.* logger instead): {offenders}"
