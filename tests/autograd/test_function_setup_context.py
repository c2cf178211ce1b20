"""autograd.Function in PyTorch 2 style (forward without ctx, setup_context) and its ctx API."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close

rng = np.random.default_rng(1)


def make_scaled_cube(mod):
    class ScaledCube(mod.autograd.Function):
        @staticmethod
        def forward(x, scale=2.0, offset=0.0):
            return x**3 * scale + offset, (x > 0).to(x.dtype)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, scale, offset = inputs
            ctx.save_for_backward(x)
            ctx.scale = scale
            ctx.mark_non_differentiable(output[1])
            ctx.seen_needs = ctx.needs_input_grad

        @staticmethod
        def backward(ctx, grad, grad_mask):
            (x,) = ctx.saved_tensors
            return grad * 3 * x**2 * ctx.scale, None, None

    return ScaledCube


def test_setup_context_style_matches_torch():
    a = rng.standard_normal((3, 4)).astype(np.float32)
    m = munet.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    fm, ft = make_scaled_cube(munet), make_scaled_cube(torch)
    (ym, mask_m), (yt, mask_t) = fm.apply(m, 1.5), ft.apply(t, 1.5)
    assert_close(ym, yt)
    assert not mask_m.requires_grad and not mask_t.requires_grad
    g = rng.standard_normal((3, 4)).astype(np.float32)
    ym.backward(munet.tensor(g))
    yt.backward(torch.tensor(g))
    assert_close(m.grad, t.grad)
    assert ym.grad_fn.name() == yt.grad_fn.name() == "ScaledCubeBackward"


def test_setup_context_binds_keywords_and_defaults():
    seen = {}

    class AddScaled(munet.autograd.Function):
        @staticmethod
        def forward(x, y, alpha=1.0):
            return x + alpha * y

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen["inputs"] = inputs
            seen["needs"] = ctx.needs_input_grad
            ctx.alpha = inputs[2]

        @staticmethod
        def backward(ctx, grad):
            return grad, grad * ctx.alpha, None

    x = munet.ones(2, requires_grad=True)
    y = munet.ones(2)
    AddScaled.apply(x, y=y).sum().backward()
    assert seen["inputs"][0] is x and seen["inputs"][1] is y and seen["inputs"][2] == 1.0
    assert seen["needs"] == (True, False, False)
    assert_close(x.grad, torch.ones(2))


def test_set_materialize_grads_false_passes_none():
    got = []

    def make(mod):
        class TwoOut(mod.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 2, x * 3

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.set_materialize_grads(False)

            @staticmethod
            def backward(ctx, g1, g2):
                got.append((g1 is None, g2 is None))
                return g1 * 2

        return TwoOut

    for mod in (munet, torch):
        x = mod.ones(2, requires_grad=True)
        make(mod).apply(x)[0].sum().backward()
    assert got[0] == got[1] == (False, True)


def make_once(mod):
    class Square(mod.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        @mod.autograd.function.once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            assert not mod.is_grad_enabled()
            return 2 * x * grad

    return Square


def test_once_differentiable_runs_without_grad_and_refuses_double_backward():
    for mod in (munet, torch):
        x = mod.tensor([1.0, 2.0], requires_grad=True)
        (g,) = mod.autograd.grad(make_once(mod).apply(x).sum(), x)
        np.testing.assert_allclose(g.detach().numpy(), [2.0, 4.0])
        v = mod.ones(2, requires_grad=True)
        (g,) = mod.autograd.grad(make_once(mod).apply(x), x, grad_outputs=v, create_graph=True)
        assert g.requires_grad
        with pytest.raises(
            RuntimeError, match="trying to differentiate twice a function that was marked with @once_differentiable"
        ):
            g.sum().backward()


def test_ctx_style_still_works():
    class Double(munet.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    x = munet.ones(3, requires_grad=True)
    Double.apply(x).sum().backward()
    assert_close(x.grad, torch.full((3,), 2.0))


def make_exp_and_add_one(mod):
    class Exp(mod.autograd.Function):
        @staticmethod
        def forward(x):
            return x.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    class AddOneInPlace(mod.autograd.Function):
        @staticmethod
        def forward(x):
            return x.add_(1)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.mark_dirty(inputs[0])

        @staticmethod
        def backward(ctx, grad):
            return grad

    return Exp, AddOneInPlace


def test_saved_output_double_backward_and_mark_dirty_match_torch():
    a = rng.standard_normal(4).astype(np.float32)
    results = []
    for mod in (munet, torch):
        exp, add_one = make_exp_and_add_one(mod)
        x = mod.tensor(a, requires_grad=True)
        (g,) = mod.autograd.grad(exp.apply(x).sum(), x, create_graph=True)
        (gg,) = mod.autograd.grad(g.sum(), x)
        z = x * 1
        w = add_one.apply(z)
        assert w is z
        (w * w).sum().backward()
        results.append((g.detach(), gg, x.grad))
    for m, t in zip(*results):
        assert_close(m, t)
