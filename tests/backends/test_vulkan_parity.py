"""The op parity suite (tests/ops) on the vulkan device: the same test functions, float32 and float16.

Every test function of tests/ops runs here on ``vulkan:0``: its float32 parametrizations, or
those without a dtype, at most ``PER_TEST`` of them, spread evenly, and its float16 ones, at
most ``PER_TEST_F16``. Nothing is duplicated: the cases are read from the functions'
``parametrize`` marks. Each case runs the whole test body on vulkan with vulkan as the default
device, through ``tests.device_run.run_on_device`` (which says how, and which functions it skips
as cpu-only by nature).

Tolerance: float32 rtol 1e-4 / atol 1e-5 at least (``tests.reference.DEVICE_TOL``), float16 the
CPU suite's (rtol = atol = 1e-2); a test's own looser tolerance stands. A case skips, with the
reason, when the device lacks a kernel or dtype (``docs/op_coverage.md``; float64 above all),
when int64 results leave the int32 range (int64 is held as int32), or when the test checks
cpu behaviour by nature (``HOST_ONLY``: cpu generators, host-side checks). Tests of index bounds
errors run in launch-blocking mode (``INDEX_ERRORS``), so the op raises as on cpu. The whole suite
runs the same way with ``pytest tests/ops --munet-device=vulkan``.
"""

from __future__ import annotations

import collections
import importlib
import inspect
import itertools
import pkgutil

import pytest

import tests.ops
from tests.device_run import HOST_ONLY, INDEX_ERRORS, run_on_device

PER_TEST = 8
PER_TEST_F16 = 4
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


def _of_dtype(case: dict, name: str) -> bool:
    """Whether ``case``'s dtype arguments are all ``name`` (a case without one counts as float32)."""
    return all(str(case[k]) in (name, f"munet.{name}", f"torch.{name}") for k in DTYPE_ARGS if k in case)


def _has_dtype(case: dict) -> bool:
    return any(k in case for k in DTYPE_ARGS)


def _select(cases: list, limit: int) -> list:
    if len(cases) <= limit:
        return cases
    step = len(cases) / limit
    return [cases[int(i * step)] for i in range(limit)]


def _label(value) -> str:
    """A stable id part (no memory addresses: xdist workers must collect the same ids)."""
    name = getattr(value, "__name__", None)
    return name if name is not None else repr(value).replace(" ", "")


def _collect():
    params, names = [], set()
    for info in sorted(pkgutil.iter_modules(tests.ops.__path__), key=lambda m: m.name):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"tests.ops.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("test_") or fn.__module__ != module.__name__:
                continue
            names.add(name)
            every = _cases(fn)
            cases = _select([c for c in every if _of_dtype(c, "float32")], PER_TEST)
            cases += _select([c for c in every if _has_dtype(c) and _of_dtype(c, "float16")], PER_TEST_F16)
            if set(inspect.signature(fn).parameters) - set(cases[0] if cases else {}):
                continue  # needs a fixture
            for k, case in enumerate(cases):
                label = "-".join(_label(v) for v in case.values())[:60]
                params.append(pytest.param(fn, case, id=f"{info.name[5:]}::{name}[{k}:{label}]"))
    stale = (set(HOST_ONLY) | INDEX_ERRORS) - names
    assert not stale, f"HOST_ONLY/INDEX_ERRORS name test functions that tests/ops no longer has: {sorted(stale)}"
    return params


@pytest.mark.parametrize("fn,case", _collect())
def test_op_parity_on_vulkan(vulkan, fn, case, monkeypatch):
    run_on_device(fn, case, vulkan, monkeypatch)
