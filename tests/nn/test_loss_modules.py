"""Loss layers of munet.nn against torch.nn: loss values and input gradients for every
reduction, weight / pos_weight buffers in state_dict, repr, legacy size_average/reduce."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, to_torch

N, C = 4, 5


def _logits(r, *shape):
    return r.standard_normal(shape)


def _probs(r, *shape):
    return r.uniform(0.05, 0.95, shape)


def _signs(r, *shape):
    return np.where(r.standard_normal(shape) > 0, 1.0, -1.0)


def _classes(r, *shape, n=C):
    return r.integers(0, n, shape).astype(np.int64)


def _log_probs(r, *shape):
    x = r.standard_normal(shape)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


# Each input kind: a list of (array, requires_grad); floating arrays take the test's dtype.
INPUTS = {
    "pair": lambda r: [(_logits(r, N, C), True), (_logits(r, N, C), True)],
    "class": lambda r: [(_logits(r, N, C), True), (_classes(r, N), False)],
    "class_nd": lambda r: [(_logits(r, 2, C, 3), True), (_classes(r, 2, 3), False)],
    "class_probs": lambda r: [(_logits(r, N, C), True), (np.exp(_log_probs(r, N, C)), False)],
    "log_prob_class": lambda r: [(_log_probs(r, N, C), True), (_classes(r, N), False)],
    "prob": lambda r: [(_probs(r, N, C), True), (_probs(r, N, C), False)],
    "logit_binary": lambda r: [(_logits(r, N, C), True), (_probs(r, N, C), False)],
    "kl": lambda r: [(_log_probs(r, N, C), True), (np.exp(_log_probs(r, N, C)), True)],
    "kl_log": lambda r: [(_log_probs(r, N, C), True), (_log_probs(r, N, C), True)],
    "poisson_log": lambda r: [(_logits(r, N, C), True), (r.poisson(2.0, (N, C)).astype(float), False)],
    "poisson": lambda r: [(_probs(r, N, C) * 3, True), (r.poisson(2.0, (N, C)).astype(float), False)],
    "gauss": lambda r: [(_logits(r, N, C), True), (_logits(r, N, C), True), (_probs(r, N, C), True)],
    "gauss_homo": lambda r: [(_logits(r, N, C), True), (_logits(r, N, C), True), (_probs(r, N, 1), True)],
    "sign": lambda r: [(_logits(r, N, C), True), (_signs(r, N, C), False)],
    "ranking": lambda r: [(_logits(r, 6), True), (_logits(r, 6), True), (_signs(r, 6), False)],
    "cosine": lambda r: [(_logits(r, N, C), True), (_logits(r, N, C), True), (_signs(r, N), False)],
    "triplet": lambda r: [(_logits(r, N, C), True), (_logits(r, N, C), True), (_logits(r, N, C), True)],
    "multilabel": lambda r: [(_logits(r, N, C), True), ((r.uniform(size=(N, C)) > 0.5).astype(float), False)],
    "multimargin": lambda r: [(_logits(r, N, C), True), (_classes(r, N), False)],
}

W = np.linspace(0.5, 2.0, C)  # a per-class weight
POS_W = np.linspace(2.0, 0.5, C)

# (layer name, constructor kwargs (NumPy arrays become tensors), input kind)
CASES = [
    ("L1Loss", {}, "pair"),
    ("MSELoss", {}, "pair"),
    ("SmoothL1Loss", {}, "pair"),
    ("SmoothL1Loss", {"beta": 0.5}, "pair"),
    ("HuberLoss", {}, "pair"),
    ("HuberLoss", {"delta": 0.7}, "pair"),
    ("CrossEntropyLoss", {}, "class"),
    ("CrossEntropyLoss", {"weight": W, "ignore_index": 1}, "class"),
    ("CrossEntropyLoss", {"label_smoothing": 0.2}, "class"),
    ("CrossEntropyLoss", {"weight": W, "label_smoothing": 0.1}, "class_nd"),
    ("CrossEntropyLoss", {"label_smoothing": 0.1}, "class_probs"),
    ("NLLLoss", {}, "log_prob_class"),
    ("NLLLoss", {"weight": W, "ignore_index": 2}, "log_prob_class"),
    ("BCELoss", {}, "prob"),
    ("BCELoss", {"weight": W}, "prob"),
    ("BCEWithLogitsLoss", {}, "logit_binary"),
    ("BCEWithLogitsLoss", {"weight": W, "pos_weight": POS_W}, "logit_binary"),
    ("BCEWithLogitsLoss", {"pos_weight": POS_W}, "logit_binary"),
    ("KLDivLoss", {}, "kl"),
    ("KLDivLoss", {"log_target": True}, "kl_log"),
    ("PoissonNLLLoss", {}, "poisson_log"),
    ("PoissonNLLLoss", {"log_input": False, "full": True, "eps": 1e-6}, "poisson"),
    ("GaussianNLLLoss", {}, "gauss"),
    ("GaussianNLLLoss", {"full": True, "eps": 1e-3}, "gauss_homo"),
    ("SoftMarginLoss", {}, "sign"),
    ("MarginRankingLoss", {}, "ranking"),
    ("MarginRankingLoss", {"margin": 0.5}, "ranking"),
    ("HingeEmbeddingLoss", {}, "sign"),
    ("HingeEmbeddingLoss", {"margin": 0.3}, "sign"),
    ("CosineEmbeddingLoss", {}, "cosine"),
    ("CosineEmbeddingLoss", {"margin": 0.2}, "cosine"),
    ("TripletMarginLoss", {}, "triplet"),
    ("TripletMarginLoss", {"margin": 0.5, "p": 1.0, "swap": True}, "triplet"),
    ("TripletMarginWithDistanceLoss", {}, "triplet"),
    ("TripletMarginWithDistanceLoss", {"margin": 0.5, "swap": True}, "triplet"),
    ("MultiLabelSoftMarginLoss", {}, "multilabel"),
    ("MultiLabelSoftMarginLoss", {"weight": W}, "multilabel"),
    ("MultiMarginLoss", {}, "multimargin"),
    ("MultiMarginLoss", {"p": 2, "margin": 0.5, "weight": W}, "multimargin"),
]


def _case_id(case) -> str:
    name, kwargs = case[0], case[1]
    return name + "".join(f"-{k}" if isinstance(v, np.ndarray) else f"-{k}={v}" for k, v in kwargs.items())


def _build(name: str, kwargs: dict, **extra):
    """The torch and munet layers with the same arguments (arrays as float32 tensors)."""
    t_kwargs = {k: torch.tensor(v, dtype=torch.float32) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    m_kwargs = {k: munet.tensor(v, dtype=munet.float32) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    return getattr(torch.nn, name)(**t_kwargs, **extra), getattr(munet.nn, name)(**m_kwargs, **extra)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_loss_and_gradients_match_torch(case, reduction, dtype):
    name, kwargs, kind = case
    if name == "KLDivLoss" and reduction == "mean":
        reduction = "batchmean"  # 'mean' is covered by test_kl_div_mean_warns_like_torch
    t_layer, m_layer = _build(name, kwargs, reduction=reduction)
    t_layer.to(getattr(torch, dtype))
    m_layer.to(getattr(munet, dtype))
    arrays = INPUTS[kind](np.random.default_rng(7))
    t_in, m_in = [], []
    for arr, grad in arrays:
        if arr.dtype.kind == "f":
            arr = arr.astype(dtype)
        t_in.append(to_torch(arr).requires_grad_(grad))
        m_in.append(munet.tensor(arr, requires_grad=grad))
    t_out, m_out = t_layer(*t_in), m_layer(*m_in)
    assert_close(m_out, t_out)
    upstream = np.random.default_rng(1).standard_normal(tuple(t_out.shape)).astype(dtype)
    t_out.backward(to_torch(upstream))
    m_out.backward(munet.tensor(upstream))
    for i, (t, m) in enumerate(zip(t_in, m_in)):
        if t.requires_grad:
            assert_close(m.grad, t.grad, what=f"{name}: grad of input {i}")


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_state_dict_buffers_and_repr_match_torch(case):
    name, kwargs, _ = case
    t_layer, m_layer = _build(name, kwargs)
    t_state, m_state = t_layer.state_dict(), m_layer.state_dict()
    assert list(m_state) == list(t_state)
    assert [k for k, _ in m_layer.named_buffers()] == [k for k, _ in t_layer.named_buffers()]
    assert list(m_layer.parameters()) == []
    for key, value in t_state.items():
        np.testing.assert_array_equal(m_state[key].numpy(), value.numpy(), err_msg=key)
    assert repr(m_layer) == repr(t_layer)
    assert m_layer.reduction == t_layer.reduction
    # A torch state dict loads into the munet layer (same keys and shapes).
    m_layer.load_state_dict({k: munet.tensor(v.numpy() * 2) for k, v in t_state.items()})
    for key, value in t_state.items():
        np.testing.assert_array_equal(m_layer.state_dict()[key].numpy(), value.numpy() * 2)


def test_weight_buffers_follow_dtype_and_none_is_left_out():
    layer = munet.nn.BCEWithLogitsLoss(pos_weight=munet.tensor(POS_W, dtype=munet.float32))
    assert layer.weight is None
    assert list(layer.state_dict()) == ["pos_weight"]
    layer.double()
    assert layer.pos_weight.dtype == munet.float64
    layer = munet.nn.CrossEntropyLoss()
    assert layer.weight is None and list(layer.state_dict()) == []


@pytest.mark.parametrize("size_average, reduce", [(False, None), (None, False), (True, True), (False, True)])
@pytest.mark.parametrize("name", ["L1Loss", "MSELoss", "CrossEntropyLoss", "BCEWithLogitsLoss", "MarginRankingLoss"])
def test_legacy_size_average_and_reduce(name, size_average, reduce):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_layer = getattr(torch.nn, name)(size_average=size_average, reduce=reduce)
    with pytest.warns(UserWarning, match="size_average and reduce"):
        m_layer = getattr(munet.nn, name)(size_average=size_average, reduce=reduce)
    assert m_layer.reduction == t_layer.reduction


def test_kl_div_mean_warns_like_torch():
    arrays = INPUTS["kl"](np.random.default_rng(0))
    with pytest.warns(UserWarning, match="batchmean"):
        m_out = munet.nn.KLDivLoss()(*(munet.tensor(a) for a, _ in arrays))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_out = torch.nn.KLDivLoss()(*(to_torch(a) for a, _ in arrays))
    assert_close(m_out, t_out)


def test_gaussian_nll_with_scalar_var_and_keyword_only_options():
    r = np.random.default_rng(3)
    x, y = r.standard_normal((N, C)), r.standard_normal((N, C))
    m_out = munet.nn.GaussianNLLLoss(full=True)(munet.tensor(x), munet.tensor(y), 0.5)
    t_out = torch.nn.GaussianNLLLoss(full=True)(to_torch(x), to_torch(y), 0.5)
    assert_close(m_out, t_out)
    with pytest.raises(TypeError):
        munet.nn.GaussianNLLLoss(True)


def test_constructor_errors_name_the_layer():
    with pytest.raises(ValueError, match="MultiMarginLoss: only p == 1 and p == 2 supported, got 3"):
        munet.nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="MultiMarginLoss: expected weight to be None or 1D tensor, got 2D"):
        munet.nn.MultiMarginLoss(weight=munet.ones(2, 3))
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater than 0, got 0"):
        munet.nn.TripletMarginLoss(margin=0)
    with pytest.raises(TypeError, match="HuberLoss: delta must be a float or int"):
        munet.nn.HuberLoss(delta="1")
    with pytest.raises(TypeError, match="buffer 'weight'"):
        munet.nn.CrossEntropyLoss(weight=[1.0, 2.0])
    with pytest.raises(ValueError, match="reduction"):
        munet.nn.MSELoss(reduction="avg")(munet.ones(2), munet.ones(2))
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        munet.nn.NLLLoss2d()


@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_custom_distance_function(swap):
    def m_cosine_distance(x1, x2):
        return 1 - munet.nn.functional.cosine_similarity(x1, x2)

    def t_cosine_distance(x1, x2):
        return 1 - torch.nn.functional.cosine_similarity(x1, x2)

    arrays = INPUTS["triplet"](np.random.default_rng(4))
    m_layer = munet.nn.TripletMarginWithDistanceLoss(distance_function=m_cosine_distance, margin=0.8, swap=swap)
    t_layer = torch.nn.TripletMarginWithDistanceLoss(distance_function=t_cosine_distance, margin=0.8, swap=swap)
    assert repr(m_layer) == repr(t_layer) == "TripletMarginWithDistanceLoss()"
    m_in = [munet.tensor(a, requires_grad=True) for a, _ in arrays]
    t_in = [to_torch(a).requires_grad_(True) for a, _ in arrays]
    m_out, t_out = m_layer(*m_in), t_layer(*t_in)
    assert_close(m_out, t_out)
    m_out.backward()
    t_out.backward()
    for i, (m, t) in enumerate(zip(m_in, t_in)):
        assert_close(m.grad, t.grad, what=f"grad of input {i}")
    with pytest.raises(ValueError, match="TripletMarginWithDistanceLoss: expected margin to be greater than 0"):
        munet.nn.TripletMarginWithDistanceLoss(margin=-1.0)
    with pytest.raises(RuntimeError, match="anchor 2D, positive 1D, and negative 2D"):
        m_layer(m_in[0], m_in[1][0], m_in[2])


def test_every_layer_is_exported_and_tested():
    from munet.nn.modules import loss

    # CTCLoss and MultiLabelMarginLoss are tested in test_ctc_loss.py and test_multilabel_margin.py
    tested = {case[0] for case in CASES} | {"NLLLoss2d", "CTCLoss", "MultiLabelMarginLoss"}
    assert set(loss.__all__) == tested
    for name in loss.__all__:
        assert getattr(munet.nn, name) is getattr(loss, name)
