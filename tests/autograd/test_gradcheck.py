"""gradcheck / gradgradcheck (verdicts on correct and wrong gradients, PyTorch's on the same
functions), the legacy Variable API and set_multithreading_enabled."""

import numpy as np
import pytest
import torch

import munet
from munet.autograd import GradcheckError, Variable, gradcheck, gradgradcheck


def _inputs(lib, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(lib.tensor(rng.normal(size=s), requires_grad=True) for s in shapes)


FUNCTIONS = {
    "elementwise": (lambda lib: lambda a: (a * a).sin(), [(3, 2)]),
    "broadcast": (lambda lib: lambda a, b: (a.unsqueeze(-1) * b).exp().sum(0), [(3,), (3, 2)]),
    "matmul": (lambda lib: lambda a, b: a @ b.tanh(), [(2, 3), (3, 4)]),
    "two_outputs": (lambda lib: lambda a: (a.cumsum(0), a.softmax(-1)), [(3, 3)]),
    "noncontiguous": (lambda lib: lambda a: a.t().contiguous().log_softmax(0), [(2, 4)]),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_gradcheck_and_gradgradcheck_pass_where_torch_passes(name):
    make, shapes = FUNCTIONS[name]
    assert torch.autograd.gradcheck(make(torch), _inputs(torch, *shapes))
    assert gradcheck(make(munet), _inputs(munet, *shapes))
    assert torch.autograd.gradgradcheck(make(torch), _inputs(torch, *shapes))
    assert gradgradcheck(make(munet), _inputs(munet, *shapes))


class _WrongGrad(munet.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x  # should be 2 * x


def test_gradcheck_catches_a_wrong_gradient():
    (x,) = _inputs(munet, (4,))
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradcheck(_WrongGrad.apply, (x,))
    assert gradcheck(_WrongGrad.apply, (x,), raise_exception=False) is False
    assert issubclass(GradcheckError, RuntimeError)


class _WrongSecondDerivative(munet.autograd.Function):
    """Correct first derivative (cos), whose own gradient is wrong (it is treated as constant)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.detach().cos()


def test_gradgradcheck_catches_a_wrong_second_derivative():
    (x,) = _inputs(munet, (3,))
    assert gradcheck(_WrongSecondDerivative.apply, (x,))
    assert gradgradcheck(_WrongSecondDerivative.apply, (x,), raise_exception=False) is False


def test_gradcheck_options():
    (x,) = _inputs(munet, (2,))
    with pytest.warns(UserWarning, match="not a double precision"):
        gradcheck(lambda a: a * 2, (x.detach().float().requires_grad_(),), atol=1e-2, rtol=1e-2)
    with pytest.raises(ValueError, match="check_batched_grad"):
        gradcheck(lambda a: a * 2, (x,), check_batched_grad=True)
    with pytest.raises(ValueError, match="require gradient"):
        gradcheck(lambda a: a * 2, (x.detach(),))
    assert gradcheck(lambda a, k: a * k, (x, 3.0))  # non-tensor inputs pass through
    g = munet.ones(2, dtype=munet.float64, requires_grad=True)
    assert gradgradcheck(lambda a: a**3, (x,), (g,))


def test_variable_is_a_detached_tensor():
    x = munet.ones(2, requires_grad=True)
    v = Variable(x)
    assert isinstance(v, munet.Tensor) and v is not x and not v.requires_grad
    assert Variable(x.detach(), requires_grad=True).requires_grad
    assert isinstance(x, Variable) and not isinstance(1.0, Variable)
    with pytest.raises(RuntimeError, match="deprecated, use torch.tensor"):
        munet.autograd.variable(1.0)


def test_set_multithreading_enabled():
    assert munet.autograd.is_multithreading_enabled()
    with munet.autograd.set_multithreading_enabled(False):
        assert not munet.autograd.is_multithreading_enabled()
        x = munet.ones(2, requires_grad=True)
        (x * 3).sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]
    assert munet.autograd.is_multithreading_enabled()
