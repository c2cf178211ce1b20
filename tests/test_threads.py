"""Threads: munet.set_num_threads, and per-thread state (the tracer, first use of the cpu backend)
checked by stress tests where each thread's result must equal the same work run single-threaded.

Grad mode, inference mode and autocast have their own per-thread tests in tests/autograd and
tests/amp; the default device in tests/test_device.py.
"""

import os
import queue
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import munet
import munet.nn as nn
import munet.nn.functional as F
from munet.compiler import HostReadError
from munet.compiler.codegen import build
from tests.reference import assert_close_to_reference

ROOT = Path(__file__).resolve().parents[1]


def test_set_and_get_num_threads():
    before = munet.get_num_threads()
    try:
        munet.set_num_threads(1)
        assert munet.get_num_threads() == 1
        munet.set_num_threads(2)
        assert munet.get_num_threads() == 2
    finally:
        munet.set_num_threads(before)
    with pytest.raises(ValueError, match="positive integer"):
        munet.set_num_threads(0)


def test_one_budget_serves_blas_and_generated_kernels():
    from munet import _threads

    before = munet.get_num_threads()
    try:
        munet.set_num_threads(1)
        assert _threads.kernel_threads() == 1 == munet.get_num_threads()
        munet.set_num_threads(2)
        assert _threads.kernel_threads() == 2
        blas = _threads._openblas()
        if blas is not None:
            assert blas[1]() == 2  # OpenBLAS itself was told
    finally:
        munet.set_num_threads(before)


def test_run_tasks_runs_every_task_once_and_raises_the_first_error():
    """``run_tasks``: the caller and the workers claim tasks; each runs once, on a thread whose BLAS
    is single-threaded; the budget is restored after; a task's error reaches the caller."""
    from munet import _threads

    before = munet.get_num_threads()
    try:
        for budget in (1, 2):
            munet.set_num_threads(budget)
            seen, blas_threads, lock = [], [], threading.Lock()

            def task(i):
                blas = _threads._openblas()
                with lock:
                    seen.append((i, threading.get_ident()))
                    blas_threads.append(None if blas is None else blas[1]())

            _threads.run_tasks([lambda i=i: task(i) for i in range(40)])
            assert sorted(i for i, _ in seen) == list(range(40))
            assert set(blas_threads) <= {None, 1} or budget == 1
            if budget == 1:  # in order, here
                assert [i for i, _ in seen] == list(range(40))
                assert {t for _, t in seen} == {threading.get_ident()}
            assert munet.get_num_threads() == budget
            blas = _threads._openblas()
            if blas is not None:
                assert blas[1]() == budget

            def failing():
                raise ValueError("task 3 failed")

            with pytest.raises(ValueError, match="task 3 failed"):
                _threads.run_tasks([lambda: None, lambda: None, lambda: None, failing])
            if blas is not None:
                assert blas[1]() == budget
    finally:
        munet.set_num_threads(before)


def test_a_compiled_convolution_on_two_threads_equals_one_thread():
    """The compiled convolution's blocks (rows of one image, images, a GEMM split by output
    channels) run as tasks at a budget of two: as close to the float64 result as at one thread
    (a GEMM split by output channels may round differently: BLAS picks kernels by size)."""
    rng = np.random.default_rng(0)
    cases = [((1, 32, 40, 48), (8, 32, 3, 3)), ((5, 4, 9, 8), (6, 4, 3, 3)), ((1, 16, 7, 7), (32, 16, 3, 3))]
    before = munet.get_num_threads()
    try:
        for shape, weight in cases:
            x = munet.tensor(rng.standard_normal(shape).astype(np.float32))
            w = munet.tensor(rng.standard_normal(weight).astype(np.float32))
            results = []
            for budget in (1, 2):
                munet.set_num_threads(budget)
                results.append(munet.compile(lambda t, w=w: F.conv2d(t, w, padding=1))(x).numpy())
            reference = F.conv2d(x.double(), w.double(), padding=1).numpy()
            assert_close_to_reference(results[1], results[0], reference)
    finally:
        munet.set_num_threads(before)


