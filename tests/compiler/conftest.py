"""Fixtures shared by the compiler tests."""

import pytest


@pytest.fixture
def record_calls(monkeypatch):
    """``record_calls(module, name)``: wraps ``module.name`` for the test and returns the list that
    receives the positional arguments of every call (what a test counts: compilations, kernels built)."""

    def install(module, name: str) -> list:
        calls = []
        original = getattr(module, name)

        def recording(*args, **kwargs):
            calls.append(args)
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, recording)
        return calls

    return install


@pytest.fixture
def fresh_kernel_cache(tmp_path, monkeypatch):
    """An empty ``MUNET_CACHE_DIR`` for the test, so what it compiles is counted from zero."""
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
