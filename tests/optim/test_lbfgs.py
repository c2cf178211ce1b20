"""munet.optim.LBFGS against torch.optim.LBFGS: parameters, returned losses and evaluation
counts after several steps on least squares and Rosenbrock, with and without the strong-Wolfe
line search; state_dict layout and resuming from it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
from tests.reference import to_torch

# torch.optim.LBFGS itself calls float() on the closure's loss.
pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")


def _least_squares(lib, params):
    """Mean squared residual of a linear model ``x @ w.T + b`` on fixed random data."""
    r = np.random.default_rng(11)
    x = r.standard_normal((12, 4))
    y = r.standard_normal((12, 3))
    w, b = params
    x_t = lib.tensor(x, dtype=w.dtype)
    y_t = lib.tensor(y, dtype=w.dtype)
    diff = x_t @ w.T + b - y_t
    return (diff * diff).mean()


def _rosenbrock(lib, params):
    (p,) = params
    return (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2


def _logistic(lib, params):
    """L2-regularized logistic regression on separable data (its line searches zoom a lot)."""
    r = np.random.default_rng(2)
    x = r.standard_normal((20, 3))
    y = (x @ np.array([2.0, -1.0, 0.5]) > 0).astype(float)
    (w,) = params
    z = lib.tensor(x, dtype=w.dtype) @ w
    return (lib.nn.functional.softplus(z) - lib.tensor(y, dtype=w.dtype) * z).mean() + 1e-3 * (w * w).sum()


def _quartic(lib, params):
    (p,) = params
    return ((p - 1) ** 4).sum() + 0.01 * (p * p).sum()


PROBLEMS = {
    "least_squares": (_least_squares, lambda r: [r.standard_normal((3, 4)), r.standard_normal(3)]),
    "rosenbrock": (_rosenbrock, lambda r: [np.array([-1.5, 2.0])]),
    "logistic": (_logistic, lambda r: [r.standard_normal(3)]),
    "quartic": (_quartic, lambda r: [3 * r.standard_normal(4)]),
}


def _run(lib, problem: str, dtype: str, steps: int, **options):
    """Parameters, returned losses and (func_evals, n_iter) after each of ``steps`` steps."""
    fn, init = PROBLEMS[problem]
    params = [lib.tensor(a.astype(dtype), requires_grad=True) for a in init(np.random.default_rng(5))]
    opt = lib.optim.LBFGS(params, **options)

    def closure():
        opt.zero_grad()
        loss = fn(lib, params)
        loss.backward()
        return loss

    history = []
    for _ in range(steps):
        loss = opt.step(closure)
        state = opt.state[params[0]]
        history.append(
            (
                [p.detach().numpy().copy() for p in params],
                float(loss),
                (state["func_evals"], state["n_iter"]),
            )
        )
    return history, opt, params, closure


# Least squares is well conditioned: every option set, float64 and float32.
LEAST_SQUARES_OPTIONS = [
    {},
    {"line_search_fn": "strong_wolfe"},
    {"lr": 0.1},
    {"lr": 0.5, "line_search_fn": "strong_wolfe", "history_size": 3, "max_iter": 7},
    {"max_iter": 4, "max_eval": 6, "history_size": 2},
]
# Rosenbrock amplifies rounding (with lr=1 and no line search a 1e-12 change of the start moves
# the third step by 1e-5), so it runs in float64 with option sets whose trajectories are stable.
ROSENBROCK_OPTIONS = [
    {"line_search_fn": "strong_wolfe"},
    {"lr": 0.5, "line_search_fn": "strong_wolfe", "history_size": 3, "max_iter": 7},
    {"lr": 0.5, "max_iter": 5},
    {"max_iter": 4, "max_eval": 6, "history_size": 2},
]
CASES = (
    [("least_squares", o, dtype) for o in LEAST_SQUARES_OPTIONS for dtype in ("float64", "float32")]
    + [("rosenbrock", o, "float64") for o in ROSENBROCK_OPTIONS]
    # The line search runs out of evaluations (float64 only: its cubic fit is ill-conditioned here, and
    # a 1-ulp difference of a float32 loss flips the sign of the discriminant).
    + [("least_squares", {"lr": 0.01, "max_eval": 2, "line_search_fn": "strong_wolfe"}, "float64")]
    # Large initial steps: the strong-Wolfe zoom phase, its insufficient-progress safeguard.
    + [("logistic", {"lr": 100, "line_search_fn": "strong_wolfe"}, "float64")]
    + [("quartic", {"lr": 20, "line_search_fn": "strong_wolfe"}, "float64")]
    + [("rosenbrock", {"lr": 30, "line_search_fn": "strong_wolfe"}, "float64")]
)  # fmt: skip
TOL = {"float64": 1e-8, "float32": 1e-4}


def _case_id(case) -> str:
    problem, options, dtype = case
    return "-".join([problem, ",".join(f"{k}={v}" for k, v in options.items()) or "defaults", dtype])


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_steps_match_torch(case):
    problem, options, dtype = case
    tol = TOL[dtype]
    steps = 3
    expected, *_ = _run(torch, problem, dtype, steps, **options)
    actual, *_ = _run(munet, problem, dtype, steps, **options)
    for i, ((t_params, t_loss, t_counts), (m_params, m_loss, m_counts)) in enumerate(zip(expected, actual)):
        if dtype == "float64":  # float32 rounding can move a tolerance-based stop by an iteration
            assert m_counts == t_counts, f"step {i}: (func_evals, n_iter) {m_counts} != {t_counts}"
        np.testing.assert_allclose(m_loss, t_loss, rtol=tol, atol=tol, err_msg=f"step {i}: loss")
        for j, (m, t) in enumerate(zip(m_params, t_params)):
            np.testing.assert_allclose(m, t, rtol=tol, atol=tol, err_msg=f"step {i}: parameter {j}")


def test_defaults_and_state_dict_layout_match_torch():
    _, t_opt, *_ = _run(torch, "least_squares", "float64", 2, line_search_fn="strong_wolfe")
    _, m_opt, *_ = _run(munet, "least_squares", "float64", 2, line_search_fn="strong_wolfe")
    t_sd, m_sd = t_opt.state_dict(), m_opt.state_dict()
    assert m_sd["param_groups"] == t_sd["param_groups"]
    assert list(m_sd["state"]) == list(t_sd["state"]) == [0]
    t_state, m_state = t_sd["state"][0], m_sd["state"][0]
    assert sorted(m_state) == sorted(t_state)
    for key in ("func_evals", "n_iter"):
        assert m_state[key] == t_state[key]
    for key in ("d", "prev_flat_grad"):
        np.testing.assert_allclose(m_state[key].numpy(), t_state[key].numpy(), rtol=1e-9, atol=1e-12)
    assert len(m_state["old_dirs"]) == len(t_state["old_dirs"])
    for m, t in zip(m_state["old_stps"], t_state["old_stps"]):
        np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(float(m_state["H_diag"]), float(t_state["H_diag"]), rtol=1e-9)
    defaults = munet.optim.LBFGS([munet.zeros(2, requires_grad=True)]).defaults
    assert defaults == torch.optim.LBFGS([torch.zeros(2, requires_grad=True)]).defaults
    assert defaults["max_eval"] == 25


def test_resume_from_state_dict_continues_identically():
    _, opt, params, closure = _run(munet, "rosenbrock", "float64", 1, line_search_fn="strong_wolfe")
    saved = opt.state_dict()
    clone = [munet.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    resumed = munet.optim.LBFGS(clone, line_search_fn="strong_wolfe")
    resumed.load_state_dict(saved)

    def closure2():
        resumed.zero_grad()
        loss = _rosenbrock(munet, clone)
        loss.backward()
        return loss

    opt.step(closure)
    resumed.step(closure2)
    np.testing.assert_array_equal(clone[0].detach().numpy(), params[0].detach().numpy())
    assert resumed.state[clone[0]]["n_iter"] == opt.state[params[0]]["n_iter"]


def test_converged_gradient_returns_without_iterating():
    p = munet.tensor([1.0, 1.0], dtype=munet.float64, requires_grad=True)
    opt = munet.optim.LBFGS([p])

    def closure():
        opt.zero_grad()
        loss = _rosenbrock(munet, [p])
        loss.backward()
        return loss

    assert float(opt.step(closure)) == 0.0
    assert opt.state[p] == {"func_evals": 1, "n_iter": 0}


def test_parameter_without_grad_is_treated_as_zero_gradient():
    used = munet.tensor([0.5], dtype=munet.float64, requires_grad=True)
    unused = munet.tensor([3.0], dtype=munet.float64, requires_grad=True)
    t_used = to_torch(used.detach().numpy()).requires_grad_(True)
    t_unused = to_torch(unused.detach().numpy()).requires_grad_(True)
    for lib, ps in ((munet, [used, unused]), (torch, [t_used, t_unused])):
        opt = lib.optim.LBFGS(ps, max_iter=5)

        def closure(opt=opt, ps=ps):
            opt.zero_grad()
            loss = ((ps[0] - 2) ** 2).sum()
            loss.backward()
            return loss

        opt.step(closure)
    np.testing.assert_allclose(used.detach().numpy(), t_used.detach().numpy(), rtol=1e-12)
    assert float(unused) == 3.0


def test_errors():
    p = munet.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="per-parameter options"):
        munet.optim.LBFGS([{"params": [p]}, {"params": [munet.zeros(1, requires_grad=True)]}])
    with pytest.raises(ValueError, match="Invalid learning rate"):
        munet.optim.LBFGS([p], lr=-1)
    with pytest.raises(RuntimeError, match="closure"):
        munet.optim.LBFGS([p]).step(None)
    opt = munet.optim.LBFGS([p], line_search_fn="backtracking")

    def closure():
        opt.zero_grad()
        loss = ((p - 1) ** 2).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only line_search_fn='strong_wolfe' is supported, got 'backtracking'"):
        opt.step(closure)
