"""munet/autograd/grad_mode.py: grad mode and inference mode are per thread, as in PyTorch.

Each test holds one thread inside a block (with events, so the overlap is certain) while another
thread looks; with one process-wide flag the other thread sees the block's setting.
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import torch

import munet
from munet.autograd.grad_mode import is_inference_mode_enabled


def in_new_thread(fn):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result(timeout=30)


def test_a_new_thread_starts_with_grad_enabled_and_inference_mode_off():
    with torch.no_grad():
        assert in_new_thread(torch.is_grad_enabled) is True  # the reference
    with munet.no_grad():
        assert in_new_thread(munet.is_grad_enabled) is True
    with munet.inference_mode():
        assert in_new_thread(lambda: (munet.is_grad_enabled(), is_inference_mode_enabled())) == (True, False)
        assert not munet.is_grad_enabled() and is_inference_mode_enabled()


def test_no_grad_in_one_thread_leaves_another_recording():
    entered, leave = threading.Event(), threading.Event()

    def hold_no_grad():
        with munet.no_grad():
            entered.set()
            leave.wait(30)
            return munet.is_grad_enabled(), (munet.ones(2, requires_grad=True) * 2).requires_grad

    with ThreadPoolExecutor(1) as pool:
        inside = pool.submit(hold_no_grad)
        assert entered.wait(30)
        try:
            here = munet.is_grad_enabled(), (munet.ones(2, requires_grad=True) * 2).requires_grad
        finally:
            leave.set()
        assert inside.result(timeout=30) == (False, False)
    assert here == (True, True)


def test_inference_mode_in_one_thread_leaves_another_recording():
    entered, leave = threading.Event(), threading.Event()

    def hold_inference_mode():
        with munet.inference_mode():
            entered.set()
            leave.wait(30)

    with ThreadPoolExecutor(1) as pool:
        inside = pool.submit(hold_inference_mode)
        assert entered.wait(30)
        try:
            here = munet.is_grad_enabled(), is_inference_mode_enabled()
        finally:
            leave.set()
        inside.result(timeout=30)
    assert here == (True, False)


def test_overlapping_no_grad_blocks_in_two_threads_each_restore_their_own_mode():
    # a enters, b enters, a leaves, b leaves: with one process-wide flag, b restores the "off" a left.
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a():
        with munet.no_grad():
            a_in.set()
            b_in.wait(30)
        a_out.set()
        return munet.is_grad_enabled()

    def b():
        a_in.wait(30)
        with munet.no_grad():
            b_in.set()
            a_out.wait(30)
        return munet.is_grad_enabled()

    with ThreadPoolExecutor(2) as pool:
        results = [f.result(timeout=30) for f in (pool.submit(a), pool.submit(b))]
    assert results == [True, True]
    assert munet.is_grad_enabled()


def test_set_grad_enabled_in_a_thread_stays_in_that_thread():
    def switch_off():
        munet.set_grad_enabled(False)
        return munet.is_grad_enabled()

    assert in_new_thread(switch_off) is False
    assert munet.is_grad_enabled()


def test_set_grad_enabled_as_a_decorator_switches_only_inside_calls():
    @torch.set_grad_enabled(False)
    def reference():
        return torch.is_grad_enabled()

    @munet.set_grad_enabled(False)
    def decorated():
        return munet.is_grad_enabled()

    assert (torch.is_grad_enabled(), reference(), torch.is_grad_enabled()) == (True, False, True)
    assert (munet.is_grad_enabled(), decorated(), munet.is_grad_enabled()) == (True, False, True)


def test_inference_mode_false_turns_inference_mode_off_and_grad_on():
    def seen(inference_mode, is_inference, is_grad, outer):
        with outer():
            with inference_mode(False):
                return is_inference(), is_grad()

    for outer in ("inference_mode", "no_grad"):
        want = seen(torch.inference_mode, torch.is_inference_mode_enabled, torch.is_grad_enabled, getattr(torch, outer))
        got = seen(munet.inference_mode, is_inference_mode_enabled, munet.is_grad_enabled, getattr(munet, outer))
        assert got == want == (False, True), outer
