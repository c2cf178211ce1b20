"""Shared pytest setup: deterministic seeds and the default device for every test, and the device of the op checks.

``pytest tests/ops --munet-device=vulkan`` (or ``MUNET_TEST_DEVICE=vulkan``) runs every
``tests.reference.check`` on that device against PyTorch on the CPU; see tests/reference.py.
"""

import os

import numpy as np
import pytest

import munet
from tests import reference


def pytest_addoption(parser):
    parser.addoption(
        "--munet-device",
        default=os.environ.get("MUNET_TEST_DEVICE", "cpu"),
        help="device on which tests.reference.check runs MuNet (default: cpu, or $MUNET_TEST_DEVICE)",
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


@pytest.fixture(autouse=True)
def munet_device(request):
    """The device of this test's ``check`` calls (a test may still pass ``device=`` itself)."""
    with reference.on_device(request.config.getoption("--munet-device")):
        yield reference.DEVICE
