"""Copies of a module on other devices, and running them in threads (``torch.nn.parallel``'s
``replicate`` and ``parallel_apply``).

A replica is a shallow copy of every submodule whose parameters are replaced by tensors on the
replica's device; the forward code and the non-tensor attributes are shared. Grad mode,
inference mode and autocast are per thread in MuNet, so each worker thread takes the caller's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from contextlib import ExitStack

from munet.amp.autocast_mode import _State as _AutocastState
from munet.amp.autocast_mode import autocast
from munet.autograd.grad_mode import inference_mode, is_grad_enabled, is_inference_mode_enabled, set_grad_enabled
from munet.nn.module import Module


def replicate_module(module: Module, param_on_device: Callable, buffer_on_device: Callable) -> Module:
    """A copy of ``module`` whose parameters are ``param_on_device(p)`` and buffers ``buffer_on_device(b)``.

    Submodules shared inside ``module`` stay shared in the copy, and so does every parameter.
    """
    memo: dict[int, object] = {}

    def mapped(t, fn):
        if t is None:
            return None
        if id(t) not in memo:
            memo[id(t)] = fn(t)
        return memo[id(t)]

    def copy(m: Module) -> Module:
        if id(m) in memo:
            return memo[id(m)]
        replica = object.__new__(type(m))
        replica.__dict__.update(m.__dict__)
        memo[id(m)] = replica
        d = replica.__dict__
        d["_parameters"] = OrderedDict((k, mapped(p, param_on_device)) for k, p in m._parameters.items())
        d["_buffers"] = OrderedDict((k, mapped(b, buffer_on_device)) for k, b in m._buffers.items())
        d["_modules"] = OrderedDict((k, None if c is None else copy(c)) for k, c in m._modules.items())
        return replica

    return copy(module)


def parallel_apply(fns: list[Callable], args: list[tuple], kwargs: list[dict], devices: list) -> list:
    """``fns[i](*args[i], **kwargs[i])`` in one thread each, under the caller's grad mode and autocast.

    Returns the results in order; the first failure is raised again here, naming its replica and device.
    """
    if len(fns) == 1:
        return [fns[0](*args[0], **kwargs[0])]
    grad_enabled, inference = is_grad_enabled(), is_inference_mode_enabled()
    casts = dict(_AutocastState.dtypes)  # device type -> dtype of the caller's autocast blocks
    cache_enabled = _AutocastState.cache_enabled
    results: list = [None] * len(fns)
    errors: list = [None] * len(fns)

    def work(i):
        try:
            with ExitStack() as modes:
                if inference:
                    modes.enter_context(inference_mode())
                modes.enter_context(set_grad_enabled(grad_enabled))
                for device_type, dtype in casts.items():
                    modes.enter_context(autocast(device_type, dtype=dtype, cache_enabled=cache_enabled))
                results[i] = fns[i](*args[i], **kwargs[i])
        except BaseException as e:  # noqa: BLE001 - raised again in the calling thread below
            errors[i] = e

    threads = [threading.Thread(target=work, args=(i,), name=f"munet-replica-{i}") for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, e in enumerate(errors):
        if e is not None:
            e.add_note(f"Caught in replica {i} on device {devices[i]} (munet.nn.parallel.parallel_apply)")
            raise e
    return results
