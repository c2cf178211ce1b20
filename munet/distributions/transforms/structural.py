"""Transforms built from others or from shapes: independent dims, reshapes, concatenation and stacking."""

import munet

from .. import constraints
from ..utils import sum_rightmost
from .transform import Transform

__all__ = ["CatTransform", "IndependentTransform", "ReshapeTransform", "StackTransform"]


class IndependentTransform(Transform):
    """``base_transform`` with its rightmost ``reinterpreted_batch_ndims`` dims treated as one event."""

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @property
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError(f"IndependentTransform: expected at least {self.domain.event_dim} dims, got {x.dim()}")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError(f"IndependentTransform: expected at least {self.codomain.event_dim} dims, got {y.dim()}")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class ReshapeTransform(Transform):
    """Reshape the rightmost ``in_shape`` dims to ``out_shape`` (volume preserving: log-det 0)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0):
        self.in_shape = munet.Size(tuple(in_shape))
        self.out_shape = munet.Size(tuple(out_shape))
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError(
                f"ReshapeTransform: in_shape {tuple(in_shape)} and out_shape {tuple(out_shape)} differ in size"
            )
        super().__init__(cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        batch_shape = tuple(x.shape[: x.dim() - len(self.in_shape)])
        return x.reshape(batch_shape + tuple(self.out_shape))

    def _inverse(self, y):
        batch_shape = tuple(y.shape[: y.dim() - len(self.out_shape)])
        return y.reshape(batch_shape + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[: x.dim() - len(self.in_shape)]))

    def _replace_tail(self, shape, old, new):
        if len(shape) < len(old):
            raise ValueError(f"ReshapeTransform: too few dimensions on input: {tuple(shape)}")
        cut = len(shape) - len(old)
        if tuple(shape[cut:]) != tuple(old):
            raise ValueError(f"ReshapeTransform: shape mismatch: expected {tuple(old)} but got {tuple(shape[cut:])}")
        return tuple(shape[:cut]) + tuple(new)

    def forward_shape(self, shape):
        return self._replace_tail(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._replace_tail(shape, self.out_shape, self.in_shape)


def _check_parts(name: str, value, dim: int, size: int, what: str) -> None:
    if not -value.dim() <= dim < value.dim():
        raise ValueError(f"{name}: dim {dim} out of range for a tensor with {value.dim()} dimensions")
    if value.shape[dim] != size:
        raise ValueError(f"{name}: size {value.shape[dim]} along dim {dim} must equal {what} {size}")


class CatTransform(Transform):
    """Apply ``tseq[i]`` to the i-th slice of length ``lengths[i]`` along ``dim``, as ``torch.cat``."""

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise ValueError("CatTransform: every element of tseq must be a Transform")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: {len(self.lengths)} lengths for {len(self.transforms)} transforms")
        self.dim = dim

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _map_slices(self, value, forward: bool):
        _check_parts("CatTransform", value, self.dim, self.length, "the total length")
        parts, start = [], 0
        for transform, length in zip(self.transforms, self.lengths):
            part = value.narrow(self.dim, start, length)
            parts.append(transform(part) if forward else transform.inv(part))
            start += length
        return munet.cat(parts, dim=self.dim)

    def _call(self, x):
        return self._map_slices(x, forward=True)

    def _inverse(self, y):
        return self._map_slices(y, forward=False)

    def log_abs_det_jacobian(self, x, y):
        _check_parts("CatTransform", x, self.dim, self.length, "the total length")
        _check_parts("CatTransform", y, self.dim, self.length, "the total length")
        terms, start = [], 0
        for transform, length in zip(self.transforms, self.lengths):
            term = transform.log_abs_det_jacobian(x.narrow(self.dim, start, length), y.narrow(self.dim, start, length))
            if transform.event_dim < self.event_dim:
                term = sum_rightmost(term, self.event_dim - transform.event_dim)
            terms.append(term)
            start += length
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        if dim < 0:
            return munet.cat(terms, dim=dim)
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Apply ``tseq[i]`` to the i-th slice along ``dim``, as ``torch.stack``."""

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise ValueError("StackTransform: every element of tseq must be a Transform")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, value):
        _check_parts("StackTransform", value, self.dim, len(self.transforms), "the number of transforms")
        return [value.select(self.dim, i) for i in range(value.shape[self.dim])]

    def _call(self, x):
        return munet.stack([t(part) for part, t in zip(self._slices(x), self.transforms)], dim=self.dim)

    def _inverse(self, y):
        return munet.stack([t.inv(part) for part, t in zip(self._slices(y), self.transforms)], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = [t.log_abs_det_jacobian(xs, ys) for xs, ys, t in zip(self._slices(x), self._slices(y), self.transforms)]
        return munet.stack(terms, dim=self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)
