"""The torch.* entry points of nn functions (ATen signatures) against PyTorch, forward and gradients, float64."""

import numpy as np
import pytest
import torch

import munet
from munet.nn import torch_level


def _rand(rng, *shape, positive=False):
    x = rng.normal(size=shape)
    return np.abs(x) + 0.1 if positive else x


def _leaves(arrays, grad):
    mine = [munet.tensor(a, requires_grad=g) if isinstance(a, np.ndarray) else a for a, g in zip(arrays, grad)]
    theirs = [torch.tensor(a, requires_grad=g) if isinstance(a, np.ndarray) else a for a, g in zip(arrays, grad)]
    return mine, theirs


def _compare(name, arrays, grad, *extra, rtol=1e-9, atol=1e-11, index=None):
    mine, theirs = _leaves(arrays, grad)
    out_m = getattr(munet, name)(*mine, *extra)
    out_t = getattr(torch, name)(*theirs, *extra)
    if index is not None:
        out_m, out_t = out_m[index], out_t[index]
    np.testing.assert_allclose(out_m.detach().numpy(), out_t.detach().numpy(), rtol=rtol, atol=atol)
    weights = np.random.default_rng(9).normal(size=tuple(out_t.shape))
    loss_m = (out_m * munet.tensor(weights)).sum()
    loss_t = (out_t * torch.tensor(weights)).sum()
    leaves_m = [m for m, g in zip(mine, grad) if g]
    leaves_t = [t for t, g in zip(theirs, grad) if g]
    for gm, gt in zip(munet.autograd.grad(loss_m, leaves_m), torch.autograd.grad(loss_t, leaves_t)):
        np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_and_instance_norm(training):
    rng = np.random.default_rng(0)
    x, w, b = _rand(rng, 4, 3, 5), _rand(rng, 3), _rand(rng, 3)
    rm, rv = _rand(rng, 3), _rand(rng, 3, positive=True)
    for name in ("batch_norm", "instance_norm"):
        mine, theirs = _leaves([x, w, b], [True, True, True])
        rm_m, rv_m, rm_t, rv_t = munet.tensor(rm), munet.tensor(rv), torch.tensor(rm), torch.tensor(rv)
        ym = getattr(munet, name)(*mine, rm_m, rv_m, training, 0.2, 1e-5, False)
        yt = getattr(torch, name)(*theirs, rm_t, rv_t, training, 0.2, 1e-5, False)
        np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(rm_m.numpy(), rm_t.numpy(), rtol=1e-12)
        np.testing.assert_allclose(rv_m.numpy(), rv_t.numpy(), rtol=1e-12)
        (ym**2).sum().backward()
        (yt**2).sum().backward()
        for a, c in zip(mine, theirs):
            np.testing.assert_allclose(a.grad.numpy(), c.grad.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_embedding(padding_idx):
    rng = np.random.default_rng(1)
    weight = _rand(rng, 6, 3)
    idx = np.array([[0, 2, 5], [2, 2, 1]])
    wm, wt = munet.tensor(weight, requires_grad=True), torch.tensor(weight, requires_grad=True)
    ym = munet.embedding(wm, munet.tensor(idx), padding_idx, True)
    yt = torch.embedding(wt, torch.tensor(idx), padding_idx, True)
    np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy())
    ym.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(wm.grad.numpy(), wt.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_embedding_bag(mode):
    rng = np.random.default_rng(2)
    weight = _rand(rng, 6, 3)
    idx, offsets = np.array([0, 2, 1, 5, 4, 4]), np.array([0, 2, 2, 3])
    wm, wt = munet.tensor(weight, requires_grad=True), torch.tensor(weight, requires_grad=True)
    mine = munet.embedding_bag(wm, munet.tensor(idx), munet.tensor(offsets), False, mode)
    theirs = torch.embedding_bag(wt, torch.tensor(idx), torch.tensor(offsets), False, mode)
    for m, t in zip(mine, theirs):
        np.testing.assert_allclose(m.detach().numpy(), t.detach().numpy(), rtol=1e-12)
    (mine[0] ** 2).sum().backward()
    (theirs[0] ** 2).sum().backward()
    np.testing.assert_allclose(wm.grad.numpy(), wt.grad.numpy(), rtol=1e-12)


def test_embedding_renorm_():
    weight = np.random.default_rng(3).normal(size=(5, 4)) * 3
    wm, wt = munet.tensor(weight), torch.tensor(weight)
    idx = [0, 3, 3]
    assert munet.embedding_renorm_(wm, munet.tensor(idx), 1.5, 2.0) is wm
    torch.embedding_renorm_(wt, torch.tensor(idx), 1.5, 2.0)
    np.testing.assert_allclose(wm.numpy(), wt.numpy(), rtol=1e-12)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_losses(reduction):
    rng = np.random.default_rng(4)
    x, y, t = _rand(rng, 4, 3), _rand(rng, 4, 3), rng.uniform(size=(4, 3))
    sign = np.sign(rng.normal(size=4))
    _compare("binary_cross_entropy_with_logits", [x, t, _rand(rng, 3, positive=True), _rand(rng, 3, positive=True)],
             [True, True, False, False], reduction)  # fmt: skip
    _compare("kl_div", [np.log(t), t], [True, True], reduction)
    _compare("margin_ranking_loss", [x[:, 0], y[:, 0], sign], [True, True, False], 0.3, reduction)
    _compare("hinge_embedding_loss", [x, np.sign(y)], [True, False], 0.7, reduction)
    _compare("cosine_embedding_loss", [x, y, sign], [True, True, False], 0.1, reduction)
    _compare("poisson_nll_loss", [x, np.abs(y)], [True, False], True, False, 1e-8, reduction)
    _compare("poisson_nll_loss", [np.abs(x), np.round(np.abs(y) * 3)], [True, False], False, True, 1e-8, reduction)
    _compare("triplet_margin_loss", [x, y, _rand(rng, 4, 3)], [True, True, True], 1.0, 2.0, 1e-6, True, reduction)


def test_kl_div_log_target_and_bad_reduction():
    rng = np.random.default_rng(5)
    a, b = np.log(rng.uniform(size=(3, 2))), np.log(rng.uniform(size=(3, 2)))
    np.testing.assert_allclose(
        munet.kl_div(munet.tensor(a), munet.tensor(b), 2, log_target=True).numpy(),
        torch.kl_div(torch.tensor(a), torch.tensor(b), 2, log_target=True).numpy(),
    )
    with pytest.raises(ValueError, match="reduction"):
        munet.kl_div(munet.tensor(a), munet.tensor(b), "mean")


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_ctc_loss(reduction):
    rng = np.random.default_rng(6)
    logits = rng.normal(size=(6, 2, 4))
    targets = np.array([[1, 2, 1], [3, 1, 0]])
    # through log_softmax: PyTorch's ctc backward assumes normalized log-probabilities
    mine, theirs = _leaves([logits], [True])
    ym = munet.ctc_loss(mine[0].log_softmax(-1), munet.tensor(targets), [6, 5], [3, 2], 0, reduction, False)
    yt = torch.ctc_loss(theirs[0].log_softmax(-1), torch.tensor(targets), [6, 5], [3, 2], 0, reduction, False)
    np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), rtol=1e-9)
    ym.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(mine[0].grad.numpy(), theirs[0].grad.numpy(), rtol=1e-8, atol=1e-10)


