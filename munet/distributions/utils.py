"""Helpers shared by the distributions, with ``torch.distributions.utils``' names."""

import munet

_FINFO = {  # (eps, tiny) of each floating dtype
    "float16": (2.0**-10, 2.0**-14),
    "bfloat16": (2.0**-7, 2.0**-126),
    "float32": (2.0**-23, 2.0**-126),
    "float64": (2.0**-52, 2.0**-1022),
}


def finfo_eps(dtype) -> float:
    """Machine epsilon of a floating dtype."""
    return _FINFO[str(dtype).rsplit(".", 1)[-1]][0]


def finfo_tiny(dtype) -> float:
    """The smallest positive normal number of a floating dtype."""
    return _FINFO[str(dtype).rsplit(".", 1)[-1]][1]


def broadcast_all(*values):
    """Tensors (numbers become tensors of the default dtype or of the tensors' dtype) broadcast to one shape."""
    tensors = [v for v in values if munet.is_tensor(v)]
    if tensors:
        dtype, device = tensors[0].dtype, tensors[0].device
    else:
        dtype, device = munet.get_default_dtype(), None
    converted = []
    for v in values:
        if munet.is_tensor(v):
            converted.append(v)
        elif isinstance(v, (int, float, bool)):
            converted.append(munet.tensor(float(v), dtype=dtype, device=device))
        else:
            raise ValueError(f"broadcast_all: expected tensors or numbers, got {type(v).__name__}")
    return munet.broadcast_tensors(*converted)


def logits_to_probs(logits, is_binary: bool = False):
    """Probabilities from logits: sigmoid for binary, softmax over the last dim otherwise."""
    return munet.sigmoid(logits) if is_binary else munet.softmax(logits, dim=-1)


def clamp_probs(probs):
    """Probabilities clamped into ``[eps, 1 - eps]``."""
    eps = finfo_eps(probs.dtype)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary: bool = False):
    """Logits from probabilities (log-odds for binary, log-probabilities otherwise)."""
    ps = clamp_probs(probs)
    return munet.log(ps) - munet.log1p(-ps) if is_binary else munet.log(ps)


class lazy_property:  # noqa: N801 - PyTorch's name
    """A property computed on first access and then stored on the instance (as PyTorch's)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def sum_rightmost(value, dim: int):
    """``value`` summed over its rightmost ``dim`` dims (a number is returned as is)."""
    if dim <= 0 or not hasattr(value, "shape"):
        return value
    return value.reshape(tuple(value.shape[: value.dim() - dim]) + (-1,)).sum(-1)


def _tril_positions(n: int, diag: int) -> list[int]:
    """Row-major flat positions ``i * n + j`` of the entries with ``j <= i + diag`` of an ``n x n`` matrix."""
    return [i * n + j for i in range(n) for j in range(n) if j <= i + diag]


def tril_matrix_to_vec(mat, diag: int = 0):
    """The lower-triangular entries (``j <= i + diag``) of the last two dims of ``mat``, in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"tril_matrix_to_vec: diag ({diag}) is outside [{-n}, {n - 1}]")
    index = munet.tensor(_tril_positions(n, diag), dtype=munet.int64, device=mat.device)
    return mat.flatten(-2).index_select(-1, index)


def vec_to_tril_matrix(vec, diag: int = 0):
    """The ``D x D`` lower-triangular matrices whose entries ``j <= i + diag`` are ``vec`` in row order."""
    size = vec.shape[-1]
    root = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * size + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    n = round(root)
    if abs(n - root) > 1e-6:
        raise ValueError(
            f"vec_to_tril_matrix: the size of the last dimension is {size}, which is not the lower triangular "
            "part of a square D x D matrix"
        )
    positions = _tril_positions(n, diag)
    source = [size] * (n * n)  # entry `size` of the padded vector is 0: the upper triangle
    for k, position in enumerate(positions):
        source[position] = k
    padded = munet.cat([vec, munet.zeros(tuple(vec.shape[:-1]) + (1,), dtype=vec.dtype, device=vec.device)], -1)
    index = munet.tensor(source, dtype=munet.int64, device=vec.device)
    return padded.index_select(-1, index).reshape(tuple(vec.shape[:-1]) + (n, n))
