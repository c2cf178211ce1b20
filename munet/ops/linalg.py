"""Linear algebra: matmul (the primitive) and everything built on it.

``matmul_op`` is the one primitive: a batched matrix product of rank >= 2 operands with
broadcast batch dims, computed by NumPy's BLAS on the CPU. ``matmul`` adds PyTorch's rules
for 1-D operands; ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``mv``, ``dot``, ``inner``,
``outer``, ``tensordot``, ``kron``, ``einsum``, ``linear`` and ``bilinear`` are composites of
``matmul_op`` and views, so their gradients (and second derivatives) follow from
``matmul``'s rule.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet._tensor import Tensor
from munet.ops._autocast import casts_to_one_dtype, lower_precision_under_autocast
from munet.ops._registry import Meta, apply, define
from munet.ops._utils import broadcast_shapes, is_tensor, reduce_grad

__all__ = [
    "matmul",
    "mm",
    "bmm",
    "baddbmm",
    "addbmm",
    "addmm",
    "addmv",
    "addr",
    "mv",
    "dot",
    "vdot",
    "inner",
    "outer",
    "ger",
    "einsum",
    "tensordot",
    "kron",
    "bilinear",
]
__functional__ = ["linear", "bilinear"]
__tensor_methods__ = [
    "matmul",
    "mm",
    "bmm",
    "baddbmm",
    "baddbmm_",
    "addbmm",
    "addbmm_",
    "addmm",
    "addmm_",
    "addmv",
    "addmv_",
    "addr",
    "addr_",
    "mv",
    "dot",
    "vdot",
    "inner",
    "outer",
    "ger",
    "kron",
]


def _fmt(shape) -> str:
    return "x".join(str(n) for n in shape)


# the primitive -------------------------------------------------------------------------------------


def _matmul_meta(a, b):
    sa, sb = a._shape, b._shape
    if len(sa) == 2 and len(sb) == 2:  # the common case, first (unpacked: a Size's indexing is a Python method)
        m, k = sa
        k2, n = sb
        if k == k2:
            return Meta((m, n), a._dtype)
    sa, sb = tuple(sa), tuple(sb)
    if len(sa) < 2 or len(sb) < 2:
        raise RuntimeError(f"matmul primitive expects rank >= 2 operands, got {list(sa)} and {list(sb)}")
    if sa[-1] != sb[-2]:
        raise RuntimeError(f"matmul: mat1 and mat2 shapes cannot be multiplied ({_fmt(sa[-2:])} and {_fmt(sb[-2:])})")
    batch = broadcast_shapes(sa[:-2], sb[:-2], op="matmul")
    return Meta(batch + (sa[-2], sb[-1]), a._dtype)


def _column_major(shape, stride) -> bool:
    """Whether a 2-D operand of ``shape`` with ``stride`` is the transpose of a row-major matrix
    (``weight.t()`` in ``linear``)."""
    return len(shape) == 2 and shape[0] > 1 and shape[1] > 1 and tuple(stride) == (1, shape[0])


def _matmul_backward(ctx, g):
    need = ctx.needs_input_grad
    ga = gb = None
    if need[0]:
        ga = reduce_grad(matmul(g, ctx.saved_tensor("other").mT), ctx.input_shapes[0])
    if need[1]:
        a = ctx.saved_tensor("self")
        if a.ndim == 2 and _column_major(ctx.input_shapes[1], ctx.input_strides[1]):
            # (g^T a)^T: the gradient in the operand's own layout, so the weight gradient of
            # ``linear`` (through ``weight.t()``) arrives row-major like the weight, needing no copy
            gb = matmul(g.mT, a).mT
        else:
            gb = reduce_grad(matmul(a.mT, g), ctx.input_shapes[1])
    return ga, gb


matmul_op = define(
    "matmul",
    inputs=("self", "other"),
    meta=_matmul_meta,
    backward=_matmul_backward,
    saves=(("self", 1), ("other", 0)),
    saves_input_strides=True,
    backward_name="MmBackward0",
)


_MATMUL_PRODUCTS = ("matmul", "mm", "bmm")  # run the matmul primitive, whose operands autocast casts


def _check_operands(op: str, *tensors) -> None:
    """PyTorch's BLAS ops take tensors of one dtype (no promotion; under autocast, the matmul
    products take any floating mix autocast casts) and no bool."""
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected Tensor arguments, got {type(t).__name__}")
    first = tensors[0]._dtype
    for t in tensors[1:]:
        if t._dtype is not first and not (op in _MATMUL_PRODUCTS and casts_to_one_dtype((first, t.dtype))):
            raise RuntimeError(
                f"{op}: expected all operands to have the same dtype, but got {first.name} and {t.dtype.name}"
            )
    if first is D.bool_:
        raise RuntimeError(f"{op}: not implemented for 'bool' tensors")


def matmul(input, other, *, out=None):
    """Matrix product with PyTorch semantics: 1-D x 1-D is a dot product, a 1-D operand is
    a vector (prepended/appended dim removed afterwards), batch dims broadcast.

    >>> munet.matmul(munet.ones(5, 2, 3), munet.ones(3, 4)).shape
    munet.Size([5, 2, 4])
    """
    if (  # the common case, checked inline (what _check_operands checks): two matrices of one dtype
        isinstance(input, Tensor)
        and isinstance(other, Tensor)
        and input._dtype is other._dtype
        and input._dtype is not D.bool_
        and len(input._shape) == 2
        and len(other._shape) == 2
    ):
        return apply(matmul_op, input, other) if out is None else _out(apply(matmul_op, input, other), out)
    _check_operands("matmul", input, other)
    if len(input._shape) == 2 and len(other._shape) == 2:  # nothing to reshape
        return apply(matmul_op, input, other) if out is None else _out(apply(matmul_op, input, other), out)
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(
            f"matmul: both arguments to matmul need to be at least 1D, but they are {input.ndim}D and {other.ndim}D"
        )
    if (input.ndim == 1 or other.ndim == 1) and input.shape[-1] != other.shape[-2 if other.ndim > 1 else -1]:
        raise RuntimeError(
            f"matmul: size mismatch, got shapes {list(input.shape)} and {list(other.shape)} "
            f"({input.shape[-1]} != {other.shape[-2 if other.ndim > 1 else -1]})"
        )
    a = input.unsqueeze(0) if input.ndim == 1 else input
    b = other.unsqueeze(-1) if other.ndim == 1 else other
    if a.ndim > 2 and b.ndim == 2:
        # Fold the batch into the rows: one BLAS call, and the weight gradient is one
        # matrix product instead of a batch of them summed afterwards.
        lead = tuple(a.shape[:-1])
        result = apply(matmul_op, a.reshape(math.prod(lead), a.shape[-1]), b).reshape(lead + (b.shape[-1],))
    else:
        result = apply(matmul_op, a, b)
    if input.ndim == 1:
        result = result.squeeze(-2)
    if other.ndim == 1:
        result = result.squeeze(-1)
    return _out(result, out)


def _out(result, out):
    if out is None:
        return result
    from munet.ops.elementwise import _out as copy_out

    return copy_out(result, out)


# fixed-rank products -------------------------------------------------------------------------------


def mm(input, mat2, *, out=None):
    """``input`` (n x m) @ ``mat2`` (m x p); no broadcasting."""
    _check_operands("mm", input, mat2)
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got shapes {list(input.shape)} and {list(mat2.shape)}")
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"mm: mat1 and mat2 shapes cannot be multiplied ({_fmt(input.shape)} and {_fmt(mat2.shape)})"
        )
    return _out(apply(matmul_op, input, mat2), out)


def bmm(input, mat2, *, out=None):
    """Batched ``input`` (b x n x m) @ ``mat2`` (b x m x p); batch sizes must be equal."""
    _check_operands("bmm", input, mat2)
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got shapes {list(input.shape)} and {list(mat2.shape)}")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(
            f"bmm: batch1 and batch2 must have the same batch size, got shapes {list(input.shape)} and {list(mat2.shape)}"
        )
    if input.shape[2] != mat2.shape[1]:
        raise RuntimeError(
            f"bmm: batch1 and batch2 shapes cannot be multiplied ({_fmt(input.shape)} and {_fmt(mat2.shape)})"
        )
    return _out(apply(matmul_op, input, mat2), out)


def mv(input, vec, *, out=None):
    """Matrix (n x m) times vector (m) -> vector (n)."""
    _check_operands("mv", input, vec)
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(
            f"mv: expected a 2-D matrix and a 1-D vector, got shapes {list(input.shape)} and {list(vec.shape)}"
        )
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"mv: size mismatch, got mat ({_fmt(input.shape)}) and vec ({vec.shape[0]})")
    return _out(apply(matmul_op, input, vec.unsqueeze(-1)).squeeze(-1), out)


def dot(input, tensor, *, out=None):
    """Inner product of two 1-D tensors of equal length (a 0-d tensor)."""
    if input.ndim != 1 or tensor.ndim != 1:
        raise RuntimeError(f"dot: 1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors")
    if input.dtype is not tensor.dtype:
        raise RuntimeError(
            f"dot: expected both vectors to have same dtype, but found {input.dtype.name} and {tensor.dtype.name}"
        )
    _check_operands("dot", input, tensor)
    if input.shape[0] != tensor.shape[0]:
        raise RuntimeError(
            f"dot: inconsistent tensor size, expected tensor [{input.shape[0]}] and src [{tensor.shape[0]}] to have the "
            f"same number of elements, but got {input.shape[0]} and {tensor.shape[0]} elements respectively"
        )
    return _out(apply(matmul_op, input.unsqueeze(0), tensor.unsqueeze(-1)).reshape(()), out)


def vdot(input, other, *, out=None):
    """``dot`` with the first argument conjugated; the same as ``dot`` for real tensors."""
    from munet.ops.complex import conj

    return dot(conj(input), other, out=out)


def outer(input, vec2, *, out=None):
    """Outer product of two 1-D tensors: ``out[i, j] = input[i] * vec2[j]``."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, got shapes {list(input.shape)} and {list(vec2.shape)}")
    return _out(input.unsqueeze(1) * vec2.unsqueeze(0), out)


