"""The distributions under test: parameters drawn at random, built the same way in munet and torch."""

import numpy as np


def _pos(rng, shape, low=0.5, high=3.0):
    return rng.uniform(low, high, size=shape)


def _probs(rng, shape):
    p = rng.uniform(0.1, 1.0, size=shape)
    return p / p.sum(-1, keepdims=True)


def _ordered(low, width):
    return {"low": low, "high": low + width}


def _spd(rng, shape, n):
    a = rng.normal(size=tuple(shape) + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _tril(rng, shape, n):
    return np.linalg.cholesky(_spd(rng, shape, n))


# name -> (parameter factory(rng, batch) -> dict of arrays, fixed keyword arguments)
CASES = {
    "Normal": (lambda r, b: {"loc": r.normal(size=b), "scale": _pos(r, b)}, {}),
    "LogNormal": (lambda r, b: {"loc": r.normal(size=b), "scale": _pos(r, b, 0.3, 1.0)}, {}),
    "Uniform": (lambda r, b: _ordered(r.normal(size=b), _pos(r, b)), {}),
    "Exponential": (lambda r, b: {"rate": _pos(r, b)}, {}),
    "Laplace": (lambda r, b: {"loc": r.normal(size=b), "scale": _pos(r, b)}, {}),
    "Cauchy": (lambda r, b: {"loc": r.normal(size=b), "scale": _pos(r, b)}, {}),
    "Gamma": (lambda r, b: {"concentration": _pos(r, b), "rate": _pos(r, b)}, {}),
    "Beta": (lambda r, b: {"concentration1": _pos(r, b), "concentration0": _pos(r, b)}, {}),
    "Dirichlet": (lambda r, b: {"concentration": _pos(r, tuple(b) + (4,))}, {}),
    "StudentT": (lambda r, b: {"df": _pos(r, b, 2.5, 8.0), "loc": r.normal(size=b), "scale": _pos(r, b)}, {}),
    "Bernoulli": (lambda r, b: {"probs": r.uniform(0.1, 0.9, size=b)}, {}),
    "BernoulliLogits": (lambda r, b: {"logits": r.normal(size=b)}, {}),
    "Categorical": (lambda r, b: {"probs": _probs(r, tuple(b) + (5,))}, {}),
    "CategoricalLogits": (lambda r, b: {"logits": r.normal(size=tuple(b) + (5,))}, {}),
    "OneHotCategorical": (lambda r, b: {"probs": _probs(r, tuple(b) + (4,))}, {}),
    "Multinomial": (lambda r, b: {"probs": _probs(r, tuple(b) + (4,))}, {"total_count": 6}),
    "Binomial": (lambda r, b: {"probs": r.uniform(0.1, 0.9, size=b)}, {"total_count": 7}),
    "Poisson": (lambda r, b: {"rate": _pos(r, b, 0.5, 20.0)}, {}),
    "MultivariateNormal": (lambda r, b: {"loc": r.normal(size=tuple(b) + (3,)), "scale_tril": _tril(r, b, 3)}, {}),
    "MultivariateNormalCov": (
        lambda r, b: {"loc": r.normal(size=tuple(b) + (3,)), "covariance_matrix": _spd(r, b, 3)},
        {},
    ),
    "MultivariateNormalPrec": (
        lambda r, b: {"loc": r.normal(size=tuple(b) + (3,)), "precision_matrix": _spd(r, b, 3)},
        {},
    ),
    "LowRankMultivariateNormal": (
        lambda r, b: {
            "loc": r.normal(size=tuple(b) + (4,)),
            "cov_factor": r.normal(size=tuple(b) + (4, 2)),
            "cov_diag": _pos(r, tuple(b) + (4,)),
        },
        {},
    ),
    "RelaxedBernoulli": (lambda r, b: {"probs": r.uniform(0.1, 0.9, size=b)}, {"temperature": 0.7}),
    "RelaxedOneHotCategorical": (lambda r, b: {"probs": _probs(r, tuple(b) + (4,))}, {"temperature": 0.7}),
    "Chi2": (lambda r, b: {"df": _pos(r, b, 1.0, 6.0)}, {}),
    "ContinuousBernoulli": (lambda r, b: {"probs": r.uniform(0.1, 0.9, size=b)}, {}),
    "ContinuousBernoulliLogits": (lambda r, b: {"logits": r.normal(size=b)}, {}),
    "FisherSnedecor": (lambda r, b: {"df1": _pos(r, b, 1.0, 6.0), "df2": _pos(r, b, 9.0, 14.0)}, {}),
    "Geometric": (lambda r, b: {"probs": r.uniform(0.2, 0.9, size=b)}, {}),
    "GeometricLogits": (lambda r, b: {"logits": r.normal(size=b)}, {}),
    "Gumbel": (lambda r, b: {"loc": r.normal(size=b), "scale": _pos(r, b)}, {}),
    "HalfCauchy": (lambda r, b: {"scale": _pos(r, b)}, {}),
    "HalfNormal": (lambda r, b: {"scale": _pos(r, b)}, {}),
    "InverseGamma": (lambda r, b: {"concentration": _pos(r, b, 4.5, 8.0), "rate": _pos(r, b)}, {}),
    "Kumaraswamy": (lambda r, b: {"concentration1": _pos(r, b), "concentration0": _pos(r, b)}, {}),
    "LKJCholesky": (lambda r, b: {"concentration": _pos(r, b)}, {"dim": 3}),
    "LogisticNormal": (lambda r, b: {"loc": r.normal(size=tuple(b) + (3,)), "scale": _pos(r, tuple(b) + (3,))}, {}),
    "NegativeBinomial": (lambda r, b: {"total_count": _pos(r, b, 1.0, 6.0), "probs": r.uniform(0.1, 0.8, size=b)}, {}),
    "NegativeBinomialLogits": (lambda r, b: {"total_count": _pos(r, b, 1.0, 6.0), "logits": r.normal(size=b)}, {}),
    "OneHotCategoricalStraightThrough": (lambda r, b: {"probs": _probs(r, tuple(b) + (4,))}, {}),
    "Pareto": (lambda r, b: {"scale": _pos(r, b), "alpha": _pos(r, b, 4.5, 8.0)}, {}),
    "VonMises": (lambda r, b: {"loc": r.normal(size=b), "concentration": _pos(r, b, 0.5, 6.0)}, {}),
    "Weibull": (lambda r, b: {"scale": _pos(r, b), "concentration": _pos(r, b, 0.7, 3.0)}, {}),
    "Wishart": (lambda r, b: {"df": _pos(r, b, 4.0, 8.0), "scale_tril": _tril(r, b, 3)}, {}),
}

_TORCH_NAME = {
    "BernoulliLogits": "Bernoulli",
    "CategoricalLogits": "Categorical",
    "MultivariateNormalCov": "MultivariateNormal",
    "MultivariateNormalPrec": "MultivariateNormal",
    "ContinuousBernoulliLogits": "ContinuousBernoulli",
    "GeometricLogits": "Geometric",
    "NegativeBinomialLogits": "NegativeBinomial",
}


def class_name(case: str) -> str:
    return _TORCH_NAME.get(case, case)


def build(module, lib, case: str, params: dict, dtype, requires_grad: bool = False):
    """The distribution ``case`` of ``module`` (munet.distributions or torch.distributions) and its leaf tensors."""
    kwargs = {k: lib.tensor(v, dtype=dtype) if k == "temperature" else v for k, v in CASES[case][1].items()}
    leaves = {k: lib.tensor(v, dtype=dtype, requires_grad=requires_grad) for k, v in params.items()}
    return getattr(module, class_name(case))(**kwargs, **leaves), leaves