def test_compiled_products_on_two_threads_equal_eager_ones():
    """The compiled arena's matmul and the eager kernel split products over the team alike
    (``kernels_linalg.matmul_into``): at a budget of two, a batch of attention-shaped products and
    a linear layer's give eager's bits, and match the float64 result as at one thread."""
    rng = np.random.default_rng(0)
    q = munet.tensor(rng.standard_normal((4, 2, 128, 32)).astype(np.float32))
    k = munet.tensor(rng.standard_normal((4, 2, 128, 32)).astype(np.float32))
    w = munet.tensor(rng.standard_normal((96, 256)).astype(np.float32))

    def products(q, k):
        scores = q @ k.mT
        return scores, scores.reshape(1024, 128) @ w[:, :128].mT

    before = munet.get_num_threads()
    try:
        munet.set_num_threads(2)
        compiled = [t.numpy() for t in munet.compile(products)(q, k)]
        eager = [t.numpy() for t in products(q, k)]
        for c, e in zip(compiled, eager):
            np.testing.assert_array_equal(c, e)
        scores = q.double() @ k.double().mT
        references = [scores.numpy(), (scores.reshape(1024, 128) @ w[:, :128].double().mT).numpy()]
        munet.set_num_threads(1)
        for two, one, reference in zip(compiled, products(q, k), references):
            assert_close_to_reference(two, one.numpy(), reference)
    finally:
        munet.set_num_threads(before)


def test_a_forked_child_runs_generated_kernels_without_hanging():
    """libgomp's team does not survive fork: the child runs generated kernels on one thread."""
    import multiprocessing

    from munet.backends.cpu import compiled_formula

    before = munet.get_num_threads()
    munet.set_num_threads(2)
    try:
        x = munet.randn(1 << 17)
        first = munet.sigmoid(x).numpy()  # uses the OpenMP team here where a compiler exists
        with multiprocessing.get_context("fork").Pool(1) as pool:
            child = pool.apply_async(_sigmoid_in_child, (x.numpy(),)).get(timeout=120)
        np.testing.assert_array_equal(child, first)
        assert compiled_formula.MIN_ELEMENTS <= x.numel()
    finally:
        munet.set_num_threads(before)


def _sigmoid_in_child(array):
    from munet import _threads

    assert _threads.kernel_threads() == 1
    return munet.sigmoid(munet.tensor(array)).numpy()


def _fused(x):
    return (x * 2 + 1).sigmoid()


_COMPILED = munet.compile(_fused)


@pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler: plans run NumPy kernels")
def test_a_forked_child_runs_a_compiled_plan_built_before_the_fork():
    """A plan's generated kernels read the thread budget at each call (kernel_threads), so a plan
    built and run with two threads in the parent runs on one in a forked child instead of hanging."""
    import multiprocessing

    before = munet.get_num_threads()
    munet.set_num_threads(2)
    try:
        x = munet.randn(1 << 17)  # above codegen/c.py PARALLEL_MIN_ELEMENTS: the kernel has an omp loop
        first = _COMPILED(x).numpy()
        assert _COMPILED.stats()["generated_kernels"] > 0
        with multiprocessing.get_context("fork").Pool(1) as pool:
            child = pool.apply_async(_compiled_in_child, (x.numpy(),)).get(timeout=60)
        np.testing.assert_array_equal(child, first)
    finally:
        munet.set_num_threads(before)


def _compiled_in_child(array):
    return _COMPILED(munet.tensor(array)).numpy()


def _in_a_fresh_process(code: str, **env) -> str:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT", "MUNET_BLAS_THREADS")
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**base, **env}, cwd=ROOT,
                         timeout=300, check=True)  # fmt: skip
    return out.stdout


