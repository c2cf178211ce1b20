"""Random numbers: ``Generator``, seeding, and the random creation and sampling ops.

Every stream comes from a counter-based generator, Philox4x64-10, keyed by the MuNet
``Generator``'s seed. A generator's state is just ``(seed, offset)``: a random op asks its
generator for ``ceil(n / 4)`` counter blocks (four 64-bit words each) and advances the
offset by that much, so the same seed gives the same numbers on any backend that
implements Philox, and generators with different seeds are independent streams.
The generator object travels to the kernel in the op's attrs (``generator=``), so a
compiled step that replays the op draws fresh numbers each time.

The transforms from bits to values are fixed (see ``kernels_random.py``): uniform floats
from the top 24 (float32 and narrower) or 53 (float64) bits, normals by Box-Muller,
integers by modulo, permutations by sorting random keys.
"""

from __future__ import annotations

import math
import os

from munet import _dtype as D
from munet._device import as_device, factory_device, host_device
from munet.ops._registry import Meta, apply, apply_factory, define
from munet.ops._utils import as_tuple_shape, broadcast_shapes, check_factory_options, factory_shape, is_tensor
from munet.ops.creation import finish_factory

__all__ = [
    "Generator",
    "default_generator",
    "manual_seed",
    "seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "randint",
    "randint_like",
    "randperm",
    "normal",
    "bernoulli",
    "multinomial",
]
__tensor_methods__ = [
    "uniform_",
    "normal_",
    "bernoulli",
    "bernoulli_",
    "multinomial",
    "exponential_",
    "random_",
    "log_normal_",
]

_DEFAULT_SEED = 67280421310721  # PyTorch's default initial seed
_STATE_BYTES = 16  # seed and offset, 64-bit little endian each


class Generator:
    """A random stream: a Philox key (the seed) and a counter offset.

    >>> g = munet.Generator().manual_seed(42)
    >>> munet.rand(3, generator=g)  # same three numbers for every generator seeded with 42
    """

    def __init__(self, device="cpu"):
        self.device = as_device(device)
        self._seed = _DEFAULT_SEED
        self._offset = 0

    def manual_seed(self, seed) -> Generator:
        """Restart the stream from ``seed`` (any int; taken modulo 2**64); returns self."""
        if is_tensor(seed):
            seed = seed.item()
        if isinstance(seed, bool) or not isinstance(seed, int):
            if isinstance(seed, float) and seed.is_integer():
                seed = int(seed)
            else:
                raise TypeError(f"manual_seed: expected an int seed, got {type(seed).__name__}")
        self._seed = seed % (1 << 64)
        self._offset = 0
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the new seed."""
        new = int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(new)
        return new

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        """The state as a uint8 tensor (seed, then offset, 8 bytes little endian each)."""
        from munet.ops.creation import tensor

        raw = self._seed.to_bytes(8, "little") + (self._offset % (1 << 64)).to_bytes(8, "little")
        return tensor(list(raw), dtype=D.uint8, device=host_device())  # whatever the default device

    @staticmethod
    def check_state(new_state) -> None:
        """Raise as ``set_state`` would (TypeError, RuntimeError) if ``new_state`` is not a state
        from ``get_state()``; changes nothing."""
        if not is_tensor(new_state) or new_state.dtype is not D.uint8:
            got = new_state.dtype.name if is_tensor(new_state) else type(new_state).__name__
            raise TypeError(f"set_state: expected a uint8 tensor (from get_state()), got {got}")
        if new_state.numel() != _STATE_BYTES:
            raise RuntimeError(
                f"set_state: expected a state of {_STATE_BYTES} bytes (from get_state()), got {new_state.numel()} bytes"
            )

    def set_state(self, new_state) -> Generator:
        self.check_state(new_state)
        raw = bytes(int(v) for v in new_state.reshape(-1).tolist())
        self._seed = int.from_bytes(raw[:8], "little")
        self._offset = int.from_bytes(raw[8:], "little")
        return self

    def philox_advance(self, blocks: int) -> tuple[int, int]:
        """Reserve ``blocks`` Philox counter blocks: returns ``(key, first counter)``."""
        start = self._offset
        self._offset += blocks
        return self._seed, start

    def __repr__(self) -> str:
        return f"<munet.Generator device={self.device} seed={self._seed} offset={self._offset}>"


default_generator = Generator("cpu")


def manual_seed(seed) -> Generator:
    """Seed the default generator of every device type; returns the cpu one."""
    for gen in _device_defaults.values():
        gen.manual_seed(seed)
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator non-deterministically; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)


# One default generator per device type (as torch.cuda's default generators); ``manual_seed``
# seeds them all, so the same seed gives the same stream on every backend.
_device_defaults: dict[str, Generator] = {}


def default_generator_for(device_type: str) -> Generator:
    """The default generator of ``device_type`` (``munet.cuda.manual_seed`` seeds the cuda one); made
    on first use from the cpu generator's seed. Needs no device: seeding works without a GPU."""
    if device_type == "cpu":
        return default_generator
    gen = _device_defaults.get(device_type)
    if gen is None:
        fresh = Generator(device_type).manual_seed(default_generator.initial_seed())
        gen = _device_defaults.setdefault(device_type, fresh)  # threads asking at once share the first
    return gen


