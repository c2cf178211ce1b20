"""Comparing MuNet with PyTorch (the numerical reference) on the same random inputs.

``check(munet_fn, torch_fn, *inputs)`` runs both functions on equal inputs, compares the
outputs, then backpropagates the same random upstream gradient through both and compares
the input gradients. Inputs are NumPy arrays (floating arrays get ``requires_grad``) or
plain Python values passed through unchanged.

Default tolerances: float64 rtol=1e-7 atol=1e-9; float32 rtol=1e-5 atol=1e-6;
float16 / bfloat16 rtol=atol=1e-2 (bfloat16 2e-2). A comparison that needs more than these (deep
stacks, long accumulations, optimizer steps) does not widen them: ``assert_close_to_reference``
derives its bound from a float64 run of the same computation, so it holds on any CPU's kernels.

Devices: ``check`` runs MuNet on ``device=`` (default :data:`DEVICE`, which the ``munet_device``
fixture in tests/conftest.py sets from ``pytest --munet-device=vulkan`` or
``MUNET_TEST_DEVICE``; :func:`on_device` sets it in a block). The inputs, their gradients'
upstream and strided layouts are made on that device; the PyTorch reference stays on the
CPU. On a device other than cpu, float32 tolerances are at least :data:`DEVICE_TOL` (GPU math
libraries and summation orders differ by a few ulps), and a ``DeviceError`` saying the device
lacks a kernel or a dtype skips the test with that message (``docs/op_coverage.md`` lists the
missing kernels).
"""

from __future__ import annotations

import contextlib
import copy
import os

import numpy as np
import pytest
import torch

import munet

TOL = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-5, 1e-6),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}


DEVICE = os.environ.get("MUNET_TEST_DEVICE", "cpu")
DEVICE_TOL = {"float32": (1e-4, 1e-5)}
_MIXED = "expected all tensors on the same device"


@contextlib.contextmanager
def on_device(device):
    """Run the ``check`` calls inside the block on ``device``."""
    global DEVICE
    saved, DEVICE = DEVICE, str(device)
    try:
        yield
    finally:
        DEVICE = saved


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(*shape, dtype="float32", seed: int = 0) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(_np_dtype(dtype))


def _np_dtype(dtype):
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def noncontiguous(arr: np.ndarray) -> np.ndarray:
    """The same values laid out with non-unit strides (a strided slice of a bigger array)."""
    big = np.zeros(tuple(2 * n for n in arr.shape), dtype=arr.dtype)
    view = big[tuple(slice(None, None, 2) for _ in arr.shape)]
    view[...] = arr
    return view


def to_torch(x):
    """A torch tensor with the values of ``x`` (a munet tensor or NumPy array); bfloat16 kept."""
    if isinstance(x, munet.Tensor):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.uint16).astype(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.array(arr))


def to_numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype == torch.bfloat16:
            return x.float().numpy()
        return x.numpy(force=True)  # force: gradients may be ZeroTensors (e.g. sgn)
    if isinstance(x, munet.Tensor):
        arr = x.detach().cpu().numpy()
        return arr.astype(np.float32) if arr.dtype.name == "bfloat16" else arr
    return np.asarray(x)


def _on_device(x: np.ndarray, device: str):
    """``x`` as a munet tensor on ``device``, strided there when ``x`` is not C-contiguous."""
    if device == "cpu":
        # Keep the layout: munet.from_numpy shares the (possibly strided) array.
        return munet.from_numpy(x.copy() if x.flags.c_contiguous else x)
    m = munet.from_numpy(x.copy(order="C")).to(device)
    if x.flags.c_contiguous or x.size == 0:
        return m
    big = munet.zeros(*(2 * n for n in x.shape), dtype=m.dtype, device=device)
    view = big[tuple(slice(None, None, 2) for _ in x.shape)]
    view.copy_(m)
    return view


def _make_inputs(inputs, requires_grad: bool, device: str = "cpu"):
    m_in = [
        _on_device(x, device).requires_grad_(_differentiable(x, requires_grad)) if isinstance(x, np.ndarray) else x
        for x in inputs
    ]
    return m_in, _torch_inputs(inputs, requires_grad)


def _torch_inputs(inputs, requires_grad: bool) -> list:
    return [
        to_torch(x).requires_grad_(_differentiable(x, requires_grad)) if isinstance(x, np.ndarray) else x
        for x in inputs
    ]


