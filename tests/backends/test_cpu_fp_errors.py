"""munet/backends/cpu/fp_errors.py: inside ``call_ignoring`` NumPy reports no floating-point error;
outside it, and after it (also after an exception), the caller's own error state is back."""

import threading
import warnings

import numpy as np
import pytest

import munet
from munet.backends.cpu.fp_errors import call_ignoring

BIG = np.full(4, 3e38, np.float32)


def test_errors_are_ignored_inside_and_the_state_is_restored():
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf(call_ignoring(np.add, BIG, BIG)).all()
        assert np.isnan(call_ignoring(np.divide, np.zeros(2), np.zeros(2))).all()
        with pytest.raises(RuntimeWarning, match="overflow"):
            np.add(BIG, BIG)  # the default "warn" state, back after the call
    assert np.geterr() == before


def test_a_callers_own_errstate_is_kept_around_the_call():
    with np.errstate(over="raise"):
        assert np.isinf(call_ignoring(np.add, BIG, BIG)).all()
        with pytest.raises(FloatingPointError):
            np.add(BIG, BIG)
        assert np.isinf(call_ignoring(np.multiply, BIG, BIG)).all()  # the cached state follows the caller's
    with np.errstate(over="ignore", divide="raise"):
        assert np.isinf(call_ignoring(np.divide, np.ones(2), np.zeros(2))).all()
        with pytest.raises(FloatingPointError):
            np.divide(np.ones(2), np.zeros(2))


def test_an_exception_inside_restores_the_state():
    def fails(x):
        np.add(x, x)
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        call_ignoring(fails, BIG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            np.add(BIG, BIG)


def test_threads_keep_their_own_state():
    seen = []

    def worker():
        with np.errstate(over="raise"):
            call_ignoring(np.add, BIG, BIG)
            try:
                np.add(BIG, BIG)
            except FloatingPointError:
                seen.append("raised")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == ["raised"]
    assert np.geterr()["over"] == "warn"


def test_eager_ops_overflow_quietly_as_in_pytorch():
    x = munet.tensor([3e38, 1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = (x * 10.0).exp()  # overflow in mul and in exp
        z = x / munet.tensor([1.0, 1.0, 0.0])  # 0 / 0
    assert np.isinf(y.numpy()[0]) and np.isnan(z.numpy()[2])


@pytest.mark.parametrize("state", [{}, {"over": "raise", "invalid": "raise"}], ids=["default", "callers"])
def test_inline_paths_ignore_errors_and_restore_the_state(state):
    # the rendered formulas and the small matmul switch the state inline when it is NumPy's default,
    # through ignore() when the caller set their own: quiet either way, the caller's state back after
    big = munet.tensor(np.full((4, 4), 3e38, np.float32))
    with warnings.catch_warnings(), np.errstate(**state):
        warnings.simplefilter("error")
        before = np.geterr()
        assert np.isinf((big * big).numpy()).all() and np.isinf((big @ big).numpy()).all()
        assert np.isinf(big.exp().numpy()).all()
        assert np.geterr() == before
        with pytest.raises((RuntimeWarning, FloatingPointError)):
            np.multiply(BIG, BIG)
