"""The ``vulkan`` fixture: the device under test, or a skip (a failure under MUNET_TEST_VULKAN=1)."""

import os

import pytest

import munet

REQUIRED = os.environ.get("MUNET_TEST_VULKAN") == "1"


@pytest.fixture
def vulkan():
    from munet.backends.vulkan import adapters

    if not adapters.list_devices("vulkan"):
        reason = adapters.explain_unavailable("vulkan", 0)
        if REQUIRED:
            pytest.fail(f"MUNET_TEST_VULKAN=1 but no Vulkan device: {reason}")
        pytest.skip(f"no Vulkan device: {reason}")
    return munet.device("vulkan:0")
