"""``munet.func.vmap`` (also ``munet.vmap``): ``torch.func.vmap``'s interface, computed as a loop.

``vmap(func, in_dims, out_dims)(*args)`` calls ``func`` once per index of the mapped dimension,
on the arguments with that dimension selected away, and stacks each output along its ``out_dims``.
The results, errors for mismatched structures and gradients (the slices and the stack are ordinary
differentiable ops) are ``torch.func.vmap``'s; the cost is one call of ``func`` per batch element
rather than one batched call. ``in_dims``/``out_dims`` are prefixes of the argument/output trees
(nested tuples, lists and dicts). ``randomness``: ``"error"`` raises when ``func`` draws random
numbers, ``"different"`` draws fresh numbers per slice, ``"same"`` rewinds every generator ``func``
drew from, so each slice sees the same numbers. ``chunk_size`` is checked and has no other effect
(the loop already runs one element at a time).

Where the loop differs from PyTorch's batching: ``func`` sees real per-sample tensors, so
``.item()`` and data-dependent Python control flow work (PyTorch refuses them); ``out_dims=None``
accepts an output whose value is equal for every slice (PyTorch asks whether it depends on a
mapped input); a batch of size 0 calls ``func`` once on zero-filled samples to learn the output
shapes.
"""

from __future__ import annotations

import functools

from munet._tensor import Tensor
from munet.func.pytree import tree_flatten, tree_unflatten

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """``func`` mapped over dimension ``in_dims`` of its arguments, outputs stacked at ``out_dims``.

    >>> munet.vmap(munet.dot)(munet.randn(5, 3), munet.randn(5, 3)).shape   # five dot products
    munet.Size([5])
    """
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    name = getattr(func, "__name__", repr(func))

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        where = f"vmap({name}, in_dims={in_dims!r}, ...)(<inputs>)"
        if not args:
            raise ValueError(
                f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying to "
                "vmap over a function with no inputs. The latter is unsupported."
            )
        if in_dims is None or not (_is_dim(in_dims) or isinstance(in_dims, tuple)):
            raise ValueError(
                f"{where}: expected `in_dims` to be int or a (potentially nested) tuple matching the structure "
                f"of inputs, got: {type(in_dims)}."
            )
        leaves, spec = tree_flatten(args)
        dims = _prefix_dims(in_dims, args, where, "in_dims", "inputs")
        size = _batch_size(leaves, dims, where)
        with _Randomness(randomness) as rng:
            results = []
            for i in range(max(size, 1)):
                rng.next_slice(i)
                sliced = [_sample(x, d, i, size) for x, d in zip(leaves, dims)]
                results.append(func(*tree_unflatten(sliced, spec), **kwargs))
        return _combine(results, size, out_dims, name)

    return wrapped


def _is_dim(d) -> bool:
    return d is None or (isinstance(d, int) and not isinstance(d, bool))


def _prefix_dims(dims, tree, where: str, what: str, of: str) -> list:
    """One dim per leaf of ``tree``: ``dims`` is a prefix of ``tree`` (a dim covers a whole subtree)."""
    if _is_dim(dims):
        return [dims] * len(tree_flatten(tree)[0])
    mismatch = ValueError(f"{where}: {what} is not compatible with the structure of `{of}`.")
    if isinstance(dims, dict):
        if not isinstance(tree, dict) or list(dims.keys()) != list(tree.keys()):
            raise mismatch
        return [d for k in dims for d in _prefix_dims(dims[k], tree[k], where, what, of)]
    if isinstance(dims, (tuple, list)):
        if type(tree) is not type(dims) or len(tree) != len(dims):
            raise mismatch
        return [d for sub, t in zip(dims, tree) for d in _prefix_dims(sub, t, where, what, of)]
    raise ValueError(
        f"{where}: {what} must be made of ints and None in tuples, lists and dicts matching `{of}`, "
        f"got {type(dims).__name__}"
    )


def _batch_size(leaves: list, dims: list, where: str) -> int:
    sizes = []
    for x, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(x, Tensor):
            raise ValueError(
                f"{where}: Got in_dim={d} for an input but the input is of type {type(x)}. We cannot vmap over "
                "non-Tensor arguments, please use None as the respective in_dim"
            )
        n = x.dim()
        if not -n <= d < n:
            raise ValueError(
                f"{where}: Got in_dim={d} for some input, but that input is a Tensor of dimensionality {n} so "
                f"expected in_dim to satisfy -{n} <= in_dim < {n}."
            )
        sizes.append(x.shape[d])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if len(set(sizes)) > 1:
        raise ValueError(
            "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
            f"{sizes} for the mapped dimension"
        )
    return sizes[0]


def _sample(x, d, i: int, size: int):
    """Element ``i`` of ``x`` along ``d``; a zero-filled stand-in when the batch is empty."""
    if d is None:
        return x
    if size == 0:
        from munet.ops.creation import zeros

        shape = list(x.shape)
        del shape[d]
        return zeros(shape, dtype=x.dtype, device=x.device)
    return x.select(d, i)


def _combine(results: list, size: int, out_dims, name: str):
    where = f"vmap({name}, ..., out_dims={out_dims!r})(<inputs>)"
    first = results[0]
    if isinstance(out_dims, tuple) and len(out_dims) == 1 and not isinstance(first, tuple):
        out_dims = out_dims[0]
    if not _is_dim(out_dims) and not isinstance(out_dims, (tuple, list, dict)):
        raise ValueError(
            f"vmap({name}, ..., out_dims={out_dims!r}): `out_dims` must be an int, None or a python collection of "
            "ints representing where in the outputs the vmapped dimension should appear."
        )
    leaves, spec = tree_flatten(first)
    dims = _prefix_dims(out_dims, first, where, "out_dims", "outputs")
    per_slice = [leaves] + [tree_flatten(r)[0] for r in results[1:]]
    out = []
    for j, d in enumerate(dims):
        column = [s[j] for s in per_slice]
        if d is None:
            out.append(_unbatched(column, name))
            continue
        for v in column:
            if not isinstance(v, Tensor):
                raise ValueError(
                    f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(v)}. Did you mean to set "
                    "out_dims= to None for output?"
                )
        out.append(_stack(column, d, size))
    return tree_unflatten(out, spec)


def _unbatched(column: list, name: str):
    from munet.ops.elementwise import equal

    first = column[0]
    for v in column[1:]:
        same = equal(first, v) if isinstance(first, Tensor) and isinstance(v, Tensor) else v == first
        if not same:
            raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
    return first


def _stack(column: list, d: int, size: int):
    from munet.ops.movement import stack

    stacked = stack(column, dim=d)
    return stacked.narrow(d, 0, 0) if size == 0 else stacked


class _Randomness:
    """Watches the generators while ``func`` runs per slice, as ``randomness`` asks."""

    def __init__(self, mode: str):
        self.mode = mode
        self.start = {}  # id(generator) -> (generator, its state before its first draw)

    def __enter__(self):
        from munet.ops import random

        random.draw_watchers.append(self.watch)
        return self

    def __exit__(self, *exc):
        from munet.ops import random

        random.draw_watchers.remove(self.watch)
        return False

    def watch(self, generator) -> None:
        if self.mode == "error":
            raise RuntimeError(
                "vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                "'different' randomness flags on vmap or perform the randomness operation out of vmap"
            )
        if self.mode == "same":
            if id(generator) not in self.start:
                self.start[id(generator)] = (generator, generator.get_state())

    def next_slice(self, i: int) -> None:
        if i and self.mode == "same":
            for generator, state in self.start.values():
                generator.set_state(state)
