"""The op parity suite (tests/ops) on the vulkan device: the same test functions, float32.

Every test function of tests/ops runs here with ``tests.reference.check`` pointed at
``vulkan:0`` (the PyTorch reference stays on the CPU): all its float32 parametrizations, or
those without a dtype, at most ``PER_TEST`` of them, spread evenly. Nothing is duplicated:
the cases are read from the functions' ``parametrize`` marks.

Tolerance: float32 rtol 1e-4 / atol 1e-5 at least (``tests.reference.DEVICE_TOL``); a test's
own looser tolerance stands. A case skips, with the reason, when the device lacks a kernel
or dtype (``docs/op_coverage.md``), when int64 results leave the int32 range (int64 is held
as int32), or when the test builds cpu tensors inside its function. The whole suite runs on
vulkan with ``pytest tests/ops --munet-device=vulkan``.
"""

from __future__ import annotations

import collections
import importlib
import inspect
import itertools
import pkgutil

import pytest

import tests.ops
from tests import reference

PER_TEST = 8
DTYPE_ARGS = ("dtype", "dt")


def _cases(fn) -> list[dict]:
    """The keyword arguments of each parametrization of ``fn`` (innermost mark varies fastest)."""
    axes = []
    for mark in reversed(getattr(fn, "pytestmark", [])):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = []
        for v in values:
            if hasattr(v, "values") and hasattr(v, "marks"):  # pytest.param(...)
                if v.marks:
                    continue
                v = v.values
            rows.append(dict(zip(names, v if len(names) > 1 else (v,))))
        axes.append(rows)
    return [dict(collections.ChainMap(*combo)) for combo in itertools.product(*axes)]


def _float32(case: dict) -> bool:
    return all(str(case[k]) in ("float32", "munet.float32", "torch.float32") for k in DTYPE_ARGS if k in case)


def _select(cases: list) -> list:
    if len(cases) <= PER_TEST:
        return cases
    step = len(cases) / PER_TEST
    return [cases[int(i * step)] for i in range(PER_TEST)]


def _label(value) -> str:
    """A stable id part (no memory addresses: xdist workers must collect the same ids)."""
    name = getattr(value, "__name__", None)
    return name if name is not None else repr(value).replace(" ", "")


def _collect():
    params = []
    for info in sorted(pkgutil.iter_modules(tests.ops.__path__), key=lambda m: m.name):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"tests.ops.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("test_") or fn.__module__ != module.__name__:
                continue
            cases = [c for c in _cases(fn) if _float32(c)]
            if set(inspect.signature(fn).parameters) - set(cases[0] if cases else {}):
                continue  # needs a fixture
            for k, case in enumerate(_select(cases)):
                label = "-".join(_label(v) for v in case.values())[:60]
                params.append(pytest.param(fn, case, id=f"{info.name[5:]}::{name}[{k}:{label}]"))
    return params


@pytest.mark.parametrize("fn,case", _collect())
def test_op_parity_on_vulkan(vulkan, fn, case):
    with reference.on_device(vulkan):
        fn(**case)
