"""Shared pytest setup: deterministic seeds for every test."""

import numpy as np
import pytest

import munet


@pytest.fixture(autouse=True)
def _seed():
    np.random.seed(0)
    if hasattr(munet, "manual_seed"):
        munet.manual_seed(0)
    yield