def test_shape_pool_sampling_and_conv_tbc():
    rng = np.random.default_rng(7)
    x = _rand(rng, 2, 4, 5)
    _compare("constant_pad_nd", [x], [True], [1, 2, 0, 1], 0.5)
    _compare("constant_pad_nd", [x], [True], [1, -2])
    _compare("channel_shuffle", [x], [True], 2)
    _compare("adaptive_max_pool1d", [x], [True], [3], index=0)
    mi, ti = munet.adaptive_max_pool1d(munet.tensor(x), 3)[1], torch.adaptive_max_pool1d(torch.tensor(x), 3)[1]
    np.testing.assert_array_equal(mi.numpy(), ti.numpy())
    img, grid = _rand(rng, 1, 2, 4, 5), rng.uniform(-1, 1, size=(1, 3, 2, 2))
    for interpolation, padding, align in [(0, 0, False), (0, 1, True), (1, 2, False)]:
        _compare("grid_sampler_2d", [img, grid], [True, interpolation == 0], interpolation, padding, align)
    with pytest.raises(RuntimeError, match="4-D"):
        munet.grid_sampler_2d(munet.ones(1, 1, 2, 2, 2), munet.zeros(1, 1, 1, 1, 3), 0, 0, False)
    seq, weight, bias = _rand(rng, 7, 2, 3), _rand(rng, 3, 3, 4), _rand(rng, 4)
    for pad in (0, 1):
        _compare("conv_tbc", [seq, weight, bias], [True, True, True], pad)
    assert munet.nn.functional.conv_tbc is munet.conv_tbc


def test_feature_dropout_family():
    x = munet.ones(64, 8, 3, dtype=munet.float64)
    munet.manual_seed(0)
    y = munet.feature_dropout(x, 0.5, True)
    values = y.numpy()
    assert set(np.unique(values)) <= {0.0, 2.0}
    assert np.all(values == values[:, :, :1])  # whole (sample, channel) slices
    assert 0.3 < (values[:, :, 0] == 0).mean() < 0.7
    np.testing.assert_array_equal(munet.feature_dropout(x, 0.5, False).numpy(), x.numpy())
    z = x.clone()
    assert munet.feature_dropout_(z, 0.5, True) is z and (z.numpy() == 0).any()
    w = x.clone()
    munet.feature_alpha_dropout_(w, 0.5, True)
    assert np.all(w.numpy() == w.numpy()[:, :, :1]) and len(np.unique(w.numpy())) == 2


