"""munet.autograd.functional against torch.autograd.functional: values and result structure."""

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import munet
import munet.autograd.functional as MF
from tests.reference import assert_close

rng = np.random.default_rng(0)


def arrays(*shapes):
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def both(arrs, tuple_input):
    m = tuple(munet.tensor(a) for a in arrs)
    t = tuple(torch.tensor(a) for a in arrs)
    return (m, t) if tuple_input else (m[0], t[0])


def assert_same_structure(m, t):
    if isinstance(t, torch.Tensor):
        assert isinstance(m, munet.Tensor), f"expected a Tensor, got {type(m)}"
        assert_close(m, t)
        return
    assert isinstance(m, tuple) and len(m) == len(t), f"expected a tuple of {len(t)}, got {m!r}"
    for a, b in zip(m, t):
        assert_same_structure(a, b)


def f_single(mod):
    return lambda x: mod.tanh(x) * x


def f_multi(mod):
    return lambda x, y: (x * y.exp(), (x.sin() * y).sum())


def f_scalar(mod):
    return lambda x: (x**3).sum() + (x.sin() * x).sum()


def f_scalar2(mod):
    return lambda x, y: (x.exp() * y).sum() + (y**2 * x).sum()


@pytest.mark.parametrize(
    "fn,shapes,tuple_input",
    [
        (f_single, [(3, 2)], False),
        (f_single, [(1,)], True),
        (f_multi, [(3,), (3,)], True),
        (f_scalar, [(2, 3)], False),
    ],
)
@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_matches_torch(fn, shapes, tuple_input, vectorize):
    m, t = both(arrays(*shapes), tuple_input)
    assert_same_structure(
        MF.jacobian(fn(munet), m, vectorize=vectorize), TF.jacobian(fn(torch), t, vectorize=vectorize)
    )


def test_jacobian_forward_mode_strategy_needs_vectorize_and_matches():
    m, t = both(arrays((4,)), False)
    with pytest.raises(NotImplementedError, match="requires `vectorize=True`"):
        MF.jacobian(f_single(munet), m, strategy="forward-mode")
    assert_same_structure(
        MF.jacobian(f_single(munet), m, vectorize=True, strategy="forward-mode"),
        TF.jacobian(f_single(torch), t, vectorize=True, strategy="forward-mode"),
    )
    with pytest.raises(ValueError, match="strategy"):
        MF.jacobian(f_single(munet), m, strategy="sideways")


@pytest.mark.parametrize("fn,shapes,tuple_input", [(f_scalar, [(3,)], False), (f_scalar2, [(2,), (2,)], True)])
def test_hessian_matches_torch(fn, shapes, tuple_input):
    m, t = both(arrays(*shapes), tuple_input)
    assert_same_structure(MF.hessian(fn(munet), m), TF.hessian(fn(torch), t))
    assert_same_structure(
        MF.hessian(fn(munet), m, vectorize=True, outer_jacobian_strategy="forward-mode"),
        TF.hessian(fn(torch), t, vectorize=True, outer_jacobian_strategy="forward-mode"),
    )
    with pytest.raises(NotImplementedError, match="requires `vectorize=True`"):
        MF.hessian(fn(munet), m, outer_jacobian_strategy="forward-mode")


@pytest.mark.parametrize("fn,shapes,tuple_input", [(f_single, [(3, 2)], False), (f_multi, [(3,), (3,)], True)])
def test_vjp_and_jvp_match_torch(fn, shapes, tuple_input):
    m, t = both(arrays(*shapes), tuple_input)
    out_t = fn(torch)(*(t if tuple_input else (t,)))
    v_out = tuple(torch.randn(o.shape) for o in (out_t if isinstance(out_t, tuple) else (out_t,)))
    v_out = v_out if isinstance(out_t, tuple) else v_out[0]
    to_m = lambda v: tuple(munet.tensor(x.numpy()) for x in v) if isinstance(v, tuple) else munet.tensor(v.numpy())  # noqa: E731
    assert_same_structure(MF.vjp(fn(munet), m, to_m(v_out)), TF.vjp(fn(torch), t, v_out))
    v_in = tuple(torch.randn(x.shape) for x in t) if tuple_input else torch.randn(t.shape)
    assert_same_structure(MF.jvp(fn(munet), m, to_m(v_in)), TF.jvp(fn(torch), t, v_in))


