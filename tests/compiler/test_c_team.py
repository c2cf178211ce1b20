"""The task loops' ending (codegen/c_team.py): every task runs once at any team size, and the calling
thread's awake wait is bounded, so a teammate slower than the bound still finishes its task."""

import ctypes

import numpy as np
import pytest

from munet.compiler.codegen import build
from munet.compiler.codegen.c_team import TEAM_TASKS

_LOOP = r"""
#include <stdint.h>
/* task i writes i + 1 into runs[i] (counting how often it ran); task `slow` first waits `slow_us` */
void team_loop(int64_t *runs, int64_t count, int64_t slow, int64_t slow_us, int64_t threads) {
#ifdef _OPENMP
    long done = 0;
    #pragma omp parallel num_threads(threads)
    {
        #pragma omp for schedule(dynamic, 1) nowait
        for (int64_t i = 0; i < count; i++) {
            if (i == slow) {
                const double until = omp_get_wtime() + slow_us * 1e-6;
                while (omp_get_wtime() < until) {}
            }
            __atomic_add_fetch(&runs[i], i + 1, __ATOMIC_RELAXED);
            munet_task_done(&done);
        }
        munet_wait_awake(&done, count);
    }
#else
    for (int64_t i = 0; i < count; i++) runs[i] += i + 1;
    (void)slow; (void)slow_us; (void)threads;
#endif
}
"""


@pytest.fixture(scope="module")
def team_loop():
    if build.find_compiler() is None:
        pytest.skip("no C compiler")
    lib, _ = build.load_library(TEAM_TASKS + _LOOP, "team_loop", what="test: the team's task loop")
    fn = lib.team_loop
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    return fn


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("count", [1, 2, 7, 64])
def test_every_task_runs_once(team_loop, threads, count):
    runs = np.zeros(count, np.int64)
    for _ in range(20):
        team_loop(runs.ctypes.data, count, -1, 0, threads)
    np.testing.assert_array_equal(runs, 20 * np.arange(1, count + 1))


@pytest.mark.parametrize("slow", [0, 3])
def test_a_task_slower_than_the_awake_bound_still_completes(team_loop, slow):
    """A 5 ms task (25 times the bound) on whichever thread claims it: thread 0 stops waiting awake
    and sleeps at the region's end, and the region ends once the task is done."""
    runs = np.zeros(4, np.int64)
    team_loop(runs.ctypes.data, 4, slow, 5000, 2)
    np.testing.assert_array_equal(runs, np.arange(1, 5))
