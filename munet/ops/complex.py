"""Complex tensors: the ops that make, take apart and measure them, and which ops accept them.

``complex64``/``complex128`` tensors live on the cpu and on cuda (a backend declaring
``complex_dtypes``) and run eagerly: an op takes complex inputs only when it declares a complex
gradient rule (``Op.complex_rule``), every other op raises ``TypeError`` naming itself and the dtype;
another device raises ``DeviceError``, a cuda op without a complex kernel raises ``DeviceError`` from
its kernel, and ``munet.compile`` refuses them (``check_complex`` in ``_registry.py``).

Gradients follow PyTorch's convention: for a real loss ``L`` of ``z = x + iy`` the gradient is
``dL/dx + i dL/dy``. The ops listed in ``ANALYTIC_OPS`` have rules written for real numbers
(``g * f'(z)``, linear in ``g``) that extend to complex ones by conjugation, which the engine
applies (``conj(rule(conj(g)))``); the ops defined here write their rules in that convention
directly ("wirtinger").

``conj`` copies eagerly, so ``is_conj()`` and ``is_neg()`` are always False and
``resolve_conj``/``resolve_neg`` return their input. ``real``, ``imag``, ``view_as_real`` and
``view_as_complex`` are views sharing storage (writable); an in-place write through one of them
while recording gradients raises.
"""

from __future__ import annotations

from munet import _dtype as D
from munet._tensor import Tensor
from munet.autograd.grad_mode import _State

# the modules defining ANALYTIC_OPS, imported first
from munet.ops import convert, copy, creation, elementwise, elementwise_math, indexing, linalg, movement, reduce, view  # noqa: F401, E501
from munet.ops._registry import OPS, Meta, apply, check_complex, define, record_history
from munet.ops._utils import broadcast_shapes, is_tensor, reduce_grad

__all__ = [
    "complex",
    "polar",
    "view_as_real",
    "view_as_complex",
    "real",
    "imag",
    "conj",
    "conj_physical",
    "conj_physical_",
    "resolve_conj",
    "resolve_neg",
    "is_conj",
    "is_neg",
    "angle",
    "adjoint",
    "is_complex",
    "complex64",
    "complex128",
    "cfloat",
    "cdouble",
]
__tensor_methods__ = [
    "view_as_real",
    "view_as_complex",
    "conj",
    "conj_physical",
    "conj_physical_",
    "resolve_conj",
    "resolve_neg",
    "is_conj",
    "is_neg",
    "angle",
    "adjoint",
]

complex64 = cfloat = D.complex64
complex128 = cdouble = D.complex128

# Existing ops whose gradient rules hold for complex numbers once conjugated (see the docstring):
# arithmetic and analytic functions, sums, matrix products, selections and copies.
ANALYTIC_OPS = (
    "add", "sub", "mul", "div", "neg", "exp", "log", "pow", "sqrt", "reciprocal", "sin", "cos", "tanh",
    "sinh", "cosh", "cast", "sum", "cumsum", "matmul", "clone", "copy", "cat", "constant_pad_nd", "flip",
    "roll", "where", "eq", "ne", "fill", "masked_fill", "index", "index_put", "gather", "as_strided_scatter",
    "strided_scatter_add", "tril", "triu", "full", "empty",
)  # fmt: skip
for _name in ANALYTIC_OPS:  # (views are analytic from their definition)
    OPS[_name].complex_rule = "analytic"


def define_wirtinger(name: str, **kwargs):
    """Define an op whose gradient rule is already in PyTorch's complex convention."""
    op = define(name, **kwargs)
    op.complex_rule = "wirtinger"
    return op


def is_complex(input) -> bool:
    """Whether ``input``'s dtype is complex64 or complex128."""
    return input.dtype.is_complex


def is_conj(input) -> bool:
    """Always False: MuNet conjugates eagerly, so no tensor carries a pending conjugation."""
    return False


def is_neg(input) -> bool:
    """Always False: MuNet has no lazily negated tensors."""
    return False


def resolve_conj(input):
    """``input`` itself (its conjugation, if any, is already in its values: see ``is_conj``)."""
    return input


def resolve_neg(input):
    """``input`` itself (see ``is_neg``)."""
    return input


def _to_cfloat(self, memory_format=None):
    """``self.to(munet.complex64)``."""
    return self.to(D.complex64) if memory_format is None else self.to(D.complex64, memory_format=memory_format)