def _generator(generator, device, op: str) -> Generator:
    """The generator for samples made on ``device`` (``None``: the default device)."""
    device_type = factory_device(device).type
    gen = default_generator_for(device_type) if generator is None else generator
    if not isinstance(gen, Generator):
        raise TypeError(f"{op}: generator must be a munet.Generator, got {type(gen).__name__}")
    if gen.device.type != device_type:
        raise RuntimeError(f"{op}: expected a '{device_type}' generator, but got one for device '{gen.device}'")
    return gen


# op definitions ------------------------------------------------------------------------------------

uniform_op = define("uniform", meta=lambda *, shape, dtype, low, high, generator: Meta(shape, dtype))
normal_op = define("normal", meta=lambda *, shape, dtype, mean, std, generator: Meta(shape, dtype))
exponential_op = define("exponential", meta=lambda *, shape, dtype, lambd, generator: Meta(shape, dtype))
randint_op = define("randint", meta=lambda *, shape, dtype, low, high, generator: Meta(shape, dtype))
randperm_op = define("randperm", meta=lambda *, n, dtype, generator: Meta((n,), dtype))


def _normal_tensor_meta(mean, std, *, generator):
    shape = broadcast_shapes(tuple(getattr(mean, "shape", ())), tuple(getattr(std, "shape", ())), op="normal")
    return Meta(shape, D.result_type(mean, std))


# Samples of a distribution whose parameters are tensors. PyTorch gives these zero
# gradients; here the samples simply do not require grad.
normal_tensor_op = define("normal_tensor", inputs=("mean", "std"), meta=_normal_tensor_meta)
bernoulli_op = define("bernoulli", meta=lambda p, *, generator: Meta(p.shape, p.dtype))


def _multinomial_meta(probs, *, num_samples, replacement, generator):
    return Meta(tuple(probs.shape[:-1]) + (num_samples,), D.int64)


multinomial_op = define("multinomial", meta=_multinomial_meta)


# creation -------------------------------------------------------------------------------------------


def _float_dtype(dtype, op: str):
    dtype = D.get_default_dtype() if dtype is None else dtype
    if not dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point dtype, got {dtype.name}")
    return dtype


def rand(
    *args,
    size=None,
    generator=None,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad=False,
    pin_memory=False,
):
    """Uniform samples in [0, 1): ``munet.rand(2, 3)`` or ``munet.rand((2, 3), generator=g)``."""
    check_factory_options("rand", layout=layout, pin_memory=pin_memory)
    return _float_samples(
        "rand", uniform_op, args, size, generator, out, dtype, device, requires_grad, low=0.0, high=1.0
    )


