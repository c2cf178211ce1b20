"""``nn.factory_kwargs``: the device/dtype/memory_format keyword arguments of a module's constructor, checked."""

from __future__ import annotations

__all__ = ["factory_kwargs"]

_SIMPLE_KEYS = {"device", "dtype", "memory_format"}


def factory_kwargs(kwargs) -> dict:
    """``kwargs`` reduced to the factory arguments (``device``, ``dtype``, ``memory_format``, plus those
    given in a nested ``factory_kwargs`` dict), as PyTorch's; any other key raises ``TypeError``.

    >>> munet.nn.factory_kwargs({"dtype": munet.float64, "factory_kwargs": {"device": "cpu"}})
    {'device': 'cpu', 'dtype': munet.float64}
    """
    if kwargs is None:
        return {}
    expected = _SIMPLE_KEYS | {"factory_kwargs"}
    if not kwargs.keys() <= expected:
        raise TypeError(f"unexpected kwargs {kwargs.keys() - expected}")
    result = dict(kwargs.get("factory_kwargs", {}))
    for key in _SIMPLE_KEYS:
        if key in kwargs:
            if key in result:
                raise TypeError(f"{key} specified twice, in **kwargs and in factory_kwargs")
            result[key] = kwargs[key]
    return result
