"""munet/autograd/grad_mode.py: grad mode and inference mode are per thread, as in PyTorch.

Each test holds one thread inside a block (with events, so the overlap is certain) while another
thread looks; with one process-wide flag the other thread sees the block's setting.
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
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


def _modes(lib):
    return lib.is_grad_enabled(), lib.is_inference_mode_enabled()


def test_decorators_with_and_without_parentheses_match_torch():
    """``@no_grad``, ``@no_grad()``, ``@enable_grad``, ``@inference_mode``, ``@inference_mode(False)``,
    ``@set_grad_enabled(mode)``: the mode inside the call and after it, as PyTorch has them."""

    def decorated(lib):
        plain = [
            lib.no_grad,
            lib.no_grad(),
            lib.enable_grad,
            lib.enable_grad(),
            lib.inference_mode,
            lib.inference_mode(),
            lib.inference_mode(False),
            lib.inference_mode(mode=True),
        ]
        switches = [lambda: lib.set_grad_enabled(False), lambda: lib.set_grad_enabled(True)]
        out = []
        for outer in (lib.enable_grad, lib.no_grad):
            with outer():
                fns = [deco(lambda: _modes(lib)) for deco in plain] + [s()(lambda: _modes(lib)) for s in switches]
                out.append([(fn(), _modes(lib)) for fn in fns])
        return out

    assert decorated(munet) == decorated(torch)


def test_decorated_function_keeps_its_name_and_arguments():
    @munet.no_grad
    def scale(x, *, by=2):
        """Doc."""
        return x * by

    y = scale(munet.ones(2, requires_grad=True), by=3)
    assert scale.__name__ == "scale" and scale.__doc__ == "Doc."
    assert y.tolist() == [3.0, 3.0] and not y.requires_grad


def test_decorated_generator_runs_each_step_in_the_mode():
    def run(lib):
        @lib.no_grad()
        def steps():
            received = yield lib.is_grad_enabled()
            yield received, lib.is_grad_enabled()
            return "done"

        gen = steps()
        first = next(gen)
        outside = lib.is_grad_enabled()
        second = gen.send("hello")
        with_stop = None
        try:
            next(gen)
        except StopIteration as stop:
            with_stop = stop.value
        return first, outside, second, with_stop

    assert run(munet) == run(torch) == (False, True, ("hello", False), "done")


def test_set_grad_enabled_as_a_call_and_a_block():
    for lib in (munet, torch):
        lib.set_grad_enabled(False)
        assert not lib.is_grad_enabled()
        lib.set_grad_enabled(True)
        with lib.set_grad_enabled(False):
            assert not lib.is_grad_enabled()
        assert lib.is_grad_enabled()


def test_grad_mode_contexts_refuse_arguments():
    with pytest.raises(TypeError, match="takes no arguments"):
        munet.no_grad(3)


def test_is_inference_as_torch():
    def run(lib):
        x = lib.ones(3)
        with lib.inference_mode():
            made, view_of_normal, fresh = x * 2, x[1:], lib.zeros(2)
            with lib.inference_mode(False):
                outside = x * 3
        with lib.no_grad():
            no_grad = x * 2
        return [
            t.is_inference()
            for t in (x, made, view_of_normal, fresh, outside, no_grad, made[0], made.detach(), made.view(3, 1))
        ]

    assert run(munet) == run(torch)
