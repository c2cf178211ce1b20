"""nn.attention.sdpa_kernel accepts PyTorch's backend selections; the one implementation serves all."""

import pytest
import torch

import munet
import munet.nn.functional as F
from munet.nn.attention import SDPBackend, sdpa_kernel
from munet.nn.attention.backends import current_backends
from tests.reference import assert_close, randn


def test_backend_values_are_pytorchs():
    for backend in torch.nn.attention.SDPBackend.__members__.values():
        assert SDPBackend[backend.name] == int(backend.value)


@pytest.mark.parametrize("backends", [SDPBackend.MATH, [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]])
def test_every_selection_runs_the_one_implementation(backends):
    q, k, v = (randn(2, 3, 4, 8, seed=i) for i in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(x) for x in (q, k, v)))
    with sdpa_kernel(backends):
        assert current_backends() == tuple(backends if isinstance(backends, list) else [backends])
        out = F.scaled_dot_product_attention(*(munet.tensor(x) for x in (q, k, v)))
    assert len(current_backends()) == 5
    assert_close(out, expected, rtol=1e-5, atol=1e-6)


def test_bad_selection_raises():
    with pytest.raises(TypeError, match="expected SDPBackend values"):
        with sdpa_kernel(["flash"]):
            pass