def _differentiable(x: np.ndarray, requires_grad: bool) -> bool:
    return requires_grad and (x.dtype.kind == "f" or x.dtype.name == "bfloat16")


def assert_close(actual, expected, rtol=None, atol=None, what="output", equal_nan=True):
    """Compare a munet result with a torch result: shape, dtype and values."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), f"{what}: structure differs"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, rtol, atol, f"{what}[{i}]", equal_nan)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected or (np.isnan(actual) and np.isnan(expected)), f"{what}: {actual} != {expected}"
        return
    assert isinstance(actual, munet.Tensor), f"{what}: expected a munet.Tensor, got {type(actual).__name__}"
    assert tuple(actual.shape) == tuple(expected.shape), (
        f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    )
    t_dtype = str(expected.dtype).replace("torch.", "")
    assert actual.dtype.name == t_dtype, f"{what}: dtype {actual.dtype.name} != {t_dtype}"
    default_rtol, default_atol = TOL.get(t_dtype, (0, 0))
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    if actual.device.type != "cpu" and t_dtype in DEVICE_TOL:
        rtol, atol = max(rtol, DEVICE_TOL[t_dtype][0]), max(atol, DEVICE_TOL[t_dtype][1])
    a, e = to_numpy(actual), to_numpy(expected)
    if a.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e, err_msg=what)
    else:
        np.testing.assert_allclose(
            a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=equal_nan, err_msg=what
        )


ERROR_MULTIPLE = 4


def assert_close_to_reference(
    actual, expected, reference, what="output", multiple=ERROR_MULTIPLE, slack=0.0, condition=1.0
) -> None:
    """``actual`` is as close to the float64 ``reference`` as the trusted float32 ``expected`` is.

    For comparisons whose float32 rounding depends on the CPU (OpenBLAS and MKL pick kernels per
    CPU, so summation orders differ between AVX2 and AVX-512, Intel and AMD): long accumulations,
    cancellation, AdamW's first steps turning a near-zero gradient into a full-size update.
    ``reference`` is the same computation in float64 (PyTorch's, or MuNet's eager one where
    PyTorch has no counterpart), ``expected`` the trusted float32 result (PyTorch's, or MuNet's
    eager one), ``actual`` MuNet's float32 result under test. Over the whole tensor::

        max|actual - reference| <= multiple * max(max|expected - reference|, condition * eps * max|reference|)

    MuNet's worst error is at most ``multiple`` times the trusted implementation's own worst
    error on this tensor, measured on this machine; the floor of one rounding at the tensor's
    largest value keeps a tensor that ``expected`` happens to get exact from demanding exactness.
    A fixed rtol would instead pass on one CPU and fail on another. Integer tensors must equal
    ``expected``. ``multiple`` is 4: MuNet's and torch's float32 errors are independent samples
    of the same size, and their ratio stays below it (over 108 seeded two-layer transformer
    decoders under SkylakeX/AVX-512 and Haswell/AVX2 kernels, forward and every gradient, the
    largest ratio was 3.4). It does not hold where one element's error is amplified far beyond
    the rest (an Adam step dividing by a gradient that cancels to nearly zero) and the two
    results share no kernels: their errors on that element are then uncorrelated and their ratio
    unbounded. Compiled and eager MuNet share their matmul kernels, so theirs stay correlated.
    ``slack`` (a number or an array of ``reference``'s shape) is added to the bound element by
    element for such amplified errors, derived rather than guessed (:class:`AdamWErrorBudget`).
    ``condition`` scales the floor for results that go through a linear solve or an inverse: a
    backward-stable solve of ``A`` errs by at least one rounding of its input, which reaches the
    result multiplied by ``A``'s condition number (times the number of solves on the result's
    path). Two LAPACKs that share no kernels then err independently anywhere below that size, so
    the ratio of their errors says nothing until it is exceeded.
    """
    a, e, r = to_numpy(actual), to_numpy(expected), to_numpy(reference)
    assert a.shape == e.shape == r.shape, f"{what}: shapes {a.shape}, {e.shape} and reference {r.shape} differ"
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype} != {e.dtype}"
    if e.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e, err_msg=what)
        return
    assert r.dtype == np.float64, f"{what}: the reference must be computed in float64, got {r.dtype}"
    if not r.size:
        return
    scale = np.abs(r).max()
    trusted_error = max(np.abs(e.astype(np.float64) - r).max(), condition * np.finfo(e.dtype).eps * scale)
    errors = np.abs(a.astype(np.float64) - r)
    excess = errors - (multiple * trusted_error + slack)
    worst = np.unravel_index(np.argmax(excess), r.shape)
    assert excess[worst] <= 0, (
        f"{what}: |actual - float64 reference| = {errors[worst]:.3g} at {worst} > {multiple} x {trusted_error:.3g} "
        f"(the trusted {e.dtype} result's own max error; max |reference| {scale:.3g})"
        + (f" + slack {np.broadcast_to(slack, r.shape)[worst]:.3g}" if np.any(slack) else "")
    )


def _skip_int64_beyond_int32(t_out, device: str) -> None:
    """Skip when the expected int64 values do not fit in int32, the vulkan backend's int64."""
    for t in t_out if isinstance(t_out, (tuple, list)) else (t_out,):
        if isinstance(t, torch.Tensor) and t.dtype == torch.int64 and t.numel():
            if t.min() < -(2**31) or t.max() >= 2**31:
                pytest.skip(f"on {device}: int64 results beyond the int32 range (int64 is held as int32)")