def randn(
    *args,
    size=None,
    generator=None,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad=False,
    pin_memory=False,
):
    """Standard normal samples: ``munet.randn(2, 3)``."""
    check_factory_options("randn", layout=layout, pin_memory=pin_memory)
    return _float_samples(
        "randn", normal_op, args, size, generator, out, dtype, device, requires_grad, mean=0.0, std=1.0
    )


def _float_samples(name: str, op, args, size, generator, out, dtype, device, requires_grad, **params):
    """The factory behind ``rand``/``randn``: ``op`` sampled into a new float tensor of the given size."""
    shape = factory_shape(args, size, name)
    if dtype is not None and dtype.is_complex:  # both parts sampled; randn's each of variance 1/2, as PyTorch
        from munet.ops.complex import view_as_complex

        gen = _generator(generator, device, name)
        parts = apply_factory(op, device, shape=(*shape, 2), dtype=dtype.to_real(), generator=gen, **params)
        t = view_as_complex(parts * 0.5**0.5 if op is normal_op else parts).clone()  # not a view of a real base
        return finish_factory(t, requires_grad, out)
    dtype = _float_dtype(dtype, name)
    gen = _generator(generator, device, name)
    t = apply_factory(op, device, shape=shape, dtype=dtype, generator=gen, **params)
    return finish_factory(t, requires_grad, out)


def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None, generator=None):
    check_factory_options("rand_like", layout=layout, memory_format=memory_format)
    return rand(
        tuple(input.shape),
        dtype=dtype or input.dtype,
        device=device or input.device,
        requires_grad=requires_grad,
        generator=generator,
    )


def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None, generator=None):
    check_factory_options("randn_like", layout=layout, memory_format=memory_format)
    return randn(
        tuple(input.shape),
        dtype=dtype or input.dtype,
        device=device or input.device,
        requires_grad=requires_grad,
        generator=generator,
    )


def _int_bounds(low, high, op: str) -> tuple[int, int]:
    low, high = (v.item() if is_tensor(v) else v for v in (low, high))
    if low >= high:
        raise RuntimeError(f"{op}: expected 'low' to be less than 'high', but got low={low} >= high={high}")
    return _ceil_int(low), _ceil_int(high)


def _ceil_int(value) -> int:
    return math.ceil(value) if isinstance(value, float) else int(value)


def _integer_samples(shape, low, high, dtype, device, gen, op: str):
    low, high = _int_bounds(low, high, op)
    return apply_factory(randint_op, device, shape=shape, dtype=dtype, low=low, high=high, generator=gen)


def randint(
    *args,
    low=None,
    high=None,
    size=None,
    generator=None,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad=False,
    pin_memory=False,
):
    """Integers uniform in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``."""
    check_factory_options("randint", layout=layout, pin_memory=pin_memory)
    args = list(args)
    if size is None and args and isinstance(args[-1], (tuple, list)):
        size = args.pop()
    if len(args) == 2:
        low, high = args
    elif len(args) == 1:
        if high is None:
            high = args[0]
        else:
            low = args[0]
    elif args:
        raise TypeError(
            f"randint: expected (high, size) or (low, high, size), got {len(args) + 1} positional arguments"
        )
    if high is None or size is None:
        raise TypeError("randint: missing 'high' or 'size' (call randint(high, size) or randint(low, high, size))")
    shape = as_tuple_shape((size,), "randint")
    dtype = D.int64 if dtype is None else dtype
    gen = _generator(generator, device, "randint")
    t = _integer_samples(shape, 0 if low is None else low, high, dtype, device, gen, "randint")
    return finish_factory(t, requires_grad, out)