def _to_cdouble(self, memory_format=None):
    """``self.to(munet.complex128)``."""
    return self.to(D.complex128) if memory_format is None else self.to(D.complex128, memory_format=memory_format)


# conj -------------------------------------------------------------------------------------------------

conj_op = define_wirtinger("conj", meta=lambda x: Meta(x.shape, x.dtype), backward=lambda ctx, g: conj(g))


def conj(input):
    """The complex conjugate (a new tensor; a real tensor is returned as it is, as PyTorch does)."""
    if not input.dtype.is_complex:
        return input
    return apply(conj_op, input)


def conj_physical(input, *, out=None):
    """The complex conjugate, computed now (as ``conj``: MuNet's conjugation is always physical)."""
    return elementwise._out(conj(input), out)


def conj_physical_(self):
    """Conjugate ``self`` in place (a real tensor is unchanged)."""
    if self.dtype.is_complex:
        self.copy_(conj(self))
    return self


# views: view_as_real, view_as_complex, real, imag -------------------------------------------------------


def _reinterpreted(x, dtype, shape, stride, offset: int):
    """A view of ``x``'s storage with elements of ``dtype`` (strides and offset counted in them)."""
    storage = x._storage
    data = storage.backend.view(storage.data, tuple(shape), tuple(stride), offset, dtype)
    base = x._base if x._base is not None else x
    return Tensor._make(storage, tuple(shape), tuple(stride), offset, dtype, data, base)


def _as_real_geometry(x):
    return (*x.shape, 2), (*(2 * s for s in x.stride()), 1), 2 * x.storage_offset()


