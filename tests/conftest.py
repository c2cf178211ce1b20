"""Shared pytest setup: deterministic seeds and the default device for every test, the device of the
op checks, and the ``vulkan`` fixture.

``pytest tests/ops --munet-device=vulkan`` (or ``MUNET_TEST_DEVICE=vulkan``) runs every tests/ops
function on that device, with ``tests.reference.check`` comparing against PyTorch on the CPU and
the device as the default device; see tests/device_run.py and tests/reference.py.

Tests marked ``cuda`` (``@pytest.mark.cuda``) need a CUDA GPU: they skip without one, and fail
instead under ``MUNET_TEST_CUDA=1`` (scripts/gpu_check.sh).

The ``vulkan`` fixture is the Vulkan device under test: ``vulkan:0``, or
``$MUNET_TEST_VULKAN_DEVICE`` (scripts/gpu_check.sh picks the GPU adapter that way when a CPU
driver such as lavapipe is listed too). Without one it skips, and under ``MUNET_TEST_VULKAN=1``
it fails instead.
"""

import inspect
import os

import numpy as np
import pytest

import munet
from tests import reference
from tests.device_run import run_on_device

CUDA_REQUIRED = os.environ.get("MUNET_TEST_CUDA") == "1"
VULKAN_REQUIRED = os.environ.get("MUNET_TEST_VULKAN") == "1"
VULKAN_DEVICE = os.environ.get("MUNET_TEST_VULKAN_DEVICE", "vulkan:0")


@pytest.fixture
def vulkan():
    from munet.backends.vulkan import adapters

    device = munet.device(VULKAN_DEVICE)
    if (device.index or 0) >= len(adapters.list_devices("vulkan")):
        reason = adapters.explain_unavailable("vulkan", device.index or 0)
        if VULKAN_REQUIRED:
            pytest.fail(f"MUNET_TEST_VULKAN=1 but no Vulkan device {device}: {reason}")
        pytest.skip(f"no Vulkan device {device}: {reason}")
    return device


def pytest_runtest_setup(item):
    """A test marked ``cuda`` needs a CUDA GPU: it skips without one (and fails under
    ``MUNET_TEST_CUDA=1``, which scripts/gpu_check.sh sets)."""
    if item.get_closest_marker("cuda") is None or munet.cuda.is_available():
        return
    from munet.backends.cuda import discovery

    reason = discovery.explain_unavailable(0)
    if CUDA_REQUIRED:
        pytest.fail(f"MUNET_TEST_CUDA=1 but no CUDA device: {reason}")
    pytest.skip(f"needs a CUDA GPU: {reason}")


def pytest_addoption(parser):
    parser.addoption(
        "--munet-device",
        default=os.environ.get("MUNET_TEST_DEVICE", "cpu"),
        help="device on which tests/ops run MuNet (default: cpu, or $MUNET_TEST_DEVICE)",
    )


@pytest.fixture(autouse=True)
def _seed():
    np.random.seed(0)
    if hasattr(munet, "manual_seed"):
        munet.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _restore_default_device():
    """A test that sets the default device (munet.set_default_device) does not leak it into the next."""
    saved = munet._device.default_device_if_set()
    yield
    munet.set_default_device(saved)


def pytest_pyfunc_call(pyfuncitem):
    """With ``--munet-device`` other than cpu, a tests/ops function runs with that device as the default."""
    device = pyfuncitem.config.getoption("--munet-device")
    if device == "cpu" or not pyfuncitem.nodeid.startswith("tests/ops/"):
        return None
    fn = pyfuncitem.obj
    kwargs = {name: pyfuncitem.funcargs[name] for name in inspect.signature(fn).parameters}
    with pytest.MonkeyPatch.context() as monkeypatch:
        run_on_device(fn, kwargs, device, monkeypatch)
    return True


@pytest.fixture(autouse=True)
def munet_device(request):
    """The device of this test's ``check`` calls (a test may still pass ``device=`` itself)."""
    with reference.on_device(request.config.getoption("--munet-device")):
        yield reference.DEVICE


@pytest.fixture
def lost_vulkan(vulkan, monkeypatch):
    """The vulkan device under test on a runtime of its own, which the test may lose and reset
    (the process's shared one is untouched), and ``inject(k, ...)``: make the k-th queue submission
    from now report device loss (``MUNET_TEST_INJECT_DEVICE_LOST``)."""
    from munet.backends.vulkan import runtime
    from munet.backends.vulkan.backend import VulkanBackend

    instances = munet._device._BACKENDS[vulkan.type].instances
    shared = instances.get(vulkan.index or 0)
    backend = VulkanBackend(vulkan.type, vulkan.index or 0)
    monkeypatch.setitem(instances, vulkan.index or 0, backend)

    def inject(*ahead: int) -> None:
        now = runtime.submission_count()
        monkeypatch.setenv(runtime.INJECT_DEVICE_LOST, ",".join(str(now + k) for k in ahead))

    yield vulkan, inject
    monkeypatch.delenv(runtime.INJECT_DEVICE_LOST, raising=False)
    backend.runtime.close("the test ended")
    if shared is not None:  # munet.metrics reports the allocated bytes of the shared runtime again
        munet.metrics.watch_allocated_bytes(shared.runtime.label, shared.runtime.allocator)