def randint_like(
    input,
    low=0,
    high=None,
    *,
    dtype=None,
    layout=None,
    device=None,
    requires_grad=False,
    memory_format=None,
    generator=None,
):
    """``randint_like(input, high)`` or ``randint_like(input, low, high)``."""
    check_factory_options("randint_like", layout=layout, memory_format=memory_format)
    if high is None:
        low, high = 0, low
    dtype, device = dtype or input.dtype, device or input.device
    gen = _generator(generator, device, "randint_like")
    t = _integer_samples(tuple(input.shape), low, high, dtype, device, gen, "randint_like")
    return finish_factory(t, requires_grad)


def randperm(
    n: int, *, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False
):
    """A random permutation of ``0 .. n-1``."""
    check_factory_options("randperm", layout=layout, pin_memory=pin_memory)
    n = n.__index__()
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    dtype = D.int64 if dtype is None else dtype
    gen = _generator(generator, device, "randperm")
    return finish_factory(apply_factory(randperm_op, device, n=n, dtype=dtype, generator=gen), requires_grad, out)


def normal(
    mean,
    std=1.0,
    size=None,
    *,
    generator=None,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad=False,
    pin_memory=False,
):
    """Normal samples. ``normal(mean_tensor, std_tensor)``, ``normal(mean_tensor, 1.0)``,
    ``normal(0.0, std_tensor)``, or ``normal(0.0, 1.0, size)`` (floats need ``size``)."""
    check_factory_options("normal", layout=layout, pin_memory=pin_memory)
    if not is_tensor(mean) and not is_tensor(std):
        if size is None:
            raise TypeError("normal: with float mean and std, a size is required: normal(mean, std, size)")
        _check_std(std, "normal")
        shape = as_tuple_shape((size,), "normal")
        dtype = _float_dtype(dtype, "normal")
        gen = _generator(generator, device, "normal")
        t = apply_factory(normal_op, device, shape=shape, dtype=dtype, mean=float(mean), std=float(std), generator=gen)
        return finish_factory(t, requires_grad, out)
    if size is not None:
        raise TypeError("normal: size is only accepted when mean and std are numbers")
    if not is_tensor(std):
        _check_std(std, "normal")
    for t in (mean, std):
        if is_tensor(t) and not t.dtype.is_floating_point:
            raise RuntimeError(f"normal: expected floating point mean and std, got {t.dtype.name}")
    if is_tensor(mean) and is_tensor(std) and mean.dtype is not std.dtype:
        from munet.ops.elementwise import promote_operands

        _, (mean, std) = promote_operands(mean, std)
    device = (mean if is_tensor(mean) else std).device
    gen = _generator(generator, device, "normal")
    mean, std = (float(v) if not is_tensor(v) else v for v in (mean, std))
    return finish_factory(apply(normal_tensor_op, mean, std, generator=gen), False, out)


def _check_std(std, op: str) -> None:
    if std < 0:
        raise RuntimeError(f"{op}: expects std >= 0.0, but found std {std}")


def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 samples with probabilities ``input`` (or the number ``p``), in ``input``'s dtype."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"bernoulli: expected a floating point tensor of probabilities, got {input.dtype.name}")
    gen = _generator(generator, input.device, "bernoulli")
    if p is not None:
        from munet.ops.creation import full

        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli: expected 0 <= p <= 1, but got p={p}")
        input = full(tuple(input.shape), p, dtype=input.dtype, device=input.device)
    return finish_factory(apply(bernoulli_op, input.detach(), generator=gen), False, out)


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None, out=None):
    """Category indices sampled from each row of (unnormalized, non-negative) ``input``."""
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial: expected a floating point tensor of probabilities, got {input.dtype.name}")
    if num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples (num_samples={num_samples})")
    categories = input.shape[-1]
    if categories == 0:
        raise RuntimeError("multinomial: the input has no categories (last dim is 0)")
    if not replacement and num_samples > categories:
        raise RuntimeError(
            f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
            f"(num_samples={num_samples}, categories={categories})"
        )
    gen = _generator(generator, input.device, "multinomial")
    t = apply(
        multinomial_op, input.detach(), num_samples=int(num_samples), replacement=bool(replacement), generator=gen
    )
    return finish_factory(t, False, out)


