"""How MuNet's C task loops end on the OpenMP team: the calling thread waits awake for the last tasks.

MuNet's OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE``, ``munet/_threads.py``): a thread
with nothing to do sleeps at once, so a busy machine's cores are not burnt spinning. The price is a
wake-up whenever a sleeping thread is needed: 40-50 us on the 2-core VM these figures come from.
A parallel loop pays it twice: once when the team's threads are woken at its start, and again at
its end if the calling thread (thread 0) ran out of tasks first and fell asleep at the closing
barrier, to be woken by the last thread to finish. The second is avoidable: :data:`TEAM_TASKS`
lets thread 0, once it has claimed no more tasks, wait awake (pausing, at most
``MUNET_AWAKE_US`` microseconds) until every task is done, so it reaches the barrier last and
leaves at once, while the others go back to sleep. Only thread 0 waits this way, on its own core,
and only while its teammates still run tasks (bounded, so a teammate the machine does not schedule
costs no more than the bound before thread 0 sleeps as before).

Measured (C microbenchmark, 2-core AMD EPYC VM, passive team of two, 4-8 dynamic tasks of ~15 us
per region, 20 us between regions, 2026-12-05): 41 us above the ideal per region without the wait,
21 us with it; with the other core busy elsewhere, 86-101 against 78-83 us. Loops written this way:

    long done = 0;
    #pragma omp parallel num_threads(threads)
    {
        #pragma omp for schedule(dynamic, 1) nowait
        for (long i = 0; i < count; i++) { ...; munet_task_done(&done); }
        munet_wait_awake(&done, count);
    }

Every task must call ``munet_task_done`` once (also one skipped after an error).
"""

TEAM_TASKS = r"""
#ifdef _OPENMP
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MUNET_PAUSE() _mm_pause()
#else
#define MUNET_PAUSE() ((void)0)
#endif
#define MUNET_AWAKE_US 200.0

static inline void munet_task_done(long *done) { __atomic_add_fetch(done, 1, __ATOMIC_RELEASE); }

/* Thread 0, out of tasks, waits awake (at most MUNET_AWAKE_US) until all `count` are done, so that it
   ends the region last instead of sleeping at its barrier until the last teammate wakes it. */
static inline void munet_wait_awake(const long *done, long count) {
    if (omp_get_thread_num() != 0 || __atomic_load_n(done, __ATOMIC_ACQUIRE) >= count) return;
    const double until = omp_get_wtime() + MUNET_AWAKE_US * 1e-6;
    for (int k = 1; __atomic_load_n(done, __ATOMIC_ACQUIRE) < count; k++) {
        MUNET_PAUSE();
        if ((k & 63) == 0 && omp_get_wtime() > until) return;
    }
}
#endif
"""
