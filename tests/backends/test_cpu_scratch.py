"""munet/backends/cpu/scratch.py: kept temporaries are reused per role and thread, never shared
between roles or threads, and large ones are not kept."""

import threading

import numpy as np

from munet.backends.cpu import scratch


def test_a_role_reuses_its_memory_and_roles_do_not_alias():
    scratch.release()
    a = scratch.work("a", (3, 4), np.float32)
    b = scratch.work("b", (3, 4), np.float32)
    assert a.shape == (3, 4) and a.dtype == np.float32 and a.flags.c_contiguous
    assert not np.shares_memory(a, b)
    again = scratch.work("a", (2, 5), np.float64)
    assert np.shares_memory(a, again)
    scratch.release()
    assert not np.shares_memory(a, scratch.work("a", (3, 4), np.float32))


def test_large_temporaries_are_not_kept():
    big = (scratch.LIMIT // 4 + 1,)
    assert not np.shares_memory(scratch.work("a", big, np.float32), scratch.work("a", big, np.float32))


def test_threads_have_their_own_pools():
    mine = scratch.work("a", (8,), np.float32)
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(scratch.work("a", (8,), np.float32)))
    thread.start()
    thread.join()
    assert not np.shares_memory(mine, theirs[0])