ger = outer


def inner(input, other, *, out=None):
    """Sum over the last dims: shape ``input.shape[:-1] + other.shape[:-1]``; scalars multiply."""
    if input.ndim == 0 or other.ndim == 0:
        return _out(input * other, out)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes {list(input.shape)} and {list(other.shape)}"
        )
    return _out(tensordot(input, other, dims=([input.ndim - 1], [other.ndim - 1])), out)


# add-and-multiply ----------------------------------------------------------------------------------


def _scaled_sum(op: str, input, product, beta, alpha):
    """``beta * input + alpha * product``; ``input`` is ignored (NaNs too) when beta is 0."""
    if not input.dtype.is_floating_point and (isinstance(beta, float) or isinstance(alpha, float)):
        raise RuntimeError(
            f"{op}: for integral input tensors, arguments beta and alpha must not be floating point numbers"
        )
    if input.dtype is not product.dtype:
        raise RuntimeError(
            f"{op}: expected all operands to have the same dtype, but got {input.dtype.name} and {product.dtype.name}"
        )
    target = tuple(product.shape)
    if broadcast_shapes(tuple(input.shape), target, op=op) != target:
        raise RuntimeError(
            f"{op}: the input of shape {list(input.shape)} cannot be broadcast to the result shape {list(target)}"
        )
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input if beta == 1 else input * beta)


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)``; ``input`` broadcasts to (n x p)."""
    return _out(_scaled_sum("addmm", input, mm(mat1, mat2), beta, alpha), out)


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat @ vec)``."""
    return _out(_scaled_sum("addmv", input, mv(mat, vec), beta, alpha), out)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * bmm(batch1, batch2)``; ``input`` broadcasts to (b x n x p)."""
    return _out(_scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha), out)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    return _out(_scaled_sum("addbmm", input, bmm(batch1, batch2).sum(0), beta, alpha), out)


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * outer(vec1, vec2)``."""
    return _out(_scaled_sum("addr", input, outer(vec1, vec2), beta, alpha), out)


