"""Factory functions (munet/ops/creation.py): size= keyword, PyTorch-only options, no swallowed arguments."""

import pytest
import torch

import munet

FACTORIES = ["zeros", "ones", "empty", "rand", "randn"]


@pytest.mark.parametrize("name", FACTORIES)
def test_size_keyword_gives_the_shape_torch_gives(name):
    got = getattr(munet, name)(size=(2, 1))
    assert tuple(got.shape) == tuple(getattr(torch, name)(size=(2, 1)).shape) == (2, 1)


def test_full_and_randint_take_size_keyword():
    assert munet.full(size=(2, 3), fill_value=4.0).tolist() == torch.full(size=(2, 3), fill_value=4.0).tolist()
    assert tuple(munet.randint(0, 5, size=(2, 1)).shape) == (2, 1)


@pytest.mark.parametrize("name", FACTORIES)
def test_size_given_twice_raises_like_python(name):
    with pytest.raises(TypeError, match="multiple values for argument 'size'"):
        getattr(munet, name)(2, size=(2,))


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "arange", "eye", "zeros_like", "full_like"])
def test_unknown_keyword_raises_type_error(name):
    args = {"arange": (3,), "eye": (2,), "zeros_like": (munet.zeros(2),), "full_like": (munet.zeros(2), 1.0)}
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        getattr(munet, name)(*args.get(name, (2,)), bogus=1)


def test_pytorch_only_options_accepted_at_defaults_refused_otherwise():
    assert munet.zeros(2, layout=None, pin_memory=False).tolist() == [0.0, 0.0]
    assert munet.empty_like(munet.zeros(2), memory_format=None).shape == (2,)
    with pytest.raises(NotImplementedError, match="zeros: pin_memory=True"):
        munet.zeros(2, pin_memory=True)
    assert munet.zeros(2, layout=munet.strided).shape == (2,)
    assert munet.empty_like(munet.zeros(2), memory_format=munet.contiguous_format).shape == (2,)
    with pytest.raises(NotImplementedError, match="ones_like: MuNet's factories make row-major tensors"):
        munet.ones_like(munet.zeros(2, 3, 4, 5), memory_format=munet.channels_last)
    with pytest.raises(TypeError, match="ones_like: memory_format must be a munet.memory_format"):
        munet.ones_like(munet.zeros(2), memory_format="channels_last")


def test_out_argument_is_filled():
    out = munet.empty(3)
    assert munet.zeros(3, out=out) is out
    assert out.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(("row", "col", "offset"), [(3, 4, 0), (4, 3, 1), (5, 5, -2), (3, 3, -5), (3, 3, 7), (0, 3, 0)])
@pytest.mark.parametrize("name", ["triu_indices", "tril_indices"])
def test_triangle_indices(name, row, col, offset):
    actual = getattr(munet, name)(row, col, offset)
    expected = getattr(torch, name)(row, col, offset)
    assert actual.dtype is munet.int64 and actual.tolist() == expected.tolist()
    assert getattr(munet, name)(row, col, offset, dtype=munet.int32).dtype is munet.int32
    with pytest.raises(RuntimeError, match="not implemented"):
        getattr(munet, name)(row, col, dtype=munet.float32)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize(
    ("start", "end", "steps"),
    [(0, 1, 7), (-3, 3, 1), (2.5, 2.5, 3), (6.6, 1.4, 4), (-3.3, 2.1, 7), (0.1, 1e4, 1001), (0, 10, 7), (1, 5, 0)],
)
def test_linspace_matches_torch(start, end, steps, dtype):
    """PyTorch's half-from-each-end formula, computed in the dtype (float) or in float64 after
    truncating ``start`` and ``end`` (integers). PyTorch's vectorized loop adds the step to a
    running base, which can round an entry one ulp away from the scalar formula: 2 ulp slack."""
    import numpy as np

    import munet

    got = munet.linspace(start, end, steps, dtype=getattr(munet, dtype)).numpy()
    want = torch.linspace(start, end, steps, dtype=getattr(torch, dtype)).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype == "int64":
        np.testing.assert_array_equal(got, want)
    else:
        eps = np.finfo(got.dtype).eps
        np.testing.assert_allclose(got, want, rtol=2 * eps, atol=2 * eps * max(abs(start), abs(end)))
