"""Running a tests/ops test function with a device other than cpu as the default device.

The test bodies of tests/ops were written for cpu. :func:`run_on_device` runs one on another
device: ``tests.reference.check`` pointed at it and the device made the default
(``with munet.device(...)``), so the tensors the body makes are device tensors; for the call
``Tensor.numpy()`` reads a device tensor back to the host, ``munet.from_numpy`` copies to the
device, and ``gradcheck`` (float64 finite differences) runs on cpu. A ``DeviceError`` saying the
device lacks a dtype or kernel skips the test with that message (also when a
``pytest.raises(match=...)`` met it instead of the error it expected); a mixed-device error
fails it. ``HOST_ONLY`` names the functions that test cpu behaviour by nature. ``INDEX_ERRORS``
names those that check the error of a device-side check (an out-of-range index, a loss's or
one_hot's ``check`` op): a device raises it at the next synchronization
(munet/backends/vulkan/device_asserts.py), so they run in launch-blocking mode, where the op
itself raises, as on cpu.

Used by tests/backends/test_vulkan_parity.py and by ``pytest tests/ops --munet-device=vulkan`` (or
``=cuda``, which scripts/gpu_check.sh runs on a GPU).
"""

from __future__ import annotations

import pytest

import munet
from tests import reference

_CPU_GENERATOR = (
    "draws from munet.Generator(), a cpu generator as in PyTorch, which a sample on another device refuses; "
    "vulkan streams are tested in tests/backends/test_vulkan_random.py"
)
INDEX_ERRORS = {
    "test_a_failed_check_in_a_compiled_step_names_the_user_line_and_writes_no_state",
    "test_bernoulli",  # p outside [0, 1]: a device check on cuda
    "test_binary_cross_entropy_errors",
    "test_class_loss_errors",
    "test_embedding_errors",
    "test_multi_margin_loss",
    "test_normal_overloads",  # a negative std tensor: a device check on cuda
    "test_one_hot_empty_and_errors",
    "test_gather_errors",
    "test_index_add_copy_fill",
    "test_index_errors",
    "test_index_put_errors",
    "test_index_select",
    "test_scatter_errors",
    "test_searchsorted_sorter_out_of_range",
    "test_take_and_take_along_dim",
}
_CPU_VIEW_DTYPE = "view(dtype) reinterprets cpu storage only (vulkan holds 64-bit types as 32-bit words)"
HOST_ONLY = {
    "test_matches_torch": _CPU_VIEW_DTYPE,
    "test_gcd_of_large_fibonacci_pair_and_errors": "int64 values beyond int32, which vulkan holds as int32",
    "test_cauchy_quantiles_and_generator": "passes a cpu generator",
    "test_a_zero_dim_tensor_keeps_its_size": _CPU_VIEW_DTYPE,
    "test_shares_storage_and_version_with_its_base": _CPU_VIEW_DTYPE,
    "test_a_modified_saved_tensor_is_detected_through_the_reinterpreted_view": _CPU_VIEW_DTYPE,
    "test_has_no_history_as_in_torch": _CPU_VIEW_DTYPE,
    "test_compiled_functions_take_it_as_an_argument_and_refuse_it_as_state": _CPU_VIEW_DTYPE,
    "test_multinomial_errors": (
        "checks the errors for invalid probability rows, which need host data: the vulkan kernel does "
        "not check them (munet/backends/vulkan/kernels_random.py)"
    ),
    "test_sdpa_weights_are_the_softmax_kernels_bit_for_bit": (
        "holds the written-out softmax to the cpu softmax kernel bit for bit; the vulkan kernel sums in "
        "another order (they differ by an ulp)"
    ),
    "test_every_sampler_takes_a_generator": _CPU_GENERATOR,
    "test_generators_are_independent": _CPU_GENERATOR,
    "test_get_set_state": _CPU_GENERATOR,
    "test_stream_is_philox_keyed_by_seed": _CPU_GENERATOR,
}


def run_on_device(fn, kwargs: dict, device, monkeypatch) -> None:
    """Call ``fn(**kwargs)`` on ``device`` as described above (``monkeypatch`` undoes the patches)."""
    reason = HOST_ONLY.get(fn.__name__)
    if reason is not None:
        pytest.skip(f"on {device}: {reason}")
    backend = munet._device.get_backend(munet.device(device))
    asserts = getattr(backend.runtime, "asserts", None)  # vulkan's device-side checks; cuda has none
    if fn.__name__ in INDEX_ERRORS and asserts is not None:
        monkeypatch.setattr(asserts, "blocking", True)
    monkeypatch.setattr(munet.Tensor, "numpy", _read_on_host(munet.Tensor.numpy))
    monkeypatch.setattr(munet, "from_numpy", _to_device(munet.from_numpy, device))
    if "gradcheck" in fn.__globals__:
        monkeypatch.setitem(fn.__globals__, "gradcheck", _on_cpu(fn.__globals__["gradcheck"]))
    with reference.on_device(device), munet.device(device):
        try:
            fn(**kwargs)
            backend.synchronize()  # a device-side fault left pending fails this test, not the next
        except munet.DeviceError as exc:  # a dtype or kernel the device lacks, met outside check()
            if not _lacks_dtype_or_kernel(exc):
                raise
            pytest.skip(f"on {device}: {exc}")
        except (AssertionError, pytest.fail.Exception) as exc:  # pytest.raises/warns met that DeviceError instead
            if not _lacks_dtype_or_kernel(exc.__context__):
                raise
            pytest.skip(f"on {device}: {exc.__context__}")


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
                pytest.skip(f"gradcheck (float64, so on cpu) of a function holding device tensors: {exc}")

    return gradcheck_on_cpu


def _lacks_dtype_or_kernel(exc: BaseException | None) -> bool:
    return isinstance(exc, munet.DeviceError) and reference._MIXED not in str(exc)
