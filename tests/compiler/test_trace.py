"""munet/compiler/trace.py: in-place ops under munet.compile take eager's path, checks included."""

import pytest

import munet


def _leaf():
    return munet.tensor([1.0, 2.0, 3.0], requires_grad=True)


def test_inplace_on_a_view_of_a_leaf_raises_under_compile_as_in_eager():
    w = _leaf()
    x = munet.tensor([2.0, 2.0])

    def step(x):
        v = w[:2]
        v.mul_(x)
        return v.sum()

    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        step(x)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        munet.compile(step)(x)


def test_inplace_on_a_leaf_raises_under_compile_as_in_eager():
    w = _leaf()

    def step(x):
        w.add_(x)
        return w.sum()

    x = munet.tensor([1.0, 1.0, 1.0])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        step(x)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        munet.compile(step)(x)


def test_inplace_on_a_view_of_a_leaf_under_no_grad_compiles_and_matches_eager():
    def make_step(w):
        def step(x):
            with munet.no_grad():
                w[:2].mul_(x)
            return w * 1

        return step

    x = munet.tensor([2.0, 3.0])
    eager_w, compiled_w = _leaf(), _leaf()
    make_step(eager_w)(x)
    munet.compile(make_step(compiled_w))(x)
    assert compiled_w.tolist() == eager_w.tolist() == [2.0, 6.0, 3.0]