def check(
    munet_fn,
    torch_fn,
    *inputs,
    grad: bool = True,
    rtol=None,
    atol=None,
    grad_rtol=None,
    grad_atol=None,
    seed=1,
    device=None,
    float64_reference: bool = False,
    condition: float = 1.0,
):
    """Forward (and gradients, when ``grad``) of ``munet_fn`` on ``device`` equal ``torch_fn``'s.

    ``float64_reference=True`` (for float32 results that need more than the default tolerance):
    ``torch_fn`` runs once more on float64 copies of the inputs, and every float32 output and
    gradient is compared with :func:`assert_close_to_reference` instead of ``rtol``/``atol`` (on
    a device other than cpu, with the default tolerances). ``torch_fn`` must then be free of side
    effects, as it runs twice. ``condition`` (with ``float64_reference``): the amplification of
    one input rounding through the solves on the results' paths, see :func:`assert_close_to_reference`.
    """
    device = str(device or DEVICE)
    args = (
        munet_fn,
        torch_fn,
        inputs,
        grad,
        rtol,
        atol,
        grad_rtol,
        grad_atol,
        seed,
        device,
        float64_reference,
        condition,
    )
    if device == "cpu":
        return _check(*args)
    try:
        return _check(*args)
    except munet.DeviceError as exc:
        if _MIXED in str(exc):
            pytest.skip(f"on {device}: the test makes cpu tensors inside its function ({exc})")
        pytest.skip(f"on {device}: {exc}")