# in-place sampling (Tensor methods) -------------------------------------------------------------------


def _fill_with(self, sample):
    """Overwrite ``self`` with ``sample`` (autograd-aware, like any in-place write)."""
    return self.copy_(sample)


def _require_float(self, op: str) -> None:
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point tensor, got {self.dtype.name}")


def uniform_(self, from_=0.0, to=1.0, *, generator=None, **kwargs):
    """Fill with uniform samples in [from, to) (``from`` is accepted as a keyword too)."""
    from_ = kwargs.pop("from", from_)
    if kwargs:
        raise TypeError(f"uniform_: unexpected keyword arguments {sorted(kwargs)}")
    _require_float(self, "uniform_")
    if from_ > to:
        raise RuntimeError(f"uniform_: expects to return a [from, to) range, but found from={from_} > to={to}")
    gen = _generator(generator, self.device, "uniform_")
    sample = apply_factory(
        uniform_op,
        self.device,
        shape=tuple(self.shape),
        dtype=self.dtype,
        low=float(from_),
        high=float(to),
        generator=gen,
    )
    return _fill_with(self, sample)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    _require_float(self, "normal_")
    _check_std(std, "normal_")
    gen = _generator(generator, self.device, "normal_")
    sample = apply_factory(
        normal_op,
        self.device,
        shape=tuple(self.shape),
        dtype=self.dtype,
        mean=float(mean),
        std=float(std),
        generator=gen,
    )
    return _fill_with(self, sample)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with ``exp(N(mean, std))`` samples."""
    _require_float(self, "log_normal_")
    if std <= 0:
        raise RuntimeError(f"log_normal_: expects std > 0.0, but found std={std}")
    gen = _generator(generator, self.device, "log_normal_")
    sample = apply_factory(
        normal_op,
        self.device,
        shape=tuple(self.shape),
        dtype=self.dtype,
        mean=float(mean),
        std=float(std),
        generator=gen,
    )
    return _fill_with(self, sample.exp())


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with samples of density ``lambd * exp(-lambd * x)``."""
    _require_float(self, "exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    gen = _generator(generator, self.device, "exponential_")
    sample = apply_factory(
        exponential_op, self.device, shape=tuple(self.shape), dtype=self.dtype, lambd=float(lambd), generator=gen
    )
    return _fill_with(self, sample)


def _random_upper(dtype) -> int:
    """Exclusive upper bound of ``random_()`` without bounds: every integer exactly representable."""
    mantissa = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
    if dtype.is_floating_point:
        return (1 << mantissa[dtype.name]) + 1
    if dtype is D.bool_:
        return 2
    import numpy as np

    return int(np.iinfo(dtype.np).max) + 1


def random_(self, from_=None, to=None, *, generator=None, **kwargs):
    """Fill with integers: ``random_(to)`` in [0, to), ``random_(from, to)``, or ``random_()``."""
    from_ = kwargs.pop("from", from_)
    if kwargs:
        raise TypeError(f"random_: unexpected keyword arguments {sorted(kwargs)}")
    if to is None:
        from_, to = (0, _random_upper(self.dtype)) if from_ is None else (0, from_)
    elif from_ is None:
        from_ = 0
    gen = _generator(generator, self.device, "random_")
    sample = _integer_samples(tuple(self.shape), from_, to, self.dtype, self.device, gen, "random_")
    return _fill_with(self, sample)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1 samples: probability ``p`` (a number, or a tensor broadcast to self)."""
    gen = _generator(generator, self.device, "bernoulli_")
    dtype = self.dtype if self.dtype.is_floating_point else D.get_default_dtype()
    if is_tensor(p):
        probs = p.detach().to(dtype).expand(tuple(self.shape))
    else:
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_: expected 0 <= p <= 1, but got p={p}")
        from munet.ops.creation import full

        probs = full(tuple(self.shape), p, dtype=dtype, device=self.device)
    return _fill_with(self, apply(bernoulli_op, probs, generator=gen))
