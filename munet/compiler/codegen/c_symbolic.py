"""Kernels generic in the sizes of dynamic dims: each size a run-time count (``munet.compile(dynamic=...)`` on cpu).

A dynamic dim reaches a kernel in many places at once: attention's ``(batch, heads, time, time)``
scores hold a sequence length in two loop bounds, in strides, in the reduction over it and in the
causal mask's strides. :func:`render_c_symbolic` renders such a kernel with every occurrence of each
of a few chosen sizes as a run-time count ``n<i>`` (the scalar ``p[n_params + i]``), so one binary
serves every value of them: a new sequence length compiles no C.

How it finds every occurrence: the caller builds the kernel with each chosen size replaced by a
*sentinel* (``kernel_at({size: sentinel})``, the fused group copied at those sizes), the ``i``-th
sentinel being ``base ** (width ** i)``. Each int the renderer then writes is a product and sum of
sizes and strides, a polynomial in the sizes; its digits in ``base`` (balanced, so ``n - 1`` has one)
are the polynomial's coefficients, and a digit's position, in base ``width``, its powers. So each int
becomes that polynomial in the counts. The sentinels are far larger than any real size, so every
choice ``c.py`` makes from a size (parallel, tiled, lanes of blocks) is its large-size choice, whose
loops take their bounds at run time. Two sentinel choices (two bases, two widths) must give the same
text: a literal that is not a polynomial in the sizes, a coefficient too large for its digit or a
power too high for its width (each reads differently in the two choices) rejects the kernel, which
the caller then compiles per size. A size the kernel reads as a number (a mean's divisor, ``sum / n``)
becomes a :class:`Param` reading the count, which is that number. What this cannot see: a literal
that is the same at both sentinels but not at a real size (``min(n, 64)`` written by the renderer);
``c.py`` writes none (sizes reach its text only as loop bounds, strides and products of them).

:func:`counts_for` is the reuse check: the kernel a copy of the group at new sizes builds
(``compiler/resize.py``) must be the symbolic kernel with the counts at their new values; then its
counts are the run-time scalars to pass. Each element is computed with the same operations as a
static kernel of the same loop nest; reductions sum in ``c.py``'s order over the same collapsed
dims, so results are the bits of a kernel compiled for the size.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re

from munet.compiler.codegen.c import reduction_layout, render_c, with_run_time_counts
from munet.compiler.codegen.kernel import (
    Apply,
    Const,
    Index,
    Kernel,
    Load,
    Param,
    Reduce,
    Store,
    StoreFull,
    same_expressions,
)

MAX_SIZES = 3  # the largest sentinel, base ** (width ** 2), stays a finite double (a count read as a number)
# (base, width) of the two sentinel choices: coefficients up to base / 2, powers of one size below width
_CHOICES = ((2**26 + 15, 5), (2**27 + 29, 6))
_PLACEHOLDER = "munet_symbolic_kernel"
_INT = re.compile(r"(?<![\w.])\d+(?![\w.])")  # an int, not part of a name or of a float literal


@dataclasses.dataclass
class SymbolicKernel:
    """A kernel rendered with run-time counts in place of ``sizes`` (their values where it was built):
    ``terms[i] = (coefficient, powers)`` says size ``i`` is ``coefficient * prod(base ** power)`` over
    the first ``n_bases`` sizes (the counts ``n<j>``); the others (a ``batch * time`` beside ``time``)
    follow from them."""

    sizes: tuple
    terms: tuple
    n_bases: int
    kernel: Kernel  # built at the first sentinel choice, sizes read as numbers read as Params
    n_params: int  # the group's own run-time scalars; one per size follows them
    source: str
    name: str

    def values(self, bases: tuple) -> tuple:
        """Each size's value when the bases are ``bases``."""
        return tuple(c * math.prod(b**p for b, p in zip(bases, powers)) for c, powers in self.terms)


def render_c_symbolic(kernel_at, sizes: tuple, terms: tuple, n_bases: int, n_params: int) -> SymbolicKernel | None:
    """The kernel ``kernel_at`` builds, rendered with a run-time count for each of the first ``n_bases``
    of ``sizes`` (``terms``: see :class:`SymbolicKernel`), or None when a size shapes it in a way that is
    not a polynomial (see the module docstring). ``kernel_at(renaming)`` builds the kernel with each size
    ``s`` of ``renaming`` at ``renaming[s]``, None if it cannot."""
    if not 0 < n_bases <= MAX_SIZES:
        return None
    texts, first = [], None
    for base, width in _CHOICES:
        sentinels = [base ** (width**i) for i in range(n_bases)]
        renamed = [c * math.prod(s**p for s, p in zip(sentinels, powers)) for c, powers in terms]
        kernel = kernel_at(dict(zip(sizes, renamed)))
        if kernel is None or (kernel.reduce_shape and reduction_layout(kernel) == "window"):
            return None  # a window reduction unrolls its reduced dims
        kernel = _sizes_as_params(kernel, renamed, n_params)
        variant = dataclasses.replace(kernel, name=_PLACEHOLDER)
        polynomial = _Polynomials(base, width, n_bases)
        try:
            text = _INT.sub(lambda m, p=polynomial: p.c_text(int(m.group(0))), render_c(variant, large=True))
            total = polynomial.c_text(kernel.numel * math.prod(kernel.reduce_shape))
        except _NotPolynomialError:
            return None
        texts.append((text, total))
        first = first or kernel
    if texts[0] != texts[1]:
        return None
    text, total = texts[0]
    counts = [f"const int64_t n{i} = (int64_t)p[{n_params + i}]; (void)n{i};" for i in range(n_bases)]
    text = with_run_time_counts(text, counts, total)
    name = "sym_" + hashlib.sha1(text.encode()).hexdigest()[:16]
    return SymbolicKernel(tuple(sizes), tuple(terms), n_bases, first, n_params, text.replace(_PLACEHOLDER, name), name)


