"""Fixtures of the backend tests: ``fake_gpus`` puts two fake cuda devices in place (``fake_cupy``)."""

import pytest

from tests.backends import fake_cupy


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two fake cuda devices for the test (CuPy's API over host memory; kernels emulated on the CPU)."""
    fake_cupy.install(monkeypatch)
    yield
    fake_cupy.uninstall()