def test_idle_pool_threads_sleep_unless_the_user_chose_otherwise():
    """Importing munet (before NumPy) sets OpenBLAS's timeout and makes OpenMP threads wait passively,
    with one pool or two (MUNET_BLAS_THREADS=openblas); a value in the environment stays."""
    code = "import os, munet; print(os.environ.get('OMP_WAIT_POLICY', '-'), os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    assert _in_a_fresh_process(code).split() == ["PASSIVE", "4"]
    assert _in_a_fresh_process(code, MUNET_BLAS_THREADS="openblas").split() == ["PASSIVE", "4"]
    assert _in_a_fresh_process(code, OMP_WAIT_POLICY="ACTIVE").split() == ["ACTIVE", "4"]


_BLAS_ON_THE_TEAM = """
import numpy as np, munet
from munet import _blas_threads
rng = np.random.default_rng(0)
a, b = rng.standard_normal((300, 400), np.float32), rng.standard_normal((400, 500), np.float32)
m = rng.standard_normal((200, 200)) + 200 * np.eye(200)
before, solved = a @ b, np.linalg.solve(m, np.ones(200))
munet.sigmoid(munet.randn(1 << 17)).numpy()  # the first generated kernel installs the callback
print(_blas_threads.installed())
assert np.array_equal(a @ b, before) and np.array_equal(np.linalg.solve(m, np.ones(200)), solved)
# MuNet's product (blocks on the team, OpenBLAS 0.3.31 gives other bits for other blocks): within float32
# rounding of the exact one, |got - exact| <= k u / (1 - k u) sum |a| |b| (any order of summation)
got, exact = (munet.tensor(a) @ munet.tensor(b)).numpy(), a.astype(np.float64) @ b.astype(np.float64)
gamma = 400 * 2.0**-24 / (1 - 400 * 2.0**-24)
print(bool(np.all(np.abs(got - exact) <= gamma * (np.abs(a).astype(np.float64) @ np.abs(b)))))
"""


@pytest.mark.skipif(not munet.backends.openmp.is_available(), reason="no C compiler with OpenMP")
@pytest.mark.parametrize("limit", [None, "1"])
def test_blas_jobs_run_on_the_kernels_team_and_give_the_same_bits(limit):
    """With NumPy's OpenBLAS, the first generated kernel hands OpenBLAS's parallel jobs to MuNet's
    OpenMP team; NumPy's products and LAPACK solves give the bits OpenBLAS's own threads gave, and
    MuNet's product is right to float32 rounding. Under
    OMP_THREAD_LIMIT=1 a team of two cannot be had and the jobs get a thread each (no deadlock)."""
    from munet import _blas_threads, _threads

    if not _blas_threads.possible(_threads.openblas_paths()):
        pytest.skip("NumPy's BLAS has no thread callback")
    env = {"OPENBLAS_NUM_THREADS": "2"} | ({"OMP_THREAD_LIMIT": limit} if limit else {})
    assert _in_a_fresh_process(_BLAS_ON_THE_TEAM, **env).split() == ["True", "True"]
    assert _in_a_fresh_process(_BLAS_ON_THE_TEAM, MUNET_BLAS_THREADS="openblas", **env).split() == ["False", "True"]


def test_a_forked_child_runs_blas_on_openblas_threads():
    """After fork the callback is unregistered: libgomp's team would hang in the child."""
    import multiprocessing

    before = munet.get_num_threads()
    munet.set_num_threads(2)
    try:
        munet.sigmoid(munet.randn(1 << 17)).numpy()
        a = np.random.default_rng(0).standard_normal((512, 512), np.float32)
        with multiprocessing.get_context("fork").Pool(1) as pool:
            installed, product = pool.apply_async(_matmul_in_child, (a,)).get(timeout=120)
        assert not installed
        np.testing.assert_array_equal(product, a @ a)
    finally:
        munet.set_num_threads(before)