@pytest.mark.parametrize("fn,shapes,tuple_input", [(f_scalar, [(3,)], False), (f_scalar2, [(2,), (2,)], True)])
def test_hvp_and_vhp_match_torch(fn, shapes, tuple_input):
    m, t = both(arrays(*shapes), tuple_input)
    vs = arrays(*shapes)
    vm, vt = both(vs, tuple_input)
    assert_same_structure(MF.hvp(fn(munet), m, vm), TF.hvp(fn(torch), t, vt))
    assert_same_structure(MF.vhp(fn(munet), m, vm), TF.vhp(fn(torch), t, vt))


def test_v_may_be_omitted_only_for_single_elements():
    (a,) = arrays((1,))
    assert_same_structure(
        MF.vjp(lambda x: (x * 3).sum(), munet.tensor(a)), TF.vjp(lambda x: (x * 3).sum(), torch.tensor(a))
    )
    assert_same_structure(MF.jvp(lambda x: x * 3, munet.tensor(a)), TF.jvp(lambda x: x * 3, torch.tensor(a)))
    with pytest.raises(RuntimeError, match="v can only be None"):
        MF.vjp(lambda x: x * 3, munet.ones(2))
    with pytest.raises(RuntimeError, match="v has invalid size"):
        MF.vjp(lambda x: x * 3, munet.ones(2), munet.ones(3))
    with pytest.raises(RuntimeError, match="invalid length"):
        MF.jvp(lambda x, y: x * y, (munet.ones(2), munet.ones(2)), (munet.ones(2),))


def test_unused_input_gives_zeros_or_raises_in_strict_mode():
    fn = lambda x, y: x * 2  # noqa: E731
    m = (munet.ones(2), munet.ones(3))
    t = (torch.ones(2), torch.ones(3))
    assert_same_structure(MF.jacobian(fn, m), TF.jacobian(fn, t))
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent of input 1"):
        MF.jacobian(fn, m, strict=True)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        MF.vjp(fn, m, munet.ones(2), strict=True)
    with pytest.raises(RuntimeError, match="While computing the hessian"):
        MF.hessian(lambda x: x.sum() * 2, munet.ones(2), strict=True)
    assert_same_structure(
        MF.hessian(lambda x: x.sum() * 2, munet.ones(2)), TF.hessian(lambda x: x.sum() * 2, torch.ones(2))
    )


def test_create_graph_keeps_results_differentiable():
    (a,) = arrays((3,))
    m = munet.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    jm = MF.jacobian(lambda x: x**3, m, create_graph=True)
    jt = TF.jacobian(lambda x: x**3, t, create_graph=True)
    assert jm.requires_grad
    jm.sum().backward()
    jt.sum().backward()
    assert_close(m.grad, t.grad)
    assert not MF.jacobian(lambda x: x**3, m).requires_grad


def test_non_tensor_input_or_output_raises():
    with pytest.raises(TypeError, match="inputs given to jacobian"):
        MF.jacobian(lambda x: x, 3.0)
    with pytest.raises(TypeError, match="outputs of the user-provided function"):
        MF.vjp(lambda x: 1.0, munet.ones(1))
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        MF.hvp(lambda x: (x.sum(), x.sum()), munet.ones(2), munet.ones(2))


@pytest.mark.parametrize("name", ["vjp", "jvp", "hvp", "vhp"])
def test_create_graph_products_differentiate_again_like_torch(name):
    (a,), (v,) = arrays((3,)), arrays((3,))
    fn = f_scalar if name in ("hvp", "vhp") else f_single
    grads = []
    for mod, F in ((munet, MF), (torch, TF)):
        x = mod.tensor(a, requires_grad=True)
        _, prod = getattr(F, name)(fn(mod), x, mod.tensor(v), create_graph=True)
        assert prod.requires_grad
        (prod**2).sum().backward()
        grads.append(x.grad)
    assert_close(grads[0], grads[1])