def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    return self.copy_(addmm(self, mat1, mat2, beta=beta, alpha=alpha))


def addmv_(self, mat, vec, *, beta=1, alpha=1):
    return self.copy_(addmv(self, mat, vec, beta=beta, alpha=alpha))


def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    return self.copy_(baddbmm(self, batch1, batch2, beta=beta, alpha=alpha))


def addbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    return self.copy_(addbmm(self, batch1, batch2, beta=beta, alpha=alpha))


def addr_(self, vec1, vec2, *, beta=1, alpha=1):
    return self.copy_(addr(self, vec1, vec2, beta=beta, alpha=alpha))


# tensordot and kron --------------------------------------------------------------------------------


def _tensordot_dims(a, b, dims):
    if is_tensor(dims):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot: expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot: dims ({dims}) exceeds the rank of an operand ({a.ndim}D and {b.ndim}D)")
        return list(range(a.ndim - dims, a.ndim)), list(range(dims))
    if len(dims) != 2:
        raise RuntimeError(f"tensordot: dims must be an int or a pair of dim lists, got {dims!r}")
    da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise RuntimeError(f"tensordot: both dimension lists should have same length, got {len(da)} and {len(db)}")
    from munet.ops._utils import wrap_dim

    return [wrap_dim(d, a.ndim, "tensordot") for d in da], [wrap_dim(d, b.ndim, "tensordot") for d in db]