def _matmul_in_child(array):
    from munet import _blas_threads

    return _blas_threads.installed(), array @ array


@pytest.fixture
def fast_switching():
    """Switch threads every 10 us (default 5 ms), so their ops interleave finely."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def test_set_default_device_in_a_thread_stays_in_that_thread(vulkan):
    """PyTorch 2.13 keeps it in a threading.local (torch/__init__.py ``_GLOBAL_DEVICE_CONTEXT``)."""

    def switch():
        munet.set_default_device(vulkan)
        return munet.zeros(1).device

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(switch).result(timeout=60) == vulkan
    assert munet.get_default_device() == munet.device("cpu") and munet.zeros(1).device == munet.device("cpu")


# the tracer ---------------------------------------------------------------------------------------


class HeldTrace:
    """``munet.compile`` of ``fn`` whose trace, after running ``fn``, waits until ``release()``.

    The trace signals and waits through C objects (a SimpleQueue, a lock), whose state the
    compiler's guards cannot read, so it does not guard on them."""

    def __init__(self, fn):
        self._traced, self._gate = queue.SimpleQueue(), threading.Lock()
        self._gate.acquire()
        traced, gate = self._traced, self._gate

        def held(*args):
            out = fn(*args)
            traced.put(True)
            gate.acquire(timeout=30)
            gate.release()
            return out

        self.compiled = munet.compile(held)

    def wait_traced(self) -> None:
        assert self._traced.get(timeout=30)

    def release(self) -> None:
        self._gate.release()


def test_eager_ops_in_another_thread_run_while_one_traces():
    held = HeldTrace(lambda x: x * 2)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(held.compiled, munet.ones(3))
        held.wait_traced()
        try:
            eager = (munet.arange(3.0) + 1).tolist(), (munet.ones(2, requires_grad=True) * 2).requires_grad
        finally:
            held.release()
        assert first.result(timeout=60).tolist() == [2.0, 2.0, 2.0]
    assert eager == ([1.0, 2.0, 3.0], True)


def test_calling_a_compiled_function_while_another_thread_traces_it_waits_for_the_trace():
    held = HeldTrace(lambda x: x + 1)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(held.compiled, munet.zeros(2))
        held.wait_traced()
        second = pool.submit(held.compiled, munet.ones(2))
        held.release()
        assert first.result(timeout=60).tolist() == [1.0, 1.0]
        assert second.result(timeout=60).tolist() == [2.0, 2.0]
    assert held.compiled.stats()["traces"] == 1


def test_reading_a_tensor_that_another_thread_is_tracing_raises_a_clear_error():
    weight = munet.ones(2)
    held = HeldTrace(lambda x: x * weight)  # the trace holds weight's data until it ends
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(held.compiled, munet.full((2,), 3.0))
        held.wait_traced()
        try:
            with pytest.raises(HostReadError, match="tracing in another thread"):
                (weight * 2).tolist()
        finally:
            held.release()
        assert first.result(timeout=60).tolist() == [3.0, 3.0]
    assert (weight * 2).tolist() == [2.0, 2.0]


def test_a_compiled_function_called_inside_a_trace_raises():
    inner = munet.compile(lambda x: x + 1)
    inner(munet.ones(1))  # cached: the call inside the trace would replay it
    outer = munet.compile(lambda x: inner(x) * 2)
    with pytest.raises(RuntimeError, match="called while another one is being traced"):
        outer(munet.ones(1))


def _shared_program(kind: str, tmp_path):
    compiled = munet.compile(lambda x: ((x * 2 + 1).relu() * x).sum(0))
    compiled(munet.ones(512, 256))
    if kind == "compiled":
        return compiled
    munet.save(compiled, tmp_path / "program.munet")
    return munet.load(tmp_path / "program.munet")