def float64_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A float64 deep copy of a torch module (its own parameters and buffers): the reference run of
    :func:`assert_close_to_reference`. Copy before a forward pass updates running statistics."""
    return copy.deepcopy(module).double()


def as_float64(x):
    """A float32 NumPy array as float64; anything else unchanged."""
    return x.astype(np.float64) if isinstance(x, np.ndarray) and x.dtype == np.float32 else x


def assert_close_with_reference(m_out, t_out, r_out, rtol=None, atol=None, what="output", condition=1.0):
    """``assert_close(m_out, t_out, rtol, atol)``; where ``r_out``, the float64 run, is given, float32 results on
    the cpu are compared by ``assert_close_to_reference`` instead, and others with the default tolerances."""
    if r_out is None:
        return assert_close(m_out, t_out, rtol, atol, what)
    if isinstance(t_out, (tuple, list)):
        assert isinstance(m_out, (tuple, list)) and len(m_out) == len(t_out), f"{what}: structure differs"
        for i, outs in enumerate(zip(m_out, t_out, r_out, strict=True)):
            assert_close_with_reference(*outs, rtol, atol, f"{what}[{i}]", condition)
        return
    if not isinstance(t_out, torch.Tensor) or t_out.dtype != torch.float32 or m_out.device.type != "cpu":
        return assert_close(m_out, t_out, None, None, what)
    assert isinstance(m_out, munet.Tensor), f"{what}: expected a munet.Tensor, got {type(m_out).__name__}"
    assert_close_to_reference(m_out, t_out, r_out, what, condition=condition)


def _check(
    munet_fn, torch_fn, inputs, grad, rtol, atol, grad_rtol, grad_atol, seed, device, float64_reference, condition
):
    m_in, t_in = _make_inputs(inputs, requires_grad=grad, device=device)
    m_out = munet_fn(*m_in)
    t_out = torch_fn(*t_in)
    r_in = r_out = None
    if float64_reference:
        r_in = _torch_inputs([as_float64(x) for x in inputs], requires_grad=grad)
        r_out = torch_fn(*r_in)
    if device != "cpu":
        _skip_int64_beyond_int32(t_out, device)
    assert_close_with_reference(m_out, t_out, r_out, rtol, atol, condition=condition)
    if not grad:
        return m_out
    m_outs = m_out if isinstance(m_out, (tuple, list)) else (m_out,)
    t_outs = t_out if isinstance(t_out, (tuple, list)) else (t_out,)
    r_outs = r_out if isinstance(r_out, (tuple, list)) else (r_out,) * len(t_outs)
    m_diff, t_diff, r_diff, upstream_m = [], [], [], []
    r = rng(seed)
    for mo, to, ro in zip(m_outs, t_outs, r_outs):
        if isinstance(to, torch.Tensor) and to.requires_grad and to.dtype.is_floating_point:
            g = r.standard_normal(tuple(to.shape)).astype(np.float64)
            m_diff.append(mo)
            t_diff.append(to)
            r_diff.append(ro)
            upstream_m.append(g)
    if not t_diff:
        return m_out
    t_grads_in = [to_torch(g.astype(to_numpy(t).dtype)).to(t.dtype) for g, t in zip(upstream_m, t_diff)]
    m_grads_in = [munet.tensor(g, dtype=m.dtype, device=m.device) for g, m in zip(upstream_m, m_diff)]
    torch.autograd.backward(t_diff, t_grads_in)
    munet.autograd.backward(m_diff, m_grads_in)
    if float64_reference:
        torch.autograd.backward(r_diff, [torch.from_numpy(g).to(ro.dtype) for g, ro in zip(upstream_m, r_diff)])
    for i, (m, t) in enumerate(zip(m_in, t_in)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            if t.grad is None:
                assert m.grad is None or not np.any(to_numpy(m.grad)), f"grad of input {i}: torch has none"
                continue
            assert m.grad is not None, f"grad of input {i}: munet computed none"
            reference = r_in[i].grad if float64_reference else None
            assert_close_with_reference(
                m.grad, t.grad, reference, grad_rtol or rtol, grad_atol or atol, f"grad of input {i}", condition
            )
    return m_out


def gradcheck(fn, *inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Finite differences in float64 against munet's backward, for every floating input."""
    m_in = [
        munet.tensor(x, dtype=munet.float64, requires_grad=True) if isinstance(x, np.ndarray) else x for x in inputs
    ]
    out = fn(*m_in)
    r = rng(3)
    upstream = r.standard_normal(tuple(out.shape))
    (out * munet.tensor(upstream)).sum().backward()
    for k, x in enumerate(inputs):
        if not isinstance(x, np.ndarray):
            continue
        numeric = np.zeros(x.shape)
        flat = x.astype(np.float64).reshape(-1)
        for i in range(flat.size):
            plus, minus = flat.copy(), flat.copy()
            plus[i] += eps
            minus[i] -= eps
            args_p = [
                munet.tensor(plus.reshape(x.shape))
                if j == k
                else (munet.tensor(v, dtype=munet.float64) if isinstance(v, np.ndarray) else v)
                for j, v in enumerate(inputs)
            ]
            args_m = [
                munet.tensor(minus.reshape(x.shape))
                if j == k
                else (munet.tensor(v, dtype=munet.float64) if isinstance(v, np.ndarray) else v)
                for j, v in enumerate(inputs)
            ]
            with munet.no_grad():
                fp = (fn(*args_p).numpy() * upstream).sum()
                fm = (fn(*args_m).numpy() * upstream).sum()
            numeric.reshape(-1)[i] = (fp - fm) / (2 * eps)
        np.testing.assert_allclose(m_in[k].grad.numpy(), numeric, atol=atol, rtol=rtol, err_msg=f"gradcheck input {k}")


