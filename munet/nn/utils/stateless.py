"""``nn.utils.stateless.functional_call``: run a module with some parameters and buffers replaced.

The given tensors are swapped into the module for the duration of one call and the originals are
put back afterwards, also when the call raises. The swap mutates the module, so a module must not
be called from another thread while a ``functional_call`` on it runs (PyTorch has the same rule).
"""

from __future__ import annotations

import contextlib

__all__ = ["functional_call"]


def _named_tensors(module) -> dict:
    return {
        **dict(module.named_parameters(remove_duplicate=False)),
        **dict(module.named_buffers(remove_duplicate=False)),
    }


def _untie(module, values: dict) -> dict:
    """``values`` plus, for each given name of a tied tensor, every other name tied to it."""
    names_of: dict[int, set] = {}
    for name, t in _named_tensors(module).items():
        names_of.setdefault(id(t), set()).add(name)
    tied = {n: names for names in names_of.values() if len(names) > 1 for n in names}
    given = set(values) & set(tied)
    for name in given:
        group = tied[name] & set(values)
        if len({id(values[n]) for n in group}) > 1:
            raise ValueError(
                f"functional_call got multiple values for keys {sorted(group)}, which are tied. "
                "Consider using tie_weights=False"
            )
    untied = dict(values)
    for name in given:
        for other in tied[name]:
            untied[other] = values[name]
    return untied


def _check_keys(module, values: dict) -> None:
    known = set(_named_tensors(module))
    unexpected = [k for k in values if k not in known]
    missing = sorted(known - set(values))
    errors = []
    if unexpected:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError(f"Error(s) in reparametrizing for {module._get_name()}:\n\t" + "\n\t".join(errors))


def _swap(module, name: str, value):
    """Put ``value`` at ``name``; return the function that puts back what was there."""
    path, _, attr = name.rpartition(".")
    owner = module.get_submodule(path)
    for slots in (owner._parameters, owner._buffers, owner.__dict__):
        if attr in slots:
            old = slots[attr]
            slots[attr] = value
            return lambda: slots.__setitem__(attr, old)
    owner.__dict__[attr] = value  # a new attribute (non-strict mode), removed afterwards
    return lambda: owner.__dict__.pop(attr, None)


@contextlib.contextmanager
def reparametrize_module(module, parameters_and_buffers: dict, *, tie_weights: bool = True, strict: bool = False):
    """Within the block, ``module`` holds ``parameters_and_buffers`` in place of its own tensors."""
    values = _untie(module, parameters_and_buffers) if tie_weights else dict(parameters_and_buffers)
    if strict:
        _check_keys(module, values)
    restores = []
    try:
        for name, value in values.items():
            restores.append(_swap(module, name, value))
        yield
    finally:
        for restore in reversed(restores):
            restore()


def functional_call(
    module, parameters_and_buffers: dict, args=None, kwargs=None, *, tie_weights: bool = True, strict: bool = False
):
    """``module(*args, **kwargs)`` with ``parameters_and_buffers`` (names as in ``state_dict``) in
    place of the module's own tensors; the module is unchanged afterwards.

    ``tie_weights``: a value given for one name of tied tensors replaces all of them. ``strict``:
    every parameter and buffer must be given, and nothing else. Not thread-safe on one module.

    >>> out = functional_call(model, {"weight": w2}, (x,))
    """
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **(kwargs or {}))
