"""The op parity suite (tests/ops) on the vulkan device: the same test functions, float32 and float16.

Every test function of tests/ops runs here on ``vulkan:0``: its float32 parametrizations, or
those without a dtype, at most ``PER_TEST`` of them, spread evenly, and its float16 ones, at
most ``PER_TEST_F16``. Nothing is duplicated: the cases are read from the functions'
``parametrize`` marks. Each case runs with ``tests.reference.check`` pointed at the device
(the PyTorch reference stays on the CPU) and with vulkan as the default device
(``with munet.device(...)``), so the tensors a test body makes with ``munet.tensor``,
``zeros``, ``randn``, ... live there too. The test bodies were written for cpu, so for the case
``Tensor.numpy()`` reads a device tensor back to the host, ``munet.from_numpy`` copies to the
device, and ``gradcheck`` (float64 finite differences) runs on cpu.

Tolerance: float32 rtol 1e-4 / atol 1e-5 at least (``tests.reference.DEVICE_TOL``), float16 the
CPU suite's (rtol = atol = 1e-2); a test's own looser tolerance stands. A case skips, with the
reason, when the device lacks a kernel or dtype (``docs/op_coverage.md``; float64 above all),
when int64 results leave the int32 range (int64 is held as int32), or when the test checks
cpu behaviour by nature (``HOST_ONLY``: index bounds errors, cpu generators). The whole suite
runs its ``check`` calls on vulkan with ``pytest tests/ops --munet-device=vulkan``.
"""

from __future__ import annotations

import collections
import importlib
import inspect
import itertools
import pkgutil

import pytest

import munet
import tests.ops
from tests import reference

PER_TEST = 8
PER_TEST_F16 = 4
DTYPE_ARGS = ("dtype", "dt")

# Test functions that check cpu behaviour by nature, skipped with the reason.
_UNCHECKED_INDICES = (
    "checks the error for an out-of-range index, which vulkan kernels do not raise: indices are not "
    "bounds-checked on the device (that needs a host read per op; munet/backends/vulkan/kernels_indexing.py)"
)
_CPU_GENERATOR = (
    "draws from munet.Generator(), a cpu generator as in PyTorch, which a vulkan sample refuses; "
    "vulkan streams are tested in tests/backends/test_vulkan_random.py"
)
HOST_ONLY = {
    "test_gather_errors": _UNCHECKED_INDICES,
    "test_index_add_copy_fill": _UNCHECKED_INDICES,
    "test_index_errors": _UNCHECKED_INDICES,
    "test_index_put_errors": _UNCHECKED_INDICES,
    "test_index_select": _UNCHECKED_INDICES,
    "test_scatter_errors": _UNCHECKED_INDICES,
    "test_take_and_take_along_dim": _UNCHECKED_INDICES,
    "test_multinomial_errors": (
        "checks the errors for invalid probability rows, which need host data: the vulkan kernel does "
        "not check them (munet/backends/vulkan/kernels_random.py)"
    ),
    "test_every_sampler_takes_a_generator": _CPU_GENERATOR,
    "test_generators_are_independent": _CPU_GENERATOR,
    "test_get_set_state": _CPU_GENERATOR,
    "test_stream_is_philox_keyed_by_seed": _CPU_GENERATOR,
}


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
    stale = set(HOST_ONLY) - names
    assert not stale, f"HOST_ONLY names test functions that tests/ops no longer has: {sorted(stale)}"
    return params


def _read_on_host(numpy):
    """``Tensor.numpy`` that copies a device tensor to the host first (the tests were written for cpu)."""

    def host_numpy(self, *, force: bool = False):
        return numpy(self.cpu() if self.device.type != "cpu" else self, force=force)

    return host_numpy


def _to_device(from_numpy, device):
    """``munet.from_numpy`` that copies to ``device`` (test bodies build constant operands with it)."""

    def from_numpy_to_device(array):
        return from_numpy(array).to(device)

    return from_numpy_to_device


def _on_cpu(gradcheck):
    """``gradcheck`` on cpu: finite differences need float64, which vulkan does not hold."""

    def gradcheck_on_cpu(*args, **kwargs):
        with munet.device("cpu"):
            try:
                return gradcheck(*args, **kwargs)
            except munet.DeviceError as exc:
                if reference._MIXED not in str(exc):
                    raise
                pytest.skip(f"gradcheck (float64, so on cpu) of a function holding vulkan tensors: {exc}")

    return gradcheck_on_cpu


def _lacks_dtype_or_kernel(exc: BaseException | None) -> bool:
    return isinstance(exc, munet.DeviceError) and reference._MIXED not in str(exc)


@pytest.mark.parametrize("fn,case", _collect())
def test_op_parity_on_vulkan(vulkan, fn, case, monkeypatch):
    reason = HOST_ONLY.get(fn.__name__)
    if reason is not None:
        pytest.skip(f"on {vulkan}: {reason}")
    monkeypatch.setattr(munet.Tensor, "numpy", _read_on_host(munet.Tensor.numpy))
    monkeypatch.setattr(munet, "from_numpy", _to_device(munet.from_numpy, vulkan))
    if "gradcheck" in fn.__globals__:
        monkeypatch.setitem(fn.__globals__, "gradcheck", _on_cpu(fn.__globals__["gradcheck"]))
    with reference.on_device(vulkan), munet.device(vulkan):
        try:
            fn(**case)
        except munet.DeviceError as exc:  # a dtype or kernel the device lacks, met outside check()
            if not _lacks_dtype_or_kernel(exc):
                raise
            pytest.skip(f"on {vulkan}: {exc}")
        except AssertionError as exc:  # pytest.raises(match=...) met that DeviceError instead
            if not _lacks_dtype_or_kernel(exc.__context__):
                raise
            pytest.skip(f"on {vulkan}: {exc.__context__}")