def _flat_params(module):
    return [p for names in module._all_weights for p in (getattr(module, n) for n in names)]


RNNS = [
    ("lstm", torch.nn.LSTM, {}),
    ("lstm", torch.nn.LSTM, {"proj_size": 2}),
    ("gru", torch.nn.GRU, {}),
    ("rnn_tanh", torch.nn.RNN, {}),
    ("rnn_relu", torch.nn.RNN, {"nonlinearity": "relu"}),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("name,cls,kwargs", RNNS, ids=lambda v: v if isinstance(v, str) else "")
def test_recurrences_match_torch(name, cls, kwargs, batch_first, bias):
    torch.manual_seed(0)
    module = cls(3, 4, num_layers=2, bidirectional=True, bias=bias, batch_first=batch_first, **kwargs).double()
    params_t = [p.detach().clone().requires_grad_() for p in module._flat_weights]
    params_m = [munet.tensor(p.detach().numpy(), requires_grad=True) for p in params_t]
    rng = np.random.default_rng(8)
    x = rng.normal(size=(2, 5, 3) if batch_first else (5, 2, 3))
    h_size = kwargs.get("proj_size", 4)
    h0 = rng.normal(size=(4, 2, h_size))
    if name == "lstm":
        c0 = rng.normal(size=(4, 2, 4))
        hx_m, hx_t = [munet.tensor(h0), munet.tensor(c0)], [torch.tensor(h0), torch.tensor(c0)]
    else:
        hx_m, hx_t = munet.tensor(h0), torch.tensor(h0)
    args = (bias, 2, 0.0, False, True, batch_first)
    out_m = getattr(munet, name)(munet.tensor(x), hx_m, params_m, *args)
    out_t = getattr(torch, name)(torch.tensor(x), hx_t, params_t, *args)
    assert len(out_m) == len(out_t)
    for a, b in zip(out_m, out_t):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9, atol=1e-11)
    loss_m = sum((o * o).sum() for o in out_m)
    loss_t = sum((o * o).sum() for o in out_t)
    for gm, gt in zip(munet.autograd.grad(loss_m, params_m), torch.autograd.grad(loss_t, params_t)):
        np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-8, atol=1e-10)


def test_packed_overload_matches_torch():
    torch.manual_seed(1)
    module = torch.nn.GRU(3, 4).double()
    params_t = [p.detach() for p in module._flat_weights]
    params_m = [munet.tensor(p.numpy()) for p in params_t]
    seqs = [torch.randn(4, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)]
    packed = torch.nn.utils.rnn.pack_sequence(seqs)
    h0 = torch.randn(1, 2, 4, dtype=torch.float64)
    out_t = torch.gru(packed.data, packed.batch_sizes, h0, params_t, True, 1, 0.0, False, False)
    out_m = munet.gru(munet.tensor(packed.data.numpy()), munet.tensor(packed.batch_sizes.numpy()), munet.tensor(h0.numpy()),
                      params_m, True, 1, 0.0, False, False)  # fmt: skip
    for a, b in zip(out_m, out_t):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-11)


def test_cells_match_torch():
    rng = np.random.default_rng(10)
    x, h, c = rng.normal(size=(3, 5)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    for name, gates in [("lstm_cell", 4), ("gru_cell", 3), ("rnn_tanh_cell", 1), ("rnn_relu_cell", 1)]:
        arrays = [x, h, rng.normal(size=(gates * 4, 5)), rng.normal(size=(gates * 4, 4)), rng.normal(size=gates * 4),
                  rng.normal(size=gates * 4)]  # fmt: skip
        if name == "lstm_cell":
            mine, theirs = _leaves(arrays, [True] * 6)
            out_m = munet.lstm_cell(mine[0], [mine[1], munet.tensor(c)], *mine[2:])
            out_t = torch.lstm_cell(theirs[0], [theirs[1], torch.tensor(c)], *theirs[2:])
            for a, b in zip(out_m, out_t):
                np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10)
            continue
        _compare(name, arrays, [True] * 6)
        _compare(name, arrays[:4], [True] * 4)


def test_parameter_count_is_checked():
    with pytest.raises(RuntimeError, match="expected 8 parameters"):
        munet.gru(munet.ones(2, 1, 3), munet.zeros(2, 1, 4), [munet.ones(12, 3)], True, 1, 0.0, False, True, False)
    assert torch_level.__all__ == sorted(torch_level.__all__)
