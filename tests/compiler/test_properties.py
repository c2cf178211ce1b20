"""Hypothesis: random small programs of elementwise and reduction ops, compiled == eager (values and grads)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import munet

UNARY = ["exp", "tanh", "sigmoid", "neg", "relu", "square"]
BINARY = ["add", "sub", "mul", "maximum"]


def _apply(program, x, w):
    values = [x, w]
    for kind, name, i, j in program:
        a, b = values[i % len(values)], values[j % len(values)]
        if kind == "unary":
            values.append(getattr(munet, name)(a) if name != "square" else a * a)
        elif kind == "binary":
            values.append(getattr(munet, name)(a, b))
        else:
            values.append(a.sum(dim=1, keepdim=True) if name == "sum" else a.mean(dim=0, keepdim=True))
    return sum((v.sum() for v in values[2:]), (x * w).sum())


op = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(UNARY), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("binary"), st.sampled_from(BINARY), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("reduce"), st.sampled_from(["sum", "mean"]), st.integers(0, 9), st.integers(0, 9)),
)


@settings(max_examples=25, deadline=None)
@given(program=st.lists(op, min_size=1, max_size=6), seed=st.integers(0, 1000))
def test_random_programs_forward_and_gradients(program, seed):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((3, 4)).astype(np.float32) * 0.5
    ws = rng.standard_normal((3, 4)).astype(np.float32) * 0.5

    def make_step(w):
        def step(x):
            loss = _apply(program, x, w)
            loss.backward()
            return loss

        return step

    w1 = munet.tensor(ws, requires_grad=True)
    eager = make_step(w1)(munet.tensor(xs))
    w2 = munet.tensor(ws, requires_grad=True)  # a parameter met while tracing: state, its grad written back
    compiled = munet.compile(make_step(w2))(munet.tensor(xs))
    np.testing.assert_allclose(compiled.detach().numpy(), eager.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w2.grad.numpy(), w1.grad.numpy(), rtol=1e-5, atol=1e-6)