def _as_complex_geometry(x):
    return tuple(x.shape[:-1]), tuple(s // 2 for s in x.stride()[:-1]), x.storage_offset() // 2


view_as_real_op = define_wirtinger(
    "view_as_real",
    meta=lambda x: Meta(_as_real_geometry(x)[0], x.dtype.to_real()),
    view=_as_real_geometry,
    backward=lambda ctx, g: view_as_complex(g.contiguous()),
)
view_as_complex_op = define_wirtinger(
    "view_as_complex",
    meta=lambda x: Meta(_as_complex_geometry(x)[0], x.dtype.to_complex()),
    view=_as_complex_geometry,
    backward=lambda ctx, g: view_as_real(g),
)


def _dtype_view(op, x, dtype):
    shape, stride, offset = op.view(x)
    out = _reinterpreted(x, dtype, shape, stride, offset)
    if _State.enabled and x._requires_grad:
        record_history(op, (x,), {}, [x], (out,))
    return out


def view_as_real(input):
    """A float view of complex ``input`` with a last dim of size 2 (real, imaginary), sharing storage."""
    if not input.dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    check_complex("view_as_real", input)
    return _dtype_view(view_as_real_op, input, input.dtype.to_real())


def view_as_complex(input):
    """A complex view of float32/float64 ``input`` whose last dim (size 2, stride 1) holds (real, imaginary)."""
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(
            f"view_as_complex is only supported for float and double tensors, but got a tensor of scalar type: "
            f"{input.dtype.name}"
        )
    check_complex("view_as_complex", input)
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if input.stride()[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in input.stride()[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if input.storage_offset() % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return _dtype_view(view_as_complex_op, input, input.dtype.to_complex())


def _real(self):
    """The real part: a view of a complex tensor (writable), a real tensor itself."""
    if not self.dtype.is_complex:
        return self
    return view.select(view_as_real(self), -1, 0)


def _imag(self):
    """The imaginary part: a view of a complex tensor (writable); real tensors have none."""
    if not self.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return view.select(view_as_real(self), -1, 1)


def real(input):
    """The real part of ``input``: a view for complex tensors, ``input`` itself for real ones."""
    return _real(input)


def imag(input):
    """The imaginary part of complex ``input``, a view sharing its storage."""
    return _imag(input)


def _set_part(getter):
    def setter(self, value):
        getter(self).copy_(value)

    return setter


def adjoint(input):
    """The conjugate transpose of the last two dims (``input.mH``), a new tensor for complex ``input``."""
    if input.ndim < 2:
        raise RuntimeError(
            f"tensor.adjoint() is only supported on matrices or batches of matrices. Got {input.ndim}-D tensor."
        )
    return conj(view.transpose(input, -2, -1))


def _conj_transpose(self):
    """``Tensor.H``: the conjugate transpose of a matrix (of a 0-D tensor, its conjugate)."""
    if self.ndim not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
    return conj(view.permute(self, tuple(reversed(range(self.ndim)))))


__tensor_method_impls__ = {
    "mH": property(adjoint),
    "H": property(_conj_transpose),
    "real": property(_real, _set_part(_real)),
    "imag": property(_imag, _set_part(_imag)),
    "cfloat": _to_cfloat,
    "cdouble": _to_cdouble,
}


# complex, polar ---------------------------------------------------------------------------------------


def _complex_meta(re, im):
    return Meta(broadcast_shapes(re.shape, im.shape, op="complex"), re.dtype.to_complex())


def _complex_backward(ctx, g):
    need = ctx.needs_input_grad
    gr = reduce_grad(real(g), ctx.input_shapes[0]) if need[0] else None
    gi = reduce_grad(imag(g), ctx.input_shapes[1]) if need[1] else None
    return gr, gi


complex_op = define_wirtinger("complex", inputs=("real", "imag"), meta=_complex_meta, backward=_complex_backward)


def complex(real, imag, *, out=None):  # noqa: A001 - PyTorch's name
    """The complex tensor ``real + i * imag`` (float32 -> complex64, float64 -> complex128; broadcasts)."""
    if not (is_tensor(real) and is_tensor(imag)):
        raise TypeError(
            f"complex(): argument 'real' and 'imag' must be Tensor, got {type(real).__name__} and {type(imag).__name__}"
        )
    if real.dtype is not imag.dtype or real.dtype not in (D.float32, D.float64):
        raise RuntimeError(
            f"complex(): expected both inputs to be Float or Double tensors of one dtype, but got "
            f"{real.dtype.name} and {imag.dtype.name}"
        )
    return elementwise._out(apply(complex_op, real, imag), out)


def polar(abs, angle, *, out=None):  # noqa: A002 - PyTorch's names
    """The complex tensor with magnitude ``abs`` and phase ``angle``: ``abs * (cos(angle) + i sin(angle))``."""
    if not (is_tensor(abs) and is_tensor(angle)):
        raise TypeError("polar(): argument 'abs' and 'angle' must be Tensor")
    if abs.dtype is not angle.dtype or abs.dtype not in (D.float32, D.float64):
        raise RuntimeError(
            f"polar(): expected both inputs to be Float or Double tensors of one dtype, but got "
            f"{abs.dtype.name} and {angle.dtype.name}"
        )
    return elementwise._out(complex(abs * angle.cos(), abs * angle.sin()), out)


# abs, angle ---------------------------------------------------------------------------------------------


def complex_sgn(z):
    """``z / |z|``, 0 where ``z`` is 0 (``munet.sgn`` of a complex tensor)."""
    magnitude = complex_abs(z)
    zero = magnitude == 0
    return elementwise.where(zero, 0.0, z / elementwise.where(zero, 1.0, magnitude))  # no 0/0 in the gradient


complex_abs_op = define_wirtinger(
    "complex_abs",
    meta=lambda z: Meta(z.shape, z.dtype.to_real()),
    backward=lambda ctx, g: g * complex_sgn(ctx.saved_tensor("self")),
    saves=("self",),
    backward_name="AbsBackward0",
)


def complex_abs(input):
    """The magnitude of complex ``input`` (``munet.abs`` of a complex tensor), a real tensor."""
    return apply(complex_abs_op, input)


def _angle_backward(ctx, g):
    z = ctx.saved_tensor("self")
    if not z.dtype.is_complex:  # piecewise constant
        return creation.zeros_like(z)
    return elementwise.where(z == 0, 0.0, g * z / complex_abs(z).square() * 1j)


angle_op = define_wirtinger(
    "angle",
    meta=lambda z: Meta(z.shape, z.dtype.to_real()),
    backward=_angle_backward,
    saves=("self",),
)


def angle(input, *, out=None):
    """The phase of each element, in radians: ``atan2(imag, real)``; for a real tensor, pi where it is
    negative and 0 elsewhere (NaN stays NaN). Integers give the default float dtype."""
    x = input if input.dtype.is_complex else elementwise._float_input(input)
    return elementwise._out(apply(angle_op, x), out)
