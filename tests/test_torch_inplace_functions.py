"""``munet.abs_(x)`` and the other function forms of in-place methods, against PyTorch: the same
function as the method, the same values (on non-contiguous views too), the input returned and its
version bumped, gradients through an in-place call on a non-leaf, and refusal on a leaf."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import randn

# name -> (extra positional arguments, domain of the random input)
UNARY = {
    "abs_": "any", "acos_": "unit", "acosh_": "above1", "asin_": "unit", "asinh_": "any", "atan_": "any",
    "atanh_": "unit", "arccos_": "unit", "arccosh_": "above1", "arcsin_": "unit", "arcsinh_": "any",
    "arctan_": "any", "arctanh_": "unit", "ceil_": "any", "cos_": "any", "cosh_": "any", "deg2rad_": "any",
    "erf_": "any", "erfc_": "any", "exp2_": "any", "exp_": "any", "expm1_": "any", "fix_": "any", "floor_": "any",
    "frac_": "any", "i0_": "any", "log10_": "positive", "log1p_": "positive", "log2_": "positive", "log_": "positive",
    "logit_": "prob", "nan_to_num_": "any", "neg_": "any", "negative_": "any", "rad2deg_": "any",
    "reciprocal_": "positive", "round_": "any", "rsqrt_": "positive", "sigmoid_": "any", "sin_": "any",
    "sinc_": "any", "sinh_": "any", "sqrt_": "positive", "square_": "any", "tan_": "unit", "tanh_": "any",
    "trunc_": "any", "zero_": "any",
}  # fmt: skip
WITH_ARGS = {
    "clamp_": ((-0.5, 0.5), {}),
    "clip_": ((-0.5, 0.5), {}),
    "clamp_max_": ((0.25,), {}),
    "clamp_min_": ((-0.25,), {}),
    "fill_": ((1.5,), {}),
}


def _input(domain: str, shape=(3, 4), seed=0) -> np.ndarray:
    x = randn(*shape, seed=seed)
    return {
        "any": x * 2,
        "unit": np.tanh(x) * 0.9,
        "above1": 1.1 + np.abs(x),
        "positive": 0.1 + np.abs(x),
        "prob": 1 / (1 + np.exp(-x)),
    }[domain].astype(np.float32)


def _both(array: np.ndarray, transpose: bool):
    m, t = munet.tensor(array), torch.tensor(array)
    return (m.t(), t.t()) if transpose else (m, t)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("name", sorted(UNARY) + sorted(WITH_ARGS))
def test_inplace_function_matches_torch(name, transpose):
    args, kwargs = WITH_ARGS.get(name, ((), {}))
    m, t = _both(_input(UNARY.get(name, "any")), transpose)
    assert getattr(munet, name) is getattr(munet.Tensor, name)
    version = m._version
    out = getattr(munet, name)(m, *args, **kwargs)
    getattr(torch, name)(t, *args, **kwargs)
    assert out is m
    assert m._version > version
    np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "name, args",
    [
        ("xlogy_", lambda lib, x: (lib.tensor(np.abs(x) + 0.5),)),
        ("ldexp_", lambda lib, x: (lib.tensor([[1.0], [2.0], [-1.0]]),)),
    ],
)
def test_binary_inplace_functions(name, args):
    x = _input("positive")
    m, t = munet.tensor(x), torch.tensor(x)
    assert getattr(munet, name)(m, *args(munet, x)) is m
    getattr(torch, name)(t, *args(torch, x))
    np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


def test_addmv_():
    a, mat, vec = randn(3), randn(3, 4, seed=1), randn(4, seed=2)
    m = munet.tensor(a)
    munet.addmv_(m, munet.tensor(mat), munet.tensor(vec), beta=0.5, alpha=2.0)
    expected = torch.addmv_(torch.tensor(a), torch.tensor(mat), torch.tensor(vec), beta=0.5, alpha=2.0)
    np.testing.assert_allclose(m.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sin_", "exp_", "sigmoid_", "square_", "clamp_"])
def test_gradient_through_inplace_function(name):
    x = _input("any")
    args = (-0.5, 0.5) if name == "clamp_" else ()
    grads = []
    for lib in (munet, torch):
        leaf = lib.tensor(x, requires_grad=True)
        y = leaf * 3
        getattr(lib, name)(y, *args)
        (y * lib.tensor(x)).sum().backward()
        grads.append(leaf.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_inplace_function_on_leaf_requiring_grad_raises():
    leaf = munet.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        munet.sin_(leaf)


def test_saved_tensor_check_sees_inplace_function():
    leaf = munet.tensor(_input("any"), requires_grad=True)
    y = leaf * 2
    z = y.sin()  # saves y
    munet.cos_(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_fill_is_out_of_place_with_torch_gradients():
    x = _input("any")
    outs, grads = [], []
    for lib in (munet, torch):
        leaf = lib.tensor(x, requires_grad=True)
        value = lib.tensor(2.5, requires_grad=True)
        out = lib.fill(leaf, value)
        (out * lib.tensor(x)).sum().backward()
        outs.append(out.detach().numpy())
        grads.append((leaf.grad.numpy(), value.grad.numpy()))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(grads[0][0], grads[1][0])
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-5)
    m = munet.ones(2, dtype=munet.int64)
    assert munet.fill(m, 3).dtype is munet.int64 and m.tolist() == [1, 1]
    with pytest.raises(RuntimeError, match="0-dimension"):
        munet.fill(m, munet.ones(2))


def test_detach_functions():
    leaf = munet.ones(2, requires_grad=True)
    y = leaf * 2
    d = munet.detach(y)
    assert not d.requires_grad and d.data_ptr() == y.data_ptr()
    assert munet.detach_(y) is y and y.grad_fn is None


def test_as_strided_():
    base = np.arange(12, dtype=np.float32)
    m, t = munet.tensor(base), torch.tensor(base)
    assert munet.as_strided_(m, (3, 2), (4, 1), 1) is m
    torch.as_strided_(t, (3, 2), (4, 1), 1)
    assert m.shape == t.shape and m.stride() == t.stride() and m.storage_offset() == t.storage_offset()
    np.testing.assert_array_equal(m.numpy(), t.numpy())