def counts_for(symbolic: SymbolicKernel, kernel: Kernel, bases: tuple) -> tuple | None:
    """The run-time scalars (floats) with which ``symbolic``'s source computes ``kernel``: the counts
    at ``bases``; None when ``kernel`` is not the symbolic kernel at those values."""
    if len(bases) != symbolic.n_bases or any(v < 2 for v in bases):
        return None  # sizes 0 and 1 are never renamed (resize.py)
    values = symbolic.values(bases)
    polynomials = _Polynomials(*_CHOICES[0], symbolic.n_bases)
    try:
        expected = _instance(symbolic, polynomials, bases, values)
    except _NotPolynomialError:
        return None
    same = (expected.shape, expected.reduce_shape, expected.inputs, expected.params, expected.outputs) == (
        kernel.shape,
        kernel.reduce_shape,
        kernel.inputs,
        kernel.params,
        kernel.outputs,
    )
    return tuple(float(v) for v in values) if same and same_expressions(expected.stores, kernel.stores) else None


class _NotPolynomialError(Exception):
    pass


class _Polynomials:
    """Ints read as polynomials in the sizes at one sentinel choice: ``{powers: coefficient}``."""

    def __init__(self, base: int, width: int, n: int):
        self.base, self.width, self.n = base, width, n
        self.memo: dict = {}

    def terms(self, value: int) -> dict:
        found = self.memo.get(value)
        if found is not None:
            return found
        terms, position, rest, half = {}, 0, value, self.base // 2
        while rest:
            digit = rest % self.base
            if digit > half:
                digit -= self.base
            rest = (rest - digit) // self.base
            if digit:
                powers, p = [], position
                for _ in range(self.n):
                    powers.append(p % self.width)
                    p //= self.width
                if p:
                    raise _NotPolynomialError  # a power beyond the last size: not a polynomial of these
                terms[tuple(powers)] = digit
            position += 1
        self.memo[value] = terms
        return terms

    def c_text(self, value: int) -> str:
        terms = self.terms(value)
        if all(not any(powers) for powers in terms):
            return str(value)
        parts = []
        for powers, coefficient in sorted(terms.items(), reverse=True):
            factors = [f"n{i}" for i, p in enumerate(powers) for _ in range(p)]
            if abs(coefficient) != 1 or not factors:
                factors.append(str(abs(coefficient)))
            parts.append(("- " if coefficient < 0 else "+ ") + " * ".join(factors))
        text = " ".join(parts)
        return "(" + (text[2:] if text.startswith("+ ") else "-" + text[2:]) + ")"

    def value(self, value: int, sizes: tuple) -> int:
        return sum(c * math.prod(s**p for s, p in zip(sizes, powers)) for powers, c in self.terms(value).items())


def _sizes_as_params(kernel: Kernel, renamed: list, n_params: int) -> Kernel:
    """``kernel`` with each literal that is a renamed size (a size read as a number) reading its scalar."""
    numbers = {float(s): i for i, s in enumerate(renamed) if s < 2**1000}  # larger ones are no double

    def rule(e):
        if isinstance(e, Const) and e.value in numbers:
            return Param(n_params + numbers[e.value], e.dtype)
        return None

    return _map_kernel(kernel, rule, lambda v: v)


def _instance(symbolic: SymbolicKernel, polynomials, bases: tuple, values: tuple) -> Kernel:
    """The symbolic kernel at ``bases``: its ints evaluated, its sizes read as numbers back as literals."""

    def rule(e):
        if isinstance(e, Param) and e.index >= symbolic.n_params:
            return Const(float(values[e.index - symbolic.n_params]), e.dtype)
        return None

    return _map_kernel(symbolic.kernel, rule, lambda v: polynomials.value(v, bases))


def _map_kernel(kernel: Kernel, rule, number) -> Kernel:
    """``kernel`` with each expression ``e`` for which ``rule(e)`` is not None replaced by it, and each
    int of its geometry (shapes, strides, offsets) by ``number(int)``."""
    memo: dict = {}

    def ints(values) -> tuple:
        return tuple(number(v) for v in values)

    def walk(e):
        if e is None:
            return None
        found = memo.get(id(e))
        if found is not None:
            return found[1]
        out = rule(e)
        if out is None:
            if isinstance(e, Load):
                out = Load(e.buffer, ints(e.strides), number(e.offset), e.dtype)
            elif isinstance(e, Index):
                out = Index(ints(e.strides), number(e.offset), e.dtype)
            elif isinstance(e, Apply):
                out = Apply(e.op, tuple(walk(a) for a in e.args), e.dtype)
            elif isinstance(e, Reduce):
                out = Reduce(e.op, walk(e.expr), e.dtype, walk(e.key))
            else:  # Const, Param
                out = e
        memo[id(e)] = (e, out)  # e kept alive, so its id is not reused during the walk
        return out

    stores = [
        StoreFull(st.buffer, ints(st.strides), walk(st.expr))
        if isinstance(st, StoreFull)
        else Store(st.buffer, walk(st.expr))
        for st in kernel.stores
    ]
    return dataclasses.replace(kernel, shape=ints(kernel.shape), reduce_shape=ints(kernel.reduce_shape), stores=stores)
