"""Anomaly mode: NaN gradients name the node (as PyTorch's message), errors show the forward stack."""

import threading
import warnings

import pytest
import torch

import munet
from munet.autograd import detect_anomaly, is_anomaly_enabled, set_detect_anomaly


def nan_message(mod, anomaly):
    x = mod.tensor([-1.0, 1.0], requires_grad=True)
    with anomaly():
        y = mod.sqrt(x) * 2.0  # sqrt(-1) is nan: SqrtBackward0 returns nan
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(RuntimeError) as err:
                y.sum().backward()
    return str(err.value), [str(w.message) for w in caught]


def test_nan_gradient_raises_with_pytorchs_message():
    m_msg, m_warn = nan_message(munet, munet.autograd.detect_anomaly)
    t_msg, t_warn = nan_message(torch, torch.autograd.detect_anomaly)
    assert m_msg == t_msg == "Function 'SqrtBackward0' returned nan values in its 0th output."
    assert any("Error detected in SqrtBackward0" in w and "test_anomaly.py" in w for w in m_warn), m_warn
    assert any("Error detected in SqrtBackward0" in w for w in t_warn)


def test_no_check_without_anomaly_mode_or_with_check_nan_false():
    x = munet.tensor([-1.0, 1.0], requires_grad=True)
    munet.sqrt(x).sum().backward()
    assert bool(x.grad.isnan().any())
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        ctx = detect_anomaly(check_nan=False)
    with ctx:
        x.grad = None
        munet.sqrt(x).sum().backward()
    assert bool(x.grad.isnan().any())


def test_error_in_backward_shows_forward_stack():
    a = munet.ones(2, requires_grad=True)
    with detect_anomaly():
        b = a * 2
        c = b * b
        b.mul_(2)  # invalidates the tensor MulBackward0 of c saved
        with pytest.warns(UserWarning, match="(?s)Error detected in MulBackward0.*c = b \\* b"):
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                c.sum().backward()


def test_set_detect_anomaly_and_decorator():
    assert not is_anomaly_enabled()
    set_detect_anomaly(True)
    assert is_anomaly_enabled()
    set_detect_anomaly(False)
    assert not is_anomaly_enabled()
    with set_detect_anomaly(True):
        assert is_anomaly_enabled()
    assert not is_anomaly_enabled()

    with pytest.warns(UserWarning):
        deco = detect_anomaly()

    @deco
    def inside():
        return is_anomaly_enabled()

    assert inside() and not is_anomaly_enabled()


def test_torch_level_switches():
    munet.set_anomaly_enabled(True, check_nan=False)
    try:
        assert munet.is_anomaly_enabled() and not munet.is_anomaly_check_nan_enabled()
        x = munet.tensor([-1.0], requires_grad=True)
        munet.sqrt(x).sum().backward()  # check_nan=False: no error
    finally:
        munet.set_anomaly_enabled(False)
    assert not munet.is_anomaly_enabled() and munet.is_anomaly_check_nan_enabled()


def test_anomaly_mode_is_per_thread():
    seen = []
    with pytest.warns(UserWarning):
        with detect_anomaly():
            t = threading.Thread(target=lambda: seen.append(is_anomaly_enabled()))
            t.start()
            t.join()
            assert is_anomaly_enabled()
    assert seen == [False]
