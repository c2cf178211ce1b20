"""One thread pool for BLAS calls and generated kernels: OpenBLAS's parallel jobs run on MuNet's
OpenMP team.

NumPy's OpenBLAS keeps its own pthread pool, and MuNet's generated C kernels run OpenMP teams.
Two pools on the same cores fight: whichever pool ran last leaves threads spinning on the cores
the other needs next. That spinning is not under MuNet's control once another library has loaded
libgomp first: PyTorch ships a ``libgomp.so.1`` and, imported before MuNet, its copy (with the
default spinning wait policy) is the one MuNet's kernels bind to. Measured on the 2-core
benchmark machine with torch imported first, the compiled MLP training step took 36-44 ms at two
threads against 15 ms without torch in the process (docs/perf/cpu.md).

OpenBLAS 0.3.28 and later let the caller run its jobs (``openblas_set_threads_callback_function``):
each call hands over ``count`` jobs that must run at the same time (level-3 jobs wait on one
another's packed panels). :func:`install` registers a small C function that runs them as one OpenMP
team, the same team the generated kernels use, so there is one pool whichever libgomp is loaded and
no idle pool waits on a core BLAS needs (its threads wait passively: ``munet._threads``).
Where a team of ``count`` threads cannot be had (inside a parallel region, under
``OMP_THREAD_LIMIT`` or dynamic teams), the jobs get a pthread each instead, so they never wait on a
job that is not running. After ``fork`` the child unregisters the function (libgomp's team does not
survive ``fork``) and OpenBLAS's own threads serve it.

Nothing is installed (and OpenBLAS keeps its pool) when NumPy's BLAS is not an OpenBLAS with the
setter, when no C compiler with OpenMP exists, or when ``MUNET_BLAS_THREADS=openblas``.
"""

from __future__ import annotations

import ctypes
import os

SETTERS = ("scipy_openblas_set_threads_callback_function64_", "scipy_openblas_set_threads_callback_function",
           "openblas_set_threads_callback_function64_", "openblas_set_threads_callback_function")  # fmt: skip

_SOURCE = r"""
#include <pthread.h>
#include <stddef.h>
#include <omp.h>

typedef void (*munet_blas_job)(int thread, void *job, int data);

struct munet_blas_task {
    munet_blas_job run;
    char *jobs;
    size_t size;
    int index, data;
};

static void *munet_blas_run_task(void *arg) {
    struct munet_blas_task *task = (struct munet_blas_task *)arg;
    task->run(task->index, task->jobs + (size_t)task->index * task->size, task->data);
    return NULL;
}

/* OpenBLAS's openblas_threads_callback: run `count` jobs of `size` bytes each at once */
void munet_blas_threads(int sync, munet_blas_job run, int count, size_t size, void *jobs, int data) {
    (void)sync;
    if (count <= 1) {
        if (count == 1) run(0, jobs, data);
        return;
    }
    if (!omp_in_parallel() && !omp_get_dynamic() && omp_get_thread_limit() >= count) {
        #pragma omp parallel for num_threads(count) schedule(static, 1)
        for (int i = 0; i < count; i++) run(omp_get_thread_num(), (char *)jobs + (size_t)i * size, data);
        return;
    }
    struct munet_blas_task tasks[64];
    pthread_t threads[64];
    int started[64] = {0};
    if (count > 64) count = 64; /* OpenBLAS's MAX_THREADS in NumPy's build */
    for (int i = 0; i < count; i++) {
        tasks[i].run = run; tasks[i].jobs = (char *)jobs; tasks[i].size = size;
        tasks[i].index = i; tasks[i].data = data;
    }
    for (int i = 1; i < count; i++) started[i] = pthread_create(&threads[i], NULL, munet_blas_run_task, &tasks[i]) == 0;
    for (int i = 1; i < count; i++) if (!started[i]) munet_blas_run_task(&tasks[i]);
    munet_blas_run_task(&tasks[0]);
    for (int i = 1; i < count; i++) if (started[i]) pthread_join(threads[i], NULL);
}
"""

_state: dict = {}  # "setter": OpenBLAS's setter once installed; "library": the callback's, kept loaded


def openblas_function(openblas_paths, names):
    """The first of ``names`` that a library at ``openblas_paths`` exports (a ctypes function), or None."""
    for path in openblas_paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found = next((getattr(lib, n) for n in names if hasattr(lib, n)), None)
        if found is not None:
            return found
    return None


def setter(openblas_paths):
    """OpenBLAS's callback setter among the libraries at ``openblas_paths``, or None."""
    found = openblas_function(openblas_paths, SETTERS)
    if found is not None:
        found.restype, found.argtypes = None, [ctypes.c_void_p]
    return found


def _opted_out() -> bool:
    return os.environ.get("MUNET_BLAS_THREADS", "").lower() == "openblas"


def possible(openblas_paths) -> bool:
    """Whether :func:`install` can succeed as far as BLAS is concerned (the C compiler aside)."""
    return not _opted_out() and setter(openblas_paths) is not None


def install(openblas_paths) -> bool:
    """Run OpenBLAS's parallel jobs on MuNet's OpenMP team from now on; True when that is so."""
    if "setter" in _state:
        return _state["setter"] is not None
    _state["setter"] = None
    found = None if _opted_out() else setter(openblas_paths)
    if found is None:
        return False
    from munet.compiler.codegen import build

    compiler = build.find_compiler()
    if compiler is None or "-fopenmp" not in compiler[2]:
        return False
    library, _ = build.load_library(_SOURCE, "munet_blas_threads", what="munet: the BLAS thread callback")
    found(ctypes.cast(library.munet_blas_threads, ctypes.c_void_p))
    _state.update(setter=found, library=library)
    return True


def uninstall() -> None:
    """Give OpenBLAS its own threads back (in a child after ``fork``)."""
    found = _state.get("setter")
    if found is not None:
        found(None)
        _state["setter"] = None


def installed() -> bool:
    return _state.get("setter") is not None