def tensordot(a, b, dims=2, out=None):
    """Contract ``dims`` of ``a`` with ``dims`` of ``b`` (an int: the last/first ``dims``)."""
    _check_operands("tensordot", a, b)
    da, db = _tensordot_dims(a, b, dims)
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(
                f"tensordot: contracted dimensions need to match, but first has size {a.shape[x]} in dim {x} "
                f"and second has size {b.shape[y]} in dim {y}"
            )
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    left = a.permute(free_a + da).reshape(-1, k)
    right = b.permute(db + free_b).reshape(k, -1)
    result = apply(matmul_op, left, right)
    shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return _out(result.reshape(shape), out)


def kron(input, other, *, out=None):
    """Kronecker product: block ``i`` of the result is ``input[i] * other``."""
    n = max(input.ndim, other.ndim)
    sa = (1,) * (n - input.ndim) + tuple(input.shape)
    sb = (1,) * (n - other.ndim) + tuple(other.shape)
    a = input.reshape(tuple(x for s in sa for x in (s, 1)))
    b = other.reshape(tuple(x for s in sb for x in (1, s)))
    return _out((a * b).reshape(tuple(x * y for x, y in zip(sa, sb))), out)


# einsum ------------------------------------------------------------------------------------------


def _sublist_equation(args):
    """Convert ``einsum(op0, [0, 1], op1, [1, 2], [0, 2])`` to an equation and operands."""

    def letters(sub):
        out = []
        for s in sub:
            if s is Ellipsis:
                out.append("...")
            elif isinstance(s, int) and 0 <= s < 52:
                out.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
            else:
                raise ValueError(f"einsum(): expected subscript in [0, 52) or Ellipsis, got {s!r}")
        return "".join(out)

    operands, terms = list(args[0::2]), [letters(s) for s in args[1::2]]
    if len(args) % 2:
        operands = operands[:-1]
        return ",".join(terms) + "->" + letters(args[-1]), operands
    return ",".join(terms), operands


def _parse_term(term: str, ndim: int, index: int) -> list:
    """Labels of one operand's dims: letters, and ``("...", k)`` for the k-th ellipsis dim from the right."""
    if term.count("...") > 1:
        raise RuntimeError(f"einsum(): found more than one ellipsis ('...') in the subscripts of operand {index}")
    head, dots, tail = term.partition("...")
    for ch in head + tail:
        if not ch.isalpha() or not ch.isascii():
            raise RuntimeError(f"einsum(): invalid subscript given in the equation: {ch!r} (letters a-z, A-Z only)")
    n_letters = len(head) + len(tail)
    if not dots:
        if n_letters != ndim:
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({n_letters}) does not match the number of "
                f"dimensions ({ndim}) for operand {index} and no ellipsis was given"
            )
        return list(head)
    n_dots = ndim - n_letters
    if n_dots < 0:
        raise RuntimeError(
            f"einsum(): the number of subscripts in the equation ({n_letters}) is more than the number of "
            f"dimensions ({ndim}) for operand {index}"
        )
    return list(head) + [("...", n_dots - j) for j in range(n_dots)] + list(tail)


