"""Autograd semantics, each checked against what PyTorch does in the same situation."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, to_torch


def pair(values, requires_grad=True):
    arr = np.asarray(values, dtype=np.float32)
    m = munet.tensor(arr, requires_grad=requires_grad)
    t = torch.tensor(arr, requires_grad=requires_grad)
    return m, t


def test_backward_with_gradient_for_non_scalar():
    m, t = pair([[1.0, 2.0], [3.0, 4.0]])
    g = np.array([[1.0, -1.0], [0.5, 2.0]], dtype=np.float32)
    (m * m).backward(munet.tensor(g))
    (t * t).backward(torch.tensor(g))
    assert_close(m.grad, t.grad)


def test_non_scalar_without_gradient_raises():
    m, _ = pair([1.0, 2.0])
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (m * 2).backward()


def test_grads_accumulate_across_backward_calls():
    m, t = pair([1.0, 2.0, 3.0])
    for _ in range(2):
        (m * m).sum().backward()
        (t * t).sum().backward()
    assert_close(m.grad, t.grad)


def test_second_backward_without_retain_graph_raises():
    m, _ = pair([1.0, 2.0])
    y = (m * m).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retain_graph_allows_second_backward():
    m, t = pair([1.0, 2.0])
    y = (m * m.exp()).sum()
    y.backward(retain_graph=True)
    y.backward()
    ty = (t * t.exp()).sum()
    ty.backward(retain_graph=True)
    ty.backward()
    assert_close(m.grad, t.grad)


def test_create_graph_gives_second_derivatives():
    m, t = pair([0.5, -1.0, 2.0])
    (gm,) = munet.autograd.grad((m * m * m.exp()).sum(), m, create_graph=True)
    (gt,) = torch.autograd.grad((t * t * t.exp()).sum(), t, create_graph=True)
    assert_close(gm, gt)
    gm.sum().backward()
    gt.sum().backward()
    assert_close(m.grad, t.grad)


def test_autograd_grad_leaves_dot_grad_untouched_and_allow_unused():
    m, _ = pair([1.0, 2.0])
    other, _ = pair([3.0])
    (g,) = munet.autograd.grad((m * 3).sum(), [m])
    assert m.grad is None
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])
    with pytest.raises(RuntimeError, match="not have been used"):
        munet.autograd.grad((m * 3).sum(), [m, other])
    g1, g2 = munet.autograd.grad((m * 3).sum(), [m, other], allow_unused=True)
    assert g2 is None


def test_autograd_grad_of_intermediate():
    m, t = pair([1.0, 2.0])
    hm = m * 2
    ht = t * 2
    (gm,) = munet.autograd.grad((hm * hm).sum(), hm)
    (gt,) = torch.autograd.grad((ht * ht).sum(), ht)
    assert_close(gm, gt)


def test_grad_modes():
    m, _ = pair([1.0])
    with munet.no_grad():
        assert not (m * 2).requires_grad
        with munet.enable_grad():
            assert (m * 2).requires_grad
    with munet.set_grad_enabled(False):
        assert not (m * 2).requires_grad
    assert munet.is_grad_enabled()
    with munet.inference_mode():
        assert not (m * 2).requires_grad

    @munet.no_grad()
    def f(x):
        return x * 2

    assert not f(m).requires_grad
    assert (m * 2).requires_grad


def test_requires_grad_rules():
    with pytest.raises(RuntimeError, match="floating point"):
        munet.tensor([1, 2]).requires_grad_()
    m, _ = pair([1.0])
    y = m * 2
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad = False
    assert m.is_leaf and not y.is_leaf


def test_detach_shares_storage_and_version():
    m, _ = pair([1.0, 2.0])
    d = m.detach()
    assert not d.requires_grad and d.grad_fn is None
    assert d.data_ptr() == m.data_ptr()
    d.add_(1)
    assert m._version == d._version == 1
    np.testing.assert_allclose(m.detach().numpy(), [2.0, 3.0])


def test_retain_grad_on_non_leaf():
    m, t = pair([1.0, 2.0])
    hm, ht = m * 3, t * 3
    hm.retain_grad()
    ht.retain_grad()
    (hm * hm).sum().backward()
    (ht * ht).sum().backward()
    assert_close(hm.grad, ht.grad)
    unretained = m * 4
    (unretained * 1).sum().backward()
    assert unretained.grad is None


def test_hooks_on_leaf_and_non_leaf_replace_grads():
    m, t = pair([1.0, 2.0])
    for x in (m, t):
        x.register_hook(lambda g: g * 10)
    hm, ht = m * m, t * t
    hm.register_hook(lambda g: g + 1)
    ht.register_hook(lambda g: g + 1)
    hm.sum().backward()
    ht.sum().backward()
    assert_close(m.grad, t.grad)


def test_hook_handle_remove():
    m, _ = pair([1.0])
    handle = m.register_hook(lambda g: g * 100)
    handle.remove()
    (m * 1).sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), [1.0])


def test_in_place_on_leaf_requiring_grad_raises():
    m, t = pair([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        t.add_(1)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        m.add_(1)
    with munet.no_grad():
        m.add_(1)
    np.testing.assert_allclose(m.detach().numpy(), [2.0, 3.0])


def test_modifying_a_saved_input_raises_naming_node_and_role():
    m, _ = pair([1.0, 2.0])
    w, _ = pair([3.0, 4.0])
    a = m * 1
    b = a * w  # saves a as 'self' because w needs a gradient
    a.add_(1)
    with pytest.raises(RuntimeError, match=r"saved by MulBackward0 as 'self'"):
        b.sum().backward()
    # PyTorch raises in the same place.
    tm, tw = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0, 4.0], requires_grad=True)
    ta = tm * 1
    tb = ta * tw
    ta.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tb.sum().backward()


def test_modifying_an_unsaved_input_is_legal_like_pytorch():
    m, t = pair([1.0, 2.0])
    am, at = m * 1, t * 1
    bm, bt = am + 5, at + 5  # add reads no input
    cm, ct = am * 2.0, at * 2.0  # mul by a number reads no tensor
    am.add_(1)
    at.add_(1)
    (bm + cm).sum().backward()
    (bt + ct).sum().backward()
    assert_close(m.grad, t.grad)


def test_modifying_a_saved_output_raises():
    m, _ = pair([1.0, 2.0])
    y = m.exp()
    z = y * 1
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"saved by ExpBackward0 as 'result'"):
        z.sum().backward()


def test_in_place_on_non_leaf_records_history():
    m, t = pair([1.0, 2.0, 3.0])
    wm, wt = pair([0.5, -1.0, 2.0])
    ym, yt = m * 2, t * 2
    ym.mul_(wm)
    yt.mul_(wt)
    ym.exp_()
    yt.exp_()
    ym.sum().backward()
    yt.sum().backward()
    assert_close(m.grad, t.grad)
    assert_close(wm.grad, wt.grad)
    assert ym._version == 2


def test_grad_fn_name_and_next_functions():
    m, _ = pair([1.0])
    y = m * 2 + 1
    assert y.grad_fn.name() == "AddBackward0"
    (node, _), _ = y.grad_fn.next_functions
    assert node.name() == "MulBackward0"
    assert node.next_functions[0][0].name() == "AccumulateGrad"


def test_broadcast_gradients_reduce_to_input_shapes():
    a, ta = pair(np.ones((3, 1)))
    b, tb = pair(np.arange(4.0))
    (a * b).sum().backward()
    (ta * tb).sum().backward()
    assert_close(a.grad, ta.grad)
    assert_close(b.grad, tb.grad)


class _Cube(munet.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * x * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False)
        return grad * 3 * x * x * ctx.k, None


def test_custom_function():
    m, t = pair([1.0, -2.0])
    out = _Cube.apply(m, 2.0)
    assert out.grad_fn.name() == "_CubeBackward"
    out.sum().backward()
    assert_close(m.grad, to_torch(np.array([6.0, 24.0], dtype=np.float32)))


def test_custom_function_saved_tensor_version_checked():
    m, _ = pair([1.0, 2.0])
    h = m * 1
    out = _Cube.apply(h, 1.0)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


class _AddOneInPlace(munet.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_custom_function_mark_dirty():
    m, _ = pair([1.0, 2.0])
    h = m * 2
    out = _AddOneInPlace.apply(h)
    assert out is h
    (out * out).sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), [2 * 2 * 3.0, 2 * 2 * 5.0])


def test_diamond_graph_accumulates_once_per_path():
    m, t = pair([1.5, -0.5])
    for x in (m, t):
        a = x * 2
        b = a.exp()
        c = a * 3
        (b * c).sum().backward()
    assert_close(m.grad, t.grad)


def test_function_materializes_missing_grads_on_the_output_device(vulkan):
    class Split(munet.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            assert ga.device == gb.device == x.device  # gb was never computed: zeros on vulkan
            return ga * 2 + gb * 3

    x = munet.ones(3, device=vulkan, requires_grad=True)
    a, _ = Split.apply(x)
    a.sum().backward()
    assert x.grad.cpu().tolist() == [2.0, 2.0, 2.0]


def test_backward_in_one_thread_leaves_another_recording():
    """backward() runs its gradient rules with grad mode off; only in its own thread (a hook holds it there)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    in_backward, leave = threading.Event(), threading.Event()

    def backward_held_in_a_hook():
        x = munet.ones(2, requires_grad=True)
        y = x * 3
        y.register_hook(lambda g: (in_backward.set(), leave.wait(30), None)[-1])
        y.sum().backward()
        return x.grad.tolist()

    with ThreadPoolExecutor(1) as pool:
        done = pool.submit(backward_held_in_a_hook)
        assert in_backward.wait(30)
        try:
            recorded = (munet.ones(2, requires_grad=True) * 2).requires_grad
        finally:
            leave.set()
        assert done.result(timeout=30) == [3.0, 3.0]
    assert recorded
