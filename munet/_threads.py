"""``munet.set_num_threads`` / ``get_num_threads``: the CPU backend's one thread budget.

BLAS calls (NumPy's bundled OpenBLAS) and MuNet's generated C kernels (OpenMP) share one count:
``set_num_threads(n)`` sets OpenBLAS's at once (its thread-count setter is found among the
loaded libraries and called directly; ``OPENBLAS_NUM_THREADS`` only works before NumPy is
imported) and every later kernel launch passes ``n`` to its OpenMP team. The default is the count
OpenBLAS started with (one per core unless ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS`` say less).

BLAS and the generated kernels run on one pool where NumPy's OpenBLAS lets its caller run its
jobs (OpenBLAS 0.3.28+, as in NumPy's wheels): OpenBLAS's parallel jobs then run on MuNet's OpenMP
team (``munet._blas_threads``, installed with the first generated kernel), so no idle pool spins on
the cores the other needs, whichever libgomp the process loaded first (PyTorch's, imported before
MuNet, included); so do matrix products cut into tasks (``gemm_tasks``) and the direct
convolution's tasks. Where it cannot (another BLAS, no compiler, ``MUNET_BLAS_THREADS=openblas``)
the two pools take turns. Either way the OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE``,
set here before libgomp is loaded) and OpenBLAS's threads sleep at once
(``OPENBLAS_THREAD_TIMEOUT=4``, effective when ``munet`` is imported before NumPy: OpenBLAS reads
it when it loads). A value the user set in the environment is kept. On a busy machine,
fewer threads than cores avoids spin-waiting threads, which can make small matrix products two
orders of magnitude slower. In a child forked from the process (a DataLoader worker) generated
kernels run on one thread and OpenBLAS on its own threads: libgomp's team does not survive
``fork``.

``run_tasks(tasks)`` is the third way to use the budget (the column path's convolution blocks without
OpenMP or CBLAS, and the direct convolution's tasks without OpenMP or with ``MUNET_CONV_TASKS=threads``): independent
tasks on the calling thread and ``budget - 1`` pool threads, each with single-threaded BLAS,
claimed one at a time as threads come free, so a thread the machine does not schedule delays no
one (OpenBLAS's and OpenMP's static splits wait for it at every call).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import threading

from munet import _blas_threads

# OpenBLAS reads this when NumPy loads it (so it takes effect when munet is imported before NumPy):
# its idle threads sleep after 2**4 cycles instead of yielding in a loop for 2**28 (~0.1 s)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
            "openblas_set_num_threads")  # fmt: skip
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
            "openblas_get_num_threads")  # fmt: skip
_budget: list = []  # [n] once known: the count every kernel launch reads without asking OpenBLAS
_forked: list = []  # non-empty in a child forked from this process (see _after_fork)
_shared: list = []  # [whether OpenBLAS runs its jobs on MuNet's team] once the first kernel asked


def _after_fork() -> None:
    """GNU libgomp cannot start a team in a child forked after the parent used one (the child waits
    forever on threads that were not copied), so generated kernels run on one thread there, as
    PyTorch's do, and BLAS calls go back to OpenBLAS's own threads (with the budget)."""
    _forked.append(True)
    _blas_threads.uninstall()


@functools.cache
def openblas_paths() -> tuple:
    """The files of the OpenBLAS libraries loaded in this process (NumPy's)."""
    import numpy  # noqa: F401 - makes sure NumPy's BLAS is loaded

    try:
        with open("/proc/self/maps") as f:
            return tuple(sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", f.read()))))
    except OSError:
        return ()


@functools.cache
def _openblas():
    """The loaded OpenBLAS library's (setter, getter) (NumPy's), or None when it cannot be found."""
    setter = _blas_threads.openblas_function(openblas_paths(), _SETTERS)
    getter = _blas_threads.openblas_function(openblas_paths(), _GETTERS)
    return None if setter is None or getter is None else (setter, getter)


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for the CPU backend: BLAS calls (matmul, convolution) and generated kernels."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    blas = _openblas()
    if blas is None:
        raise RuntimeError(
            "set_num_threads: NumPy's OpenBLAS library was not found in this process; set OPENBLAS_NUM_THREADS "
            "before starting Python instead"
        )
    blas[0](ctypes.c_int(n))
    _budget[:] = [n]


def get_num_threads() -> int:
    """The CPU backend's thread count (BLAS and generated kernels)."""
    if _budget:
        return _budget[0]
    blas = _openblas()
    if blas is None:
        n = int(os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    else:
        n = int(blas[1]())
    _budget[:] = [max(1, n)]
    return _budget[0]


def kernel_threads() -> int:
    """How many OpenMP threads a generated kernel launched now may use (the budget; one in a forked
    child); cheap to call."""
    if _forked:
        return 1
    if not _shared:  # the first generated kernel: BLAS joins its team from now on
        _shared.append(_blas_threads.install(openblas_paths()))
    return _budget[0] if _budget else get_num_threads()


# tasks on the budget ------------------------------------------------------------------------------------


class _Job:
    """Tasks that threads claim one at a time (``work``) until none is left; ``wait`` returns when
    every claimed task has finished."""

    def __init__(self, tasks):
        self.tasks = tasks
        self.next = 0
        self.running = 0
        self.error = None
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)

    def work(self) -> None:
        while True:
            with self.lock:
                if self.next >= len(self.tasks) or self.error is not None:
                    return
                task = self.tasks[self.next]
                self.next += 1
                self.running += 1
            try:
                task()
            except BaseException as error:  # noqa: BLE001 - raised again in the calling thread
                with self.lock:
                    self.error = error
            finally:
                with self.lock:
                    self.running -= 1
                    self.idle.notify_all()

    def wait(self) -> None:
        with self.lock:
            while self.running:
                self.idle.wait()
        if self.error is not None:
            raise self.error


class _Workers:
    """``count`` daemon threads that join each submitted job."""

    def __init__(self, count: int):
        self.lock = threading.Lock()
        self.posted = threading.Condition(self.lock)
        self.job = None
        self.generation = 0
        self.count = count
        for _ in range(count):
            threading.Thread(target=self._loop, daemon=True, name="munet-cpu-worker").start()

    def _loop(self) -> None:
        seen = 0
        while True:
            with self.lock:
                while self.generation == seen:
                    self.posted.wait()
                seen, job = self.generation, self.job
            job.work()  # run_tasks holds BLAS at one thread until every claimed task is done

    def run(self, tasks) -> None:
        job = _Job(tasks)
        with self.lock:
            self.job = job
            self.generation += 1
            self.posted.notify_all()
        job.work()  # the caller claims tasks too: a worker that is slow to wake takes none
        job.wait()


_workers: list = []  # [_Workers] once started
_workers_lock = threading.Lock()


def run_tasks(tasks: list) -> None:
    """Run the independent callables ``tasks`` on the thread budget, each on one thread with
    single-threaded BLAS. The calling thread claims tasks too, and the others claim them as they
    wake, so on a busy machine (a worker not scheduled for milliseconds) the call degrades to one
    thread's speed instead of waiting for a static share, as OpenBLAS's and OpenMP's own splits
    do. The first error raised by a task is raised here (tasks not started by then are skipped).
    With a budget of one, or in a forked child, the tasks run here in order."""
    threads = kernel_threads()
    if threads <= 1 or len(tasks) <= 1:
        for task in tasks:
            task()
        return
    with _workers_lock:
        if not _workers or _workers[0].count < threads - 1:
            _workers[:] = [_Workers(threads - 1)]
        workers = _workers[0]
    with single_threaded_blas():
        workers.run(tasks)


@contextlib.contextmanager
def single_threaded_blas():
    """OpenBLAS on one thread inside the block (restored to the budget after it): for BLAS calls
    that run side by side on threads of their own (``run_tasks``)."""
    blas = _openblas()
    if blas is None:
        yield
        return
    blas[0](ctypes.c_int(1))
    try:
        yield
    finally:
        blas[0](ctypes.c_int(get_num_threads()))


# libgomp reads this when it is loaded (with the first generated kernel, unless another library such
# as torch loaded it first): idle OpenMP threads sleep at once rather than spinning ~0.3 ms. With two
# pools the spinning took the cores OpenBLAS's threads needed next; with one (BLAS jobs, products and
# direct convolutions on the team) it still cost whenever the team's threads shared a core with other
# work: a thread spinning at the end of a loop held the core its teammate needed for a whole tick
# (imported ResNet-18 at batch 1, one core busy elsewhere: 53-68 ms spinning, 20-21 passive; quiet,
# 20-22 either way; docs/perf/onnx.md, 2026-12-04 21:00)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