def _output_labels(rhs: str | None, input_labels: list) -> list:
    n_dots = max((lab[1] for labels in input_labels for lab in labels if isinstance(lab, tuple)), default=0)
    ellipsis = [("...", n_dots - j) for j in range(n_dots)]
    if rhs is None:  # implicit: ellipsis dims, then the letters used exactly once, sorted
        counts: dict = {}
        for labels in input_labels:
            for lab in labels:
                if isinstance(lab, str):
                    counts[lab] = counts.get(lab, 0) + 1
        return ellipsis + sorted(lab for lab, c in counts.items() if c == 1)
    if rhs.count("...") > 1:
        raise RuntimeError("einsum(): found more than one ellipsis ('...') in the output subscripts")
    head, dots, tail = rhs.partition("...")
    seen = {lab for labels in input_labels for lab in labels}
    for ch in head + tail:
        if not ch.isalpha() or not ch.isascii():
            raise RuntimeError(f"einsum(): invalid subscript given in the equation: {ch!r} (letters a-z, A-Z only)")
        if ch not in seen:
            raise RuntimeError(f"einsum(): output subscript {ch} does not appear in the equation for any input operand")
        if (head + tail).count(ch) > 1:
            raise RuntimeError(f"einsum(): output subscript {ch} appears more than once in the output")
    return list(head) + (ellipsis if dots else []) + list(tail)


def _label_name(lab) -> str:
    return lab if isinstance(lab, str) else "..."


def _label_sizes(operands, input_labels) -> dict:
    sizes: dict = {}
    for i, (x, labels) in enumerate(zip(operands, input_labels)):
        for lab, n in zip(labels, x.shape):
            known = sizes.get(lab, 1)
            if n == 1 or n == known:
                sizes.setdefault(lab, n)
            elif known == 1:
                sizes[lab] = n
            else:
                raise RuntimeError(
                    f"einsum(): operands do not broadcast: subscript {_label_name(lab)} has size {known} "
                    f"in one operand and size {n} in operand {i} (shapes {[list(o.shape) for o in operands]})"
                )
    return sizes


def _take_diagonals(x, labels: list, index: int):
    """Repeated labels in one operand ('ii') become one dim: the diagonal, via a strided view."""
    unique = list(dict.fromkeys(labels))
    if len(unique) == len(labels):
        return x, labels
    x = x.contiguous()
    stride = x.stride()
    sizes, strides = [], []
    for lab in unique:
        dims = [d for d, other in enumerate(labels) if other == lab]
        lengths = {x.shape[d] for d in dims}
        if len(lengths) > 1:
            raise RuntimeError(
                f"einsum(): subscript {_label_name(lab)} is repeated for operand {index} but the sizes don't match, "
                f"{' != '.join(str(x.shape[d]) for d in dims)}"
            )
        sizes.append(x.shape[dims[0]])
        strides.append(sum(stride[d] for d in dims))
    return x.as_strided(tuple(sizes), tuple(strides), x.storage_offset()), unique


def _sum_labels(x, labels: list, drop: set):
    dims = [d for d, lab in enumerate(labels) if lab in drop]
    if not dims:
        return x, labels
    return x.sum(dim=dims), [lab for lab in labels if lab not in drop]


def _contract(a, la: list, b, lb: list, keep: set):
    """Multiply two labelled operands and sum the labels that are not kept: one matmul."""
    a, la = _sum_labels(a, la, {lab for lab in la if lab not in lb and lab not in keep})
    b, lb = _sum_labels(b, lb, {lab for lab in lb if lab not in la and lab not in keep})
    batch = [lab for lab in la if lab in lb and lab in keep]
    summed = [lab for lab in la if lab in lb and lab not in keep]
    left = [lab for lab in la if lab not in lb]
    right = [lab for lab in lb if lab not in la]
    size = dict(zip(la, a.shape)) | dict(zip(lb, b.shape))

    def prod(labels):
        return math.prod(size[lab] for lab in labels)

    nb, nl, nk, nr = prod(batch), prod(left), prod(summed), prod(right)
    a = a.permute([la.index(lab) for lab in batch + left + summed]).reshape(nb, nl, nk)
    b = b.permute([lb.index(lab) for lab in batch + summed + right]).reshape(nb, nk, nr)
    result = apply(matmul_op, a, b)
    labels = batch + left + right
    return result.reshape(tuple(size[lab] for lab in labels)), labels