@pytest.mark.parametrize("kind", ["compiled", "loaded"])
def test_one_program_called_from_eight_threads_at_once(kind, tmp_path, fast_switching):
    """Calls share the plan's memory arena, so they must not overlap (each result is checked)."""
    program = _shared_program(kind, tmp_path)

    def calls(seed):
        rng = np.random.default_rng(seed)
        for _ in range(25):
            a = rng.standard_normal((512, 256)).astype(np.float32)
            got = program(munet.tensor(a)).numpy()
            np.testing.assert_allclose(got, (np.maximum(a * 2 + 1, 0) * a).sum(0), rtol=1e-5, atol=1e-4)

    with ThreadPoolExecutor(8) as pool:
        for f in [pool.submit(calls, seed) for seed in range(8)]:
            f.result(timeout=300)


# first use ----------------------------------------------------------------------------------------


def test_first_ops_of_a_process_in_many_threads_at_once():
    """The cpu backend and its kernel table are built on first use; threads arriving meanwhile wait for it."""
    code = """
import sys, threading
import munet
sys.setswitchinterval(1e-5)
errors, backends = [], set()
start = threading.Barrier(16)
def first_ops():
    start.wait()
    try:  # kernels of the last kernels_*.py modules to load
        backends.add(id(munet.rand(3).sort()[0].sum()._storage.backend))
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=first_ops) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
print(errors, len(backends))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] 1"


# stress: threads training private models ----------------------------------------------------------


def _small_model(seed: int):
    """Conv2d, LayerNorm and Linear layers with weights drawn from numpy (the default generator is shared)."""
    rng = np.random.default_rng(seed)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 16), nn.LayerNorm(16), nn.Linear(16, 3)
    )
    with munet.no_grad():
        for p in model.parameters():
            p.copy_(munet.tensor((rng.standard_normal(p.shape) * 0.2).astype(np.float32)))
    x = munet.tensor(rng.standard_normal((8, 1, 8, 8)).astype(np.float32))
    y = munet.tensor(rng.integers(0, 3, 8))
    return model, x, y


def _train_eagerly(seed: int, iterations: int = 12):
    """Adam steps with no_grad and autocast regions between them; checks each region's mode as it goes."""
    model, x, y = _small_model(seed)
    opt = munet.optim.Adam(model.parameters(), lr=1e-2)
    flat = x.flatten(1)
    losses = []
    for i in range(iterations):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        assert loss.requires_grad, "grad mode off outside no_grad"
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if (i + seed) % 2 == 0:
            with munet.no_grad():
                assert not model(x).requires_grad
        if (i + seed) % 3 == 0:
            with munet.autocast("cpu", dtype=munet.bfloat16):
                assert (flat @ flat.t()).dtype is munet.bfloat16
                assert F.cross_entropy(model(x), y).dtype is munet.float32
        assert (flat @ flat.t()).dtype is munet.float32, "autocast on outside autocast"
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def _compiled_training(seed: int, iterations: int = 4):
    model, x, y = _small_model(seed)
    opt = munet.optim.SGD(model.parameters(), lr=0.1)

    @munet.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    losses = [step(x, y).item() for _ in range(iterations)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def _assert_threads_match_serial(work, n_threads: int):
    expected = [work(seed) for seed in range(n_threads)]
    with ThreadPoolExecutor(n_threads) as pool:
        got = [f.result(timeout=300) for f in [pool.submit(work, seed) for seed in range(n_threads)]]
    for seed, ((losses, params), (want_losses, want_params)) in enumerate(zip(got, expected)):
        assert losses == want_losses, f"thread {seed}: losses differ from the single-threaded run"
        for p, want in zip(params, want_params):
            np.testing.assert_array_equal(p, want, err_msg=f"thread {seed}: parameters differ")


def test_eight_threads_train_private_models_eagerly(fast_switching):
    _assert_threads_match_serial(_train_eagerly, 8)


def test_four_threads_compile_and_train_private_models(fast_switching):
    _assert_threads_match_serial(_compiled_training, 4)
