"""``munet.func`` transforms: grad, grad_and_value, vjp, jacrev, jacfwd, hessian.

They follow ``torch.func``'s signatures and return structures (arguments may be nested
tuples, lists and dicts of tensors), computed with reverse-mode autograd instead of
functorch's levels: each call differentiates fresh copies of the chosen arguments with
``autograd.grad``. While grad mode is on, the backward pass is recorded, so the transforms
nest (``grad(grad(f))``, ``jacfwd(jacrev(f))``) and compose with ``backward()`` on tensors
the function closes over; a result that depends only on the transform's own inputs comes back
without history. ``jacfwd`` computes the same Jacobian as ``jacrev`` (MuNet has no
forward-mode AD).
"""

from __future__ import annotations

import functools

from munet._tensor import Tensor
from munet.autograd.grad_mode import enable_grad, is_grad_enabled
from munet.func.pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "vjp"]


def _positions(argnums, nargs: int, fn_name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(n, int) for n in nums):
        raise RuntimeError(f"{fn_name}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    for n in nums:
        if not -nargs <= n < nargs:
            raise RuntimeError(f"{fn_name}: Got argnums={n}, but only {nargs} positional inputs")
    return tuple(n % nargs for n in nums)


class _Linearization:
    """``func`` run on fresh differentiable copies of some arguments, ready to pull back cotangents."""

    def __init__(self, fn_name: str, args: tuple, positions: tuple[int, ...]):
        self.fn_name = fn_name
        self.create_graph = is_grad_enabled()
        self.specs = []
        self.inputs = []  # flat differentiable inputs, in argument order
        self.own = set()  # ids of the leaves this transform created
        args = list(args)
        for p in positions:
            leaves, spec = tree_flatten(args[p])
            fresh = [self._fresh(x) for x in leaves]
            self.specs.append((spec, len(fresh)))
            self.inputs.extend(fresh)
            args[p] = tree_unflatten(fresh, spec)
        self.args = tuple(args)

    def _fresh(self, x):
        if not isinstance(x, Tensor):
            raise RuntimeError(
                f"{self.fn_name}: expected the differentiated inputs to be Tensors, got {type(x).__name__}"
            )
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"{self.fn_name}: only floating point Tensors can be differentiated, got {x.dtype}")
        if x.requires_grad and self.create_graph:
            return x.view_as(x)  # keep the outer history, so an enclosing transform sees through
        fresh = x.detach().requires_grad_(True)
        self.own.add(id(fresh))
        return fresh

    def pull(self, outputs: list, cotangents: list) -> list:
        """Flat gradients of ``sum(<outputs, cotangents>)`` w.r.t. the inputs; zeros where unused."""
        from munet.autograd import grad
        from munet.ops.creation import zeros_like

        pairs = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad]
        grads = [None] * len(self.inputs)
        if pairs:
            grads = grad(
                [o for o, _ in pairs],
                self.inputs,
                [c for _, c in pairs],
                retain_graph=True,
                create_graph=self.create_graph,
                allow_unused=True,
            )
        return [self.prune(zeros_like(x) if g is None else g) for g, x in zip(grads, self.inputs)]

    def split(self, flat: list) -> list:
        """Flat per-input values regrouped into the differentiated arguments' structures."""
        out, start = [], 0
        for spec, n in self.specs:
            out.append(tree_unflatten(flat[start : start + n], spec))
            start += n
        return out

    def prune(self, value):
        """``value`` detached unless it depends on a tensor outside this transform."""
        if not isinstance(value, Tensor) or value.grad_fn is None:
            return value.detach() if isinstance(value, Tensor) and id(value) in self.own else value
        return value if _reaches_outer_leaf(value, self.own) else value.detach()


def _reaches_outer_leaf(t: Tensor, own: set) -> bool:
    seen = set()
    stack = [t.grad_fn]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for edge in node.next_edges:
            if edge is None:
                continue
            if edge[1] < 0:
                if id(edge[0]) not in own:
                    return True
            else:
                stack.append(edge[0])
    return False


def _split_aux(output, has_aux: bool, fn_name: str):
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(
            f"{fn_name}(f)(*args): output of function f should be a tuple: (output, aux) if has_aux is True"
        )
    return output


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """A function returning ``(gradient, value)`` (``((gradient, aux), value)`` with ``has_aux``)
    of scalar-valued ``func`` w.r.t. the arguments ``argnums``."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with enable_grad():
            lin = _Linearization("grad_and_value", args, _positions(argnums, len(args), "grad_and_value"))
            output, aux = _split_aux(func(*lin.args, **kwargs), has_aux, "grad_and_value")
            if not isinstance(output, Tensor):
                raise RuntimeError(
                    f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(output)}"
                )
            if output.dim() != 0:
                raise RuntimeError(
                    "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with "
                    f"{output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?"
                )
            from munet.ops.creation import ones_like

            grads = lin.split(lin.pull([output], [ones_like(output)]))
        grads = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = lin.prune(output)
        if has_aux:
            return (grads, tree_map(lin.prune, aux)), value
        return grads, value

    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """The gradient of scalar-valued ``func`` w.r.t. argument ``argnums`` (a tuple: one per argument).

    >>> munet.func.grad(lambda x: (x**2).sum())(munet.ones(3))   # 2 * x
    """
    with_value = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return with_value(*args, **kwargs)[0]

    return wrapper


def vjp(func, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)``; ``vjp_fn(cotangents)`` returns one gradient per primal (a tuple)."""
    with enable_grad():
        lin = _Linearization("vjp", primals, tuple(range(len(primals))))
        output, aux = _split_aux(func(*lin.args), has_aux, "vjp")
    flat_out, out_spec = tree_flatten(output)
    for o in flat_out:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"vjp(f, *primals): Expected f to return Tensors, got {type(o).__name__}")

    def vjp_fn(cotangents):
        flat_ct, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure of outputs to the function"
            )
        for o, c in zip(flat_out, flat_ct):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(
                    f"Mismatch in shape: grad_output has a shape of {list(c.shape)} and output has a shape of "
                    f"{list(o.shape)}."
                )
        return tuple(lin.split(lin.pull(flat_out, flat_ct)))

    result = tree_map(lin.prune, output)
    if has_aux:
        return result, vjp_fn, tree_map(lin.prune, aux)
    return result, vjp_fn