def einsum(*args):
    """Einstein summation: ``einsum("bij,bjk->bik", a, b)``, operands as varargs or a list,
    ``...`` for broadcast dims, repeated subscripts for diagonals (``"ii->i"``, ``"ii"``).

    Each operand first loses its diagonals and its private summed dims; operands are then
    contracted left to right, each pair as one batched matmul.
    """
    if not args:
        raise RuntimeError("einsum(): must specify the equation string and at least one operand")
    if not isinstance(args[0], str):
        equation, operands = _sublist_equation(args)
    else:
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    _check_operands("einsum", *operands)
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        more = "more" if len(operands) > len(terms) else "fewer"
        raise RuntimeError(
            f"einsum(): {more} operands were provided than specified in the equation "
            f"({len(operands)} operands, {len(terms)} subscript groups in {equation!r})"
        )
    input_labels = [_parse_term(t, x.ndim, i) for i, (t, x) in enumerate(zip(terms, operands))]
    output = _output_labels(rhs if arrow else None, input_labels)
    diagonals = [_take_diagonals(x, labs, i) for i, (x, labs) in enumerate(zip(operands, input_labels))]
    sizes = _label_sizes([x for x, _ in diagonals], [labs for _, labs in diagonals])

    xs, labels = [], []
    for x, labs in diagonals:
        # A size-1 dim that broadcasts against a larger one does not depend on its label.
        squeeze = [d for d, lab in enumerate(labs) if x.shape[d] == 1 and sizes[lab] > 1]
        if squeeze:
            x = x.squeeze(tuple(squeeze))
            labs = [lab for d, lab in enumerate(labs) if d not in squeeze]
        xs.append(x)
        labels.append(labs)
    for i in range(len(xs)):
        elsewhere = set(output).union(*(set(labs) for j, labs in enumerate(labels) if j != i))
        xs[i], labels[i] = _sum_labels(xs[i], labels[i], set(labels[i]) - elsewhere)

    result, result_labels = xs[0], labels[0]
    for k in range(1, len(xs)):
        keep = set(output).union(*(set(labs) for labs in labels[k + 1 :]))
        result, result_labels = _contract(result, result_labels, xs[k], labels[k], keep)
    result, result_labels = _sum_labels(result, result_labels, set(result_labels) - set(output))
    return result.permute([result_labels.index(lab) for lab in output])


# nn.functional -----------------------------------------------------------------------------------


@lower_precision_under_autocast
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` over any leading dims; weight is (out_features, in_features)."""
    if weight.ndim not in (1, 2):
        raise RuntimeError(
            f"linear: expected weight of rank 1 or 2 (out_features, in_features), got shape {list(weight.shape)}"
        )
    if input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise RuntimeError(
            f"linear: input's last dimension must equal in_features, but got input shape {list(input.shape)} and "
            f"weight shape {list(weight.shape)} (mat1 and mat2 shapes cannot be multiplied)"
        )
    result = matmul(input, weight.t() if weight.ndim == 2 else weight)
    return result if bias is None else result + bias


def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``."""
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear: expected weight of rank 3 (out, in1, in2), got shape {list(weight.shape)}")
    n_out, n1, n2 = weight.shape
    if input1.ndim == 0 or input1.shape[-1] != n1 or input2.ndim == 0 or input2.shape[-1] != n2:
        raise RuntimeError(
            f"bilinear: input1 and input2 last dims must match weight's (in1={n1}, in2={n2}), got shapes "
            f"{list(input1.shape)}, {list(input2.shape)} and weight {list(weight.shape)}"
        )
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(
            f"bilinear: input1 and input2 must have the same leading dims, got {list(input1.shape)} and {list(input2.shape)}"
        )
    if bias is not None and tuple(bias.shape) != (n_out,):
        raise RuntimeError(f"bilinear: expected bias of shape [{n_out}], got {list(bias.shape)}")
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, n1)
    x2 = input2.reshape(-1, 1, n2, 1)
    # (N, in1) @ (in1, out*in2) -> (N, out, 1, in2) @ (N, 1, in2, 1) -> (N, out)
    t = matmul(x1, weight.permute(1, 0, 2).reshape(n1, n_out * n2)).reshape(-1, n_out, 1, n2)
    result = matmul(t, x2).reshape(lead + (n_out,))
    return result if bias is None else result + bias