class AdamWErrorBudget:
    """How far from a float64 AdamW run a float32 run may be, given its gradients' errors.

    AdamW divides by ``sqrt(v)``, so where a gradient cancels to almost nothing its rounding error
    becomes a large update, and two float32 runs that share no kernels (fused C against NumPy)
    differ there by far more than ``ERROR_MULTIPLE`` times each other's error. Rather than a wider
    multiple, the check is split in two. :meth:`step` checks, after every step, that the run under
    test's gradients are as close to the float64 run's as the trusted float32 run's are
    (:func:`assert_close_to_reference`, the forward/gradient contract), and propagates their actual
    errors ``dg = |g - g64|`` through the update, element by element, to first order with exact
    bounds on the square root:

    - ``dm_t = beta1 dm_{t-1} + (1 - beta1) dg_t``, ``dv_t = beta2 dv_{t-1} + (1 - beta2)(2|g_t| dg_t + dg_t^2)``;
    - with ``m^ = m / (1 - beta1^t)``, ``v^ = v / (1 - beta2^t)``, ``d = sqrt(v^) + eps`` and
      ``dd = min(sqrt(dv^), dv^ / sqrt(v^))`` (``|sqrt(a) - sqrt(b)|`` is at most both), the update
      ``m^ / d`` moves by at most ``du = (dm^ + |m^| dd / d) / max(d - dd, eps)``, and never by
      more than twice Adam's largest update while the betas are constant:
      ``(1 - beta1) / (1 - beta1^t) * sqrt((1 - beta2^t) / (1 - beta2)) * sqrt(sum_j<t (beta1^2 / beta2)^j)``
      (Cauchy-Schwarz on the two moving averages);
    - ``dp_t = (1 - lr wd) dp_{t-1} + lr du_t``.

    :meth:`slacks` then gives, per entry of the training state, the error those gradient errors
    explain (``dp`` for a parameter, ``dm``/``dv`` for its moments), added element by element to
    the bound of :func:`assert_close_to_reference`. Elements whose gradients were accurate get
    almost none; a wrong update (or a wrong gradient, caught at its step) still fails.
    """

    def __init__(self, trusted_model, tested_model, reference_model, reference_optimizer, multiple=ERROR_MULTIPLE):
        self.trusted = dict(trusted_model.named_parameters())
        self.tested = dict(tested_model.named_parameters())
        self.reference = dict(reference_model.named_parameters())
        self.reference_model = reference_model
        self.optimizer = reference_optimizer
        self.multiple = multiple
        self.budgets: dict = {}  # parameter name -> (dm, dv, dp)
        self.betas: tuple | None = None  # None once the betas changed between steps (no cap)
        self.steps = 0

    def _group(self, param) -> dict:
        return next(g for g in self.optimizer.param_groups if any(p is param for p in g["params"]))

    def step(self) -> None:
        """After the three runs took the same step: check the tested gradients, grow the budgets."""
        self.steps += 1
        for name, p64 in self.reference.items():
            if p64.grad is None:
                continue
            g = to_numpy(p64.grad)
            tested = to_numpy(self.tested[name].grad)
            assert_close_to_reference(
                tested,
                to_numpy(self.trusted[name].grad),
                g,
                what=f"step {self.steps} {name}.grad",
                multiple=self.multiple,
            )
            self._grow(name, p64, g, np.abs(tested.astype(np.float64) - g))

    def _grow(self, name: str, p64, g, dg) -> None:
        group = self._group(p64)
        beta1, beta2 = group["betas"]
        if self.steps == 1:
            self.betas = (beta1, beta2)
        elif self.betas != (beta1, beta2):
            self.betas = None
        state = self.optimizer.state[p64]
        t = int(state["step"].item())
        dm, dv, dp = self.budgets.get(name, (0.0, 0.0, 0.0))
        dm = beta1 * dm + (1 - beta1) * dg
        dv = beta2 * dv + (1 - beta2) * (2 * np.abs(g) * dg + dg * dg)
        bc1, bc2 = 1 - beta1**t, 1 - beta2**t
        m_hat, v_hat = to_numpy(state["exp_avg"]) / bc1, to_numpy(state["exp_avg_sq"]) / bc2
        dm_hat, dv_hat = dm / bc1, dv / bc2
        root = np.sqrt(v_hat)
        d = root + group["eps"]
        with np.errstate(divide="ignore", invalid="ignore"):
            dd = np.where(root > 0, np.minimum(np.sqrt(dv_hat), dv_hat / root), np.sqrt(dv_hat))
        du = (dm_hat + np.abs(m_hat) * dd / d) / np.maximum(d - dd, group["eps"])
        if self.betas is not None:
            ratio = beta1 * beta1 / beta2
            largest = (1 - beta1) / bc1 * np.sqrt(bc2 / (1 - beta2)) * np.sqrt(sum(ratio**j for j in range(t)))
            du = np.minimum(du, 2 * largest)
        dp = (1 - group["lr"] * group["weight_decay"]) * dp + group["lr"] * du
        self.budgets[name] = (dm, dv, dp)

    def slacks(self) -> list:
        """Extra error allowed per entry of the training state, in the order of the reference
        model's ``state_dict()`` (tied names share their parameter's budget; buffers get none),
        then each optimizer state's ``exp_avg``, ``exp_avg_sq`` and ``step``."""
        by_param = {id(self.reference[name]): budget for name, budget in self.budgets.items()}
        out = [
            by_param.get(id(t), (0.0, 0.0, 0.0))[2] for t in self.reference_model.state_dict(keep_vars=True).values()
        ]
        for param in self.optimizer.state:
            dm, dv, _ = by_param.get(id(param), (0.0, 0.0, 0.0))
            out += [dm, dv, 0.0]
        return out


