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
MuNet, included). Where it cannot (another BLAS, no compiler, ``MUNET_BLAS_THREADS=openblas``) the
two pools take turns: the generated kernels' OpenMP threads wait passively
(``OMP_WAIT_POLICY=PASSIVE``, set here before libgomp is loaded) and OpenBLAS's threads sleep at
once (``OPENBLAS_THREAD_TIMEOUT=4``, effective when ``munet`` is imported before NumPy: OpenBLAS
reads it when it loads). A value the user set in the environment is kept. On a busy machine,
fewer threads than cores avoids spin-waiting threads, which can make small matrix products two
orders of magnitude slower. In a child forked from the process (a DataLoader worker) generated
kernels run on one thread and OpenBLAS on its own threads: libgomp's team does not survive
``fork``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re

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
def _openblas_paths() -> tuple:
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
    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, n) for n in _SETTERS if hasattr(lib, n)), None)
        getter = next((getattr(lib, n) for n in _GETTERS if hasattr(lib, n)), None)
        if setter is not None and getter is not None:
            return setter, getter
    return None


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
        _shared.append(_blas_threads.install(_openblas_paths()))
    return _budget[0] if _budget else get_num_threads()


# libgomp reads this when it is loaded (with the first generated kernel). With one pool its threads
# keep libgomp's default (spin briefly, then sleep); with two, idle OpenMP threads sleep at once
# rather than spinning ~0.3 ms on cores that OpenBLAS's threads need next
if not _blas_threads.possible(_openblas_paths()):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
