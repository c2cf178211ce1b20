"""The ``vulkan`` fixture: the device under test, or a skip (a failure under MUNET_TEST_VULKAN=1).

The device is ``vulkan:0``, or ``$MUNET_TEST_VULKAN_DEVICE`` (scripts/gpu_check.sh picks the
GPU adapter that way when a CPU driver such as lavapipe is listed too).
"""

import os

import pytest

import munet

REQUIRED = os.environ.get("MUNET_TEST_VULKAN") == "1"
DEVICE = os.environ.get("MUNET_TEST_VULKAN_DEVICE", "vulkan:0")


@pytest.fixture
def vulkan():
    from munet.backends.vulkan import adapters

    device = munet.device(DEVICE)
    if (device.index or 0) >= len(adapters.list_devices("vulkan")):
        reason = adapters.explain_unavailable("vulkan", device.index or 0)
        if REQUIRED:
            pytest.fail(f"MUNET_TEST_VULKAN=1 but no Vulkan device {device}: {reason}")
        pytest.skip(f"no Vulkan device {device}: {reason}")
    return device
