"""Integer and bool elementwise chains that ``passes/fuse.py`` groups, shared by the cpu, vulkan and
cuda fusion tests: each case is ``(name, function, input arrays)``, and its results must be
bit-identical to eager on the same device and to PyTorch (``torch_function``: the same function
with ``torch`` for ``munet``).

The values exercise what C and CUDA do not define for signed integers and NumPy does: products and
sums that overflow (they wrap), shift counts outside ``[0, 64)`` (PyTorch: a left shift gives 0, a
right shift the sign), ``-(2**63)`` negated, negative exponents, and the floor semantics of
``//``/``%`` with negative operands.
"""

import numpy as np

INT64_MIN = -(2**63)


def _ints(rng, shape, lo=-(2**62), hi=2**62):
    return rng.integers(lo, hi, size=shape, dtype=np.int64)


def arithmetic(m, i, j):
    """Wrapping arithmetic, bitwise ops and extrema on int64."""
    a = (i * 3 + 7) ^ (i >> 3)
    b = m.maximum(a - j, -j) | (i & 255)
    return (a * b + m.minimum(a, b)) & ~j, -a, m.abs(b)


def shifts(m, i, s):
    """Shift counts in and out of range (``s`` holds -3..70)."""
    return (i << s) ^ (i >> s), (i + 1) >> s


def masks(m, x, i):
    """Comparisons feeding where and logical ops: a float chain reading an int64 mask."""
    mask = (x > 0) & ~(i == 0) | (x < -1)
    keep = m.logical_xor(mask, i > 5) | m.isnan(x)
    return m.where(keep, x * 2, -x), keep, m.where(mask, i, i * 2)


def index_arithmetic(m, i, d):
    """Row/column arithmetic as index code does it, with floor division and remainder."""
    row = (i * 7 + 3) // d
    col = (i - row * d) % d
    return row * 100 + col, (i % 5 == 0) & (col >= 0)


def casts_and_powers(m, x, i):
    """Float <-> int casts (in range) and integer powers with negative exponents (PyTorch: 0)."""
    scaled = (x * 10).long() + i
    return scaled, scaled.float() * 0.5, m.pow(i % 4 - 1, i % 5)


def cases(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    extremes = np.array([INT64_MIN, -1, 0, 1, 2**63 - 1, 5, -7, 2**62], np.int64)
    i = _ints(rng, (4, 8))
    i[0] = extremes
    j = _ints(rng, (8,))
    s = rng.integers(-3, 71, size=(4, 8), dtype=np.int64)
    small = rng.integers(-20, 21, size=(4, 8), dtype=np.int64)
    divisors = np.where(rng.random((8,)) < 0.5, -1, 1) * rng.integers(1, 6, size=(8,), dtype=np.int64)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    x[1, 2] = np.nan
    return [
        ("arithmetic", arithmetic, (i, j)),
        ("shifts", shifts, (i, s)),
        ("masks", masks, (x, small)),
        ("index_arithmetic", index_arithmetic, (small, divisors)),
        ("casts_and_powers", casts_and_powers, (x, small)),
    ]


def fused_ops(compiled) -> list:
    """The op names inside the compiled graph's fused groups."""
    return [m.name for n in compiled.graph.nodes if n.name == "fused" for m in n.attrs["group"].members]


def fused_exact_ops(compiled) -> list:
    """The op names inside fused groups whose result is an integer or bool tensor."""
    return [
        m.name
        for n in compiled.graph.nodes
        if n.name == "fused"
        for m in n.attrs["group"].members
        if m.op.view is None and not m.outputs[0].dtype.is_floating_point
    ]


def assert_bit_identical(got, want, name: str) -> None:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want), name
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"{name}[{k}]: dtype {g.dtype}, expected {w.dtype}"
        np.testing.assert_array_equal(g, w, err_msg=f"{name}[{k}]")