def adamw_training_state(model, optimizer) -> list:
    """``(name, array)`` of every state-dict entry (parameters, buffers) and Adam(W) moment."""
    items = [(name, to_numpy(t)) for name, t in model.state_dict().items()]
    for k, state in enumerate(optimizer.state.values()):
        items += [(f"optimizer state {k} {key}", to_numpy(state[key])) for key in ("exp_avg", "exp_avg_sq", "step")]
    return items


def assert_training_close_to_reference(trusted, tested, reference, budget: AdamWErrorBudget) -> None:
    """Every parameter, buffer and Adam(W) moment of the ``tested`` ``(model, optimizer)`` is as
    close to the float64 ``reference`` run's as the ``trusted`` float32 run's is, plus the drift
    ``budget`` derives from the tested run's gradient errors. Counters (optimizer steps,
    ``num_batches_tracked``) must be equal."""
    exact_states = adamw_training_state(*reference)
    states = zip(adamw_training_state(*trusted), adamw_training_state(*tested), strict=True)
    for ((name, want), (_, got)), (_, exact), slack in zip(states, exact_states, budget.slacks(), strict=True):
        if exact.dtype != np.float64:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            assert_close_to_reference(got, want, exact, what=name, slack=slack)


def check_complex(fn, *arrays, rtol: float = 1e-7, atol: float = 1e-9, seed: int = 0):
    """``fn(module, *tensors)`` with ``module`` munet and then torch, on tensors made from NumPy
    ``arrays`` (real or complex; floating ones require grad): the outputs agree, and so do the
    inputs' gradients of one random real loss, ``sum(w * view_as_real(out))`` (``sum(w * out)`` for
    a real output), PyTorch's convention for complex gradients. Returns munet's output."""
    results = []
    weights = None
    for module in (munet, torch):
        inputs = [module.tensor(a, requires_grad=a.dtype.kind in "fc") for a in arrays]
        out = fn(module, *inputs)
        parts = module.view_as_real(out.resolve_conj()) if out.is_complex() else out
        if weights is None:
            weights = rng(seed).standard_normal(tuple(parts.shape))
        loss = (parts * module.tensor(weights, dtype=parts.dtype)).sum()
        differentiable = [t for t in inputs if t.requires_grad]
        grads = module.autograd.grad(loss, differentiable, allow_unused=True) if parts.requires_grad else []
        values = [
            out.detach().resolve_conj().numpy(),
            *(None if g is None else g.resolve_conj().numpy() for g in grads),
        ]
        results.append((out, values))
    (m_out, m_values), (_, t_values) = results
    assert len(m_values) == len(t_values), "munet and torch differ in which inputs get a gradient"
    for i, (got, want) in enumerate(zip(m_values, t_values)):
        what = "output" if i == 0 else f"gradient of input {i - 1}"
        assert (got is None) == (want is None), what
        if got is not None:
            assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, torch {want.dtype}"
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)
    return m_out


def crandn(*shape, dtype="complex128", seed: int = 0) -> np.ndarray:
    """A complex array with standard normal real and imaginary parts."""
    g = rng(seed)
    return (g.standard_normal(shape) + 1j * g.standard_normal(shape)).astype(dtype)
