"""Comparing a munet layer with the same torch layer: state, repr, forward and gradients.

``compare(name, args, kwargs, *inputs)`` builds ``torch.nn.<name>`` and ``munet.nn.<name>``
with the same arguments, copies torch's state dict into munet's, and checks state-dict
keys/shapes/dtypes, ``repr``, the forward output, the input gradients and every parameter
gradient (and, after the forward, every buffer, so running statistics are covered).
"""

from __future__ import annotations

import numpy as np
import torch

import munet
from tests.reference import as_float64, assert_close_with_reference, float64_copy, to_numpy, to_torch


def make_pair(name: str, args=(), kwargs=None, dtype: str = "float32"):
    kwargs = kwargs or {}
    t_layer = getattr(torch.nn, name)(*args, **kwargs)
    m_layer = getattr(munet.nn, name)(*args, **kwargs)
    if dtype == "float64":
        t_layer.double()
        m_layer.double()
    copy_state(m_layer, t_layer)
    return m_layer, t_layer


def copy_state(m_layer, t_layer) -> None:
    state = {k: munet.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()}
    m_layer.load_state_dict(state)


def assert_same_structure(m_layer, t_layer) -> None:
    t_state, m_state = t_layer.state_dict(), m_layer.state_dict()
    assert list(m_state) == list(t_state), f"state_dict keys {list(m_state)} != {list(t_state)}"
    for k in t_state:
        assert tuple(m_state[k].shape) == tuple(t_state[k].shape), f"{k}: shape differs"
        assert m_state[k].dtype.name == str(t_state[k].dtype).replace("torch.", ""), f"{k}: dtype differs"
    assert [n for n, _ in m_layer.named_parameters()] == [n for n, _ in t_layer.named_parameters()]
    assert repr(m_layer) == repr(t_layer).replace("torch.", ""), f"{m_layer!r} != {t_layer!r}"


def _inputs(inputs):
    m_in, t_in = [], []
    for x in inputs:
        if isinstance(x, np.ndarray):
            t = to_torch(x)
            m = munet.tensor(x)
            if x.dtype.kind == "f":
                t.requires_grad_(True)
                m.requires_grad_(True)
            m_in.append(m)
            t_in.append(t)
        else:
            m_in.append(x)
            t_in.append(x)
    return m_in, t_in


def run_both(
    m_layer,
    t_layer,
    *inputs,
    forward_kwargs=None,
    rtol=None,
    atol=None,
    grad_rtol=None,
    grad_atol=None,
    float64_reference=False,
):
    """Forward and backward through both layers; compare outputs, input/parameter grads and buffers.

    ``float64_reference=True``: a float64 copy of torch's layer runs too, on float64 copies of the
    inputs, and float32 results are compared by ``assert_close_to_reference`` instead of the tolerances.
    """
    forward_kwargs = forward_kwargs or {}
    r_layer = float64_copy(t_layer) if float64_reference else None  # before a forward updates buffers
    m_in, t_in = _inputs(inputs)
    t_kwargs = {k: to_torch(v) if isinstance(v, np.ndarray) else v for k, v in forward_kwargs.items()}
    m_kwargs = {k: munet.tensor(v) if isinstance(v, np.ndarray) else v for k, v in forward_kwargs.items()}
    t_out = t_layer(*t_in, **t_kwargs)
    m_out = m_layer(*m_in, **m_kwargs)
    r_in = r_out = None
    if float64_reference:
        _, r_in = _inputs([as_float64(x) for x in inputs])
        r_out = r_layer(
            *r_in, **{k: to_torch(as_float64(v)) if isinstance(v, np.ndarray) else v for k, v in forward_kwargs.items()}
        )
    assert_close_with_reference(m_out, t_out, r_out, rtol, atol)
    r_buffers = dict(r_layer.named_buffers()) if float64_reference else {}
    for (name, mb), (_, tb) in zip(m_layer.named_buffers(), t_layer.named_buffers()):
        assert_close_with_reference(mb, tb, r_buffers.get(name), rtol, atol, what=f"buffer {name}")
    t_first, m_first = _first(t_out), _first(m_out)
    if not t_first.requires_grad:
        return m_out, t_out
    upstream = np.random.default_rng(7).standard_normal(tuple(t_first.shape))
    t_first.backward(to_torch(upstream).to(t_first.dtype))
    m_first.backward(munet.tensor(upstream).to(m_first.dtype))
    if float64_reference:
        _first(r_out).backward(torch.from_numpy(upstream))
    grad_rtol, grad_atol = grad_rtol or rtol, grad_atol or atol
    for i, (m, t) in enumerate(zip(m_in, t_in)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            assert m.grad is not None, f"input {i}: munet computed no gradient"
            r_grad = r_in[i].grad if float64_reference else None
            assert_close_with_reference(m.grad, t.grad, r_grad, grad_rtol, grad_atol, what=f"grad of input {i}")
    t_params = dict(t_layer.named_parameters())
    r_params = dict(r_layer.named_parameters()) if float64_reference else {}
    for name, p in m_layer.named_parameters():
        tp = t_params[name]
        if tp.grad is None:
            assert p.grad is None or not np.any(to_numpy(p.grad)), f"{name}: torch has no gradient"
            continue
        assert p.grad is not None, f"{name}: munet computed no gradient"
        r_grad = r_params[name].grad if float64_reference else None
        assert_close_with_reference(p.grad, tp.grad, r_grad, grad_rtol, grad_atol, what=f"grad of {name}")
    return m_out, t_out


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def compare(name, args, kwargs, *inputs, dtype="float32", modes=("train", "eval"), **tol):
    """Build both layers, check structure, then run both in each mode (fresh layers per mode)."""
    for mode in modes:
        m_layer, t_layer = make_pair(name, args, kwargs, dtype)
        assert_same_structure(m_layer, t_layer)
        m_layer.train(mode == "train")
        t_layer.train(mode == "train")
        run_both(m_layer, t_layer, *[x.astype(dtype) if _floating(x) else x for x in inputs], **tol)


def _floating(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind == "f"


def assert_uniform(t, bound: float) -> None:
    """Values look like U(-bound, bound): inside the bounds, spread to near both ends."""
    arr = to_numpy(t).reshape(-1)
    assert np.all(np.abs(arr) <= bound * (1 + 1e-6)), f"values outside +-{bound}"
    if arr.size >= 200:
        assert arr.min() < -0.8 * bound and arr.max() > 0.8 * bound, "values do not fill the uniform range"
        assert abs(arr.std() - bound / np.sqrt(3)) < 0.15 * bound / np.sqrt(3), "std differs from a uniform's"
