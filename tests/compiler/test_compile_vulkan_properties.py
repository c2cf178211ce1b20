"""Hypothesis on vulkan: random programs of elementwise ops, broadcasts, transposes and reductions,
compiled (fused into generated WGSL) == eager on the device, values and gradients.

Operands are (4, 4) so transposes keep the shape and a transposed read is a strided load of the
fused kernel; a (4,) row broadcasts. Tolerance as in test_compile_vulkan.py: fused kernels do
the eager kernels' arithmetic, up to the shader compiler's rewriting of ``exp`` of a product.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import munet

UNARY = {
    "exp": lambda a: (a * 0.5).exp(),
    "tanh": munet.tanh,
    "neg": lambda a: -a,
    "relu": munet.relu,
    "sqrt": lambda a: (a.abs() + 0.25).sqrt(),
    "log": lambda a: (a * a + 1.0).log(),
    "transpose": lambda a: a.t(),
    "clamp_where": lambda a: munet.where(a > 0.3, a, a * 0.1),
}
BINARY = {
    "add": munet.add,
    "sub": munet.sub,
    "mul": munet.mul,
    "div": lambda a, b: a / (b.abs() + 0.5),
    "maximum": munet.maximum,
}
REDUCE = {
    "sum_rows": lambda a: a.sum(dim=-1, keepdim=True),
    "mean_cols": lambda a: a.mean(dim=0),  # a (4,) row: broadcasts in later ops
    "amax_rows": lambda a: a.amax(dim=-1, keepdim=True),
}


def _apply(program, x, w):
    values = [x, w]
    for kind, name, i, j in program:
        a, b = values[i % len(values)], values[j % len(values)]
        if kind == "unary":
            values.append(UNARY[name](a))
        elif kind == "binary":
            values.append(BINARY[name](a, b))
        else:
            values.append(REDUCE[name](a))
    return sum((v.sum() for v in values[2:]), (x * w).sum())


op = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY)), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("reduce"), st.sampled_from(sorted(REDUCE)), st.integers(0, 9), st.integers(0, 9)),
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # the device
@given(program=st.lists(op, min_size=2, max_size=7), seed=st.integers(0, 1000))
def test_random_programs_forward_and_gradients_on_vulkan(vulkan, program, seed):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((4, 4)).astype(np.float32) * 0.5
    ws = rng.standard_normal((4, 4)).astype(np.float32) * 0.5

    def make_step(w):
        def step(x):
            loss = _apply(program, x, w)
            loss.backward()
            return loss

        return step

    w1 = munet.tensor(ws).to(vulkan).requires_grad_()
    eager = make_step(w1)(munet.tensor(xs).to(vulkan))
    w2 = munet.tensor(ws).to(vulkan).requires_grad_()
    compiled = munet.compile(make_step(w2))
    got = compiled(munet.tensor(xs).to(vulkan))
    assert compiled.stats()["backend"] == "vulkan" and compiled.stats()["fallback"] is None
    np.testing.assert_allclose(got.detach().cpu().numpy(), eager.detach().cpu().numpy(), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(w2.grad.cpu().numpy(), w1.grad.cpu().numpy(), rtol=2e-5, atol=1e-6)
