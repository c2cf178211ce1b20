"""``munet.func.functional_call``: a module called with given parameters and buffers."""

from __future__ import annotations

from munet.nn.utils.stateless import functional_call as _stateless_call


def functional_call(
    module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True, strict: bool = False
):
    """``module(*args, **kwargs)`` with the tensors of ``parameter_and_buffer_dicts`` (a dict, or a
    tuple/list of dicts with disjoint keys) swapped in for the call and restored after it, also on
    an exception. Not thread-safe on one module: the swap mutates it.

    >>> params = dict(model.named_parameters())
    >>> munet.func.grad(lambda p, x: functional_call(model, p, (x,)).sum())(params, x)
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, (list, tuple)):
        merged = {}
        repeated = []
        for d in parameter_and_buffer_dicts:
            repeated.extend(k for k in d if k in merged)
            merged.update(d)
        if repeated:
            raise ValueError(
                f"{sorted(set(repeated))} appeared in multiple dictionaries; behavior of functional call is ambiguous"
            )
    else:
        raise ValueError(
            "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
            f"{type(parameter_and_buffer_dicts)}"
        )
    return _stateless_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)
