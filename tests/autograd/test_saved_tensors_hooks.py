"""autograd.graph.saved_tensors_hooks and save_on_cpu, against PyTorch."""

import threading

import numpy as np
import pytest
import torch

import munet
from munet.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks
from tests.reference import assert_close

rng = np.random.default_rng(4)


def forward(mod, x, w):
    return ((x * w).sin() * x).sum()


def pair(*shape):
    a = rng.standard_normal(shape).astype(np.float32)
    return munet.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def test_pack_and_unpack_run_and_gradients_match_torch():
    (xm, xt), (wm, wt) = pair(3, 4), pair(3, 4)
    counts = {}
    for mod, x, w in ((munet, xm, wm), (torch, xt, wt)):
        packed, unpacked = [], []

        def pack(t, packed=packed):
            packed.append(tuple(t.shape))
            return t * 1  # a different tensor holding the same values

        def unpack(t, unpacked=unpacked):
            unpacked.append(tuple(t.shape))
            return t

        with mod.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = forward(mod, x, w)
        y.backward()
        counts[mod.__name__] = (len(packed) > 0, len(unpacked) == len(packed))
    assert counts["munet"] == counts["torch"] == (True, True)
    assert_close(xm.grad, xt.grad)
    assert_close(wm.grad, wt.grad)


def test_unpack_result_is_what_backward_reads():
    x = munet.tensor([1.0, 2.0], requires_grad=True)
    xt = torch.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t * 10, lambda t: t):
        y = (x * x).sum()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t * 10, lambda t: t):
        yt = (xt * xt).sum()
    y.backward()
    yt.backward()
    assert_close(x.grad, xt.grad)  # backward read 10 * x: the gradient is 20 * x
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 40.0])


def test_version_check_still_raises_with_hooks():
    # PyTorch skips the check under hooks (and would read the modified b here); MuNet keeps it,
    # see docs/decisions.md.
    a = munet.ones(3, requires_grad=True)
    b = a * 2
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        c = b * b
    b.add_(1)
    with pytest.raises(
        RuntimeError, match="tensor saved by MulBackward0 as 'self' .* is at version 1; expected version 0"
    ):
        c.sum().backward()


def test_save_on_cpu_matches_torch_including_double_backward():
    (xm, xt), (wm, wt) = pair(5), pair(5)
    with save_on_cpu():
        ym = forward(munet, xm, wm)
    with torch.autograd.graph.save_on_cpu():
        yt = forward(torch, xt, wt)
    (gm,) = munet.autograd.grad(ym, xm, create_graph=True)
    (gt,) = torch.autograd.grad(yt, xt, create_graph=True)
    assert_close(gm, gt)
    gm.sum().backward()
    gt.sum().backward()
    assert_close(xm.grad, xt.grad)
    assert_close(wm.grad, wt.grad)


def test_saved_output_goes_through_hooks():
    for mod in (munet, torch):
        seen = []
        x = mod.tensor([0.5, 1.0], requires_grad=True)
        with mod.autograd.graph.saved_tensors_hooks(lambda t: seen.append(1) or t, lambda t: t):
            y = x.exp()  # ExpBackward0 saves its output
        y.sum().backward()
        assert seen == [1]
        np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0]), rtol=1e-6)


def test_hooks_are_per_thread_and_can_be_disabled():
    seen = []

    def other_thread():
        x = munet.ones(2, requires_grad=True)
        (x * x).sum().backward()

    with saved_tensors_hooks(lambda t: seen.append(1) or t, lambda t: t):
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert seen == []
    with disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with saved_tensors_hooks(lambda t: t, lambda t: 3.0):
        y = (munet.ones(2, requires_grad=True) ** 2).sum()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        y.backward()