def jvp(func, primals: tuple, tangents: tuple, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J @ tangents)``, by the double-backward trick (no forward-mode AD)."""
    from munet.autograd import grad as autograd_grad
    from munet.ops.creation import zeros_like

    for name, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, tuple):
            raise RuntimeError(
                f"jvp(f, primals, tangents): Expected {name} to be a tuple. E.g. it should be valid to call f(*primals)."
            )
    flat_tangents, tangent_spec = tree_flatten(tangents)
    if tangent_spec != tree_flatten(primals)[1]:
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python structure."
        )
    with enable_grad():
        lin = _Linearization("jvp", primals, tuple(range(len(primals))))
        for p, t in zip(lin.inputs, flat_tangents):
            if tuple(p.shape) != tuple(t.shape):
                raise RuntimeError(
                    f"jvp(f, primals, tangents): Expected primals and tangents to have the same shape, got "
                    f"{list(p.shape)} and {list(t.shape)}"
                )
        output, aux = _split_aux(func(*lin.args), has_aux, "jvp")
        flat_out, out_spec = tree_flatten(output)
        dummies = [zeros_like(o, requires_grad=True) for o in flat_out]
        live = [i for i, o in enumerate(flat_out) if o.requires_grad]
        tangent_out = [None] * len(flat_out)
        if live:
            # d/du <J^T u, t> = J t: the first gradient is linear in the dummy cotangents u.
            grads = autograd_grad(
                [flat_out[i] for i in live],
                lin.inputs,
                [dummies[i] for i in live],
                create_graph=True,
                allow_unused=True,
            )
            pairs = [(g, t) for g, t in zip(grads, flat_tangents) if g is not None and g.requires_grad]
            if pairs:
                tangent_out = autograd_grad(
                    [g for g, _ in pairs],
                    dummies,
                    [t for _, t in pairs],
                    create_graph=lin.create_graph,
                    allow_unused=True,
                )
        tangent_out = [lin.prune(zeros_like(o) if g is None else g) for g, o in zip(tangent_out, flat_out)]
    result = (tree_map(lin.prune, output), tree_unflatten(tangent_out, out_spec))
    return (*result, tree_map(lin.prune, aux)) if has_aux else result


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None):
    """The Jacobian of ``func`` w.r.t. argument(s) ``argnums``: each output leaf becomes, per
    argument leaf, a tensor of shape ``output.shape + input.shape``. ``chunk_size`` is accepted; the
    rows are computed one backward pass each."""
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    return _jacobian_transform(func, argnums, has_aux, "jacrev")


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """``torch.func.jacfwd``'s result, computed like :func:`jacrev` in reverse mode."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    return _jacobian_transform(func, argnums, has_aux, "jacfwd")


def _jacobian_transform(func, argnums, has_aux: bool, fn_name: str):
    from munet.ops.creation import ones_like, zeros_like
    from munet.ops.movement import stack

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with enable_grad():
            lin = _Linearization(fn_name, args, _positions(argnums, len(args), fn_name))
            output, aux = _split_aux(func(*lin.args, **kwargs), has_aux, fn_name)
            flat_out, out_spec = tree_flatten(output)
            per_output = []
            for o in flat_out:
                if not isinstance(o, Tensor):
                    raise RuntimeError(f"{fn_name}: Expected f to return Tensors, got {type(o).__name__}")
                rows = []
                flat_o = o.reshape(-1)
                for k in range(o.numel()):
                    rows.append(lin.pull([flat_o[k]], [ones_like(flat_o[k])]))
                jac = [
                    stack([r[j] for r in rows]).view(*o.shape, *x.shape)
                    if rows
                    else zeros_like(x).expand(*o.shape, *x.shape).contiguous()
                    for j, x in enumerate(lin.inputs)
                ]
                grouped = lin.split(jac)
                per_output.append(grouped[0] if isinstance(argnums, int) else tuple(grouped))
        result = tree_unflatten(per_output, out_spec)
        if has_aux:
            return result, tree_map(lin.prune, aux)
        return result

    return wrapper


def hessian(func, argnums=0):
    """``jacfwd(jacrev(func, argnums), argnums)``: second derivatives of ``func``."""
    return jacfwd(jacrev(func, argnums), argnums)
