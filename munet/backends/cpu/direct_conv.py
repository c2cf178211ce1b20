"""The float32 2-D convolution as compiled C, on the thread budget: :func:`direct_conv2d`.

The kernel (``munet/compiler/codegen/c_direct_conv.py``) computes the GEMM of a forward convolution
without writing its columns: it reads each tile's inputs in place from a zero-padded copy of the
image. ``kernels_conv`` calls it before its column path for the 2-D float32 convolutions it runs
faster, and, with flipped weights, for stride-1 transposed convolutions (the input gradient of a
stride-1 convolution); :func:`direct_weight_grad` serves the weight gradient. Which ones depends on
the kernel this CPU runs: with AVX-512 the channel-vector kernel (tiles of 14 positions by 32 output
channels, any stride, rows of at least ``CHANNEL_MIN_WIDTH``), elsewhere the row kernel on phase
planes (:func:`_worth_it`: not the narrow planes, where most of a tile's positions would be dropped
and the column path's side-by-side GEMMs serve better). Eager
and compiled calls run the same kernel, so they give the same bits. It declines (returns None)
without a C compiler and for anything else; the caller's path then runs.

Work is split into tasks: blocks of images, or, with fewer images than threads, blocks of output
channels (the weight gradient: blocks of images summed apart, and of input channels); each task is
one single-threaded call of the kernel and pads its own images into a per-thread buffer (at most
``PADDED_FLOATS`` floats per task, so each thread keeps at most that). The library runs a call's
tasks itself (``munet_conv2d_forward_tasks``, ``munet_conv2d_weight_grad_tasks``): on the calling
thread at a budget of one, above one in an OpenMP loop with a dynamic schedule on the team the
generated kernels, matrix products (``gemm_tasks``) and OpenBLAS's jobs use, so no second pool of
threads waits on the cores; built without OpenMP, or with ``MUNET_CONV_TASKS=threads``,
``munet._threads.run_tasks``'s threads run them (:func:`_on_team`). The split never changes an
output element's order of summation, so every thread count and either pool gives the same bits.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
from collections.abc import Callable

import numpy as np

from munet._threads import kernel_threads, run_tasks
from munet.compiler.codegen import build
from munet.compiler.codegen.c_direct_conv import CHANNEL_BLOCK, ISA_NAMES, render_direct_conv

# "threads": above one thread, a call's tasks run on run_tasks's Python threads, not the OpenMP team
TASKS_ENV = "MUNET_CONV_TASKS"
# Floats of padded input per task: bounds the per-thread buffer (each thread keeps its largest)
PADDED_FLOATS = 1 << 21
# Output rows narrower than this stay on the column path: a 7-wide plane computes 9 positions per
# row for 7 kept and every tile needs a partial store (ResNet's last stage: 5.6 ms here against
# 5.1 on the column path, 14-wide planes 4.3 against 4.7; docs/perf/cpu.md)
MIN_WIDTH = 14
# A contraction (input channels x kernel positions) shorter than this stays on the column path: the
# CNN's first layer (1 channel, 3x3: 9) ran 2.9 ms here against 1.6, ResNet's stem (147) 2.9 against
# 5.6 (docs/perf/cpu.md); so does a layer with fewer output channels than a tile has rows
MIN_CONTRACTION = 64
# The weight gradient's tasks: blocks of images summed apart (at most this many), while their partial
# gradients take at most PARTIAL_FLOATS floats in all (larger layers split input channels only)
IMAGE_BLOCKS = 4
PARTIAL_FLOATS = 1 << 22
# The channel-vector kernel (AVX-512) serves output rows this wide and up: 7-wide planes run tiles
# of two rows (ResNet's last stage); narrower ones (none in ResNet or the CNN) stay on the column path
CHANNEL_MIN_WIDTH = 7
# ... but not 1x1 kernels at a stride above one: the padded copy holds every input position, the
# kernel reads one in sh*sw (7.15 ms against 3.64 on the column path for ResNet's 64->128 downsample
# at batch 16). Calls with few output positions (ResNet's 7x7-output layers at batch 1: 49) once
# stayed on the column path, packing the weights each call costing more than its GEMM under load;
# measured again on a quiet machine (docs/perf/onnx.md, 2026-12-04) the kernel wins there too
# (512->512 at batch 1: 1.36 ms against 2.47, 1.07 with the weights packed once: ``WeightPack``)
_ARGTYPES = [ctypes.c_void_p] * 4 + [ctypes.c_long] * 4


class WeightPack:
    """A convolution weight packed once into the channel-vector kernel's layout, for a caller that
    knows when the weight changes: ``version()`` returns a token (the compiler gives the weight
    tensor's storage and its version counter) that changes whenever the weight's data may have.
    :meth:`packed` returns the pack for the current token, packing anew when it changed; but only
    once the token was the same at two calls in a row, so a weight updated every call (a training
    step) keeps the kernel's per-call packing of one block at a time instead of writing a whole
    packed copy each call. Either way the kernel computes the same bits (same layout, same order)."""

    def __init__(self, version: Callable[[], object]):
        self.version = version
        self._last = None  # the key at the previous call
        self._kept = (None, None)  # (key, pack): one attribute, so a reader sees a pack with its own key

    def packed(self, lib, w: np.ndarray, groups: int) -> np.ndarray | None:
        """The pack of ``w`` (O, C/groups, KH, KW), C-contiguous float32: per group, blocks of
        ``CHANNEL_BLOCK`` output channels (zeros past the last), or None (pack per call)."""
        key = (self.version(), w.ctypes.data, w.shape, w.strides)
        kept_key, kept = self._kept
        if kept is not None and key == kept_key:
            return kept
        if key != self._last:
            self._last, self._kept = key, (None, None)
            return None
        o, k = w.shape[0], math.prod(w.shape[1:])
        og = o // groups
        padded = -(-og // CHANNEL_BLOCK) * CHANNEL_BLOCK
        pack = np.empty((groups, padded * k), np.float32)
        for group in range(groups):
            status = lib.munet_conv_pack_weights(
                w.ctypes.data + group * og * k * w.itemsize, pack[group].ctypes.data, og, k
            )
            if status != 0:
                return None
        self._kept = (key, pack)
        return pack


@functools.cache
def _library(compiler):
    """The library built by ``compiler`` (``build.find_compiler()``), its entry's types set."""
    lib, _ = build.load_library(render_direct_conv(), "munet_conv2d_direct", what="munet: the direct convolution")
    lib.munet_conv2d_direct.argtypes = _ARGTYPES
    lib.munet_conv2d_direct.restype = ctypes.c_int
    lib.munet_conv_select.argtypes = [ctypes.c_int]
    lib.munet_conv2d_weight_grad.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_long] * 6
    lib.munet_conv2d_weight_grad.restype = ctypes.c_int
    lib.munet_conv2d_channels.argtypes = (
        [ctypes.c_void_p] * 5 + [ctypes.c_long] * 4 + [ctypes.c_void_p] * 2 + [ctypes.c_int]
    )
    lib.munet_conv2d_channels.restype = ctypes.c_int
    lib.munet_conv_pack_weights.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_long] * 2
    lib.munet_conv_pack_weights.restype = ctypes.c_int
    lib.munet_conv2d_forward_tasks.argtypes = (
        [ctypes.c_void_p] * 5 + [ctypes.c_long] + [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3
    )
    lib.munet_conv2d_forward_tasks.restype = ctypes.c_int
    lib.munet_conv2d_weight_grad_tasks.argtypes = (
        [ctypes.c_void_p] * 4 + [ctypes.c_long] * 2 + [ctypes.c_void_p] + [ctypes.c_long] * 4 + [ctypes.c_int]
    )
    lib.munet_conv2d_weight_grad_tasks.restype = ctypes.c_int
    return lib


def _on_team(lib, threads: int) -> bool:
    """Whether the tasks run in the library's own loop (``munet_conv2d_*_tasks``): at a budget of one
    on this thread (a forked child included: no team starts there), above one on the OpenMP team
    (the one the generated kernels, products and OpenBLAS's jobs use) where the library was built
    with OpenMP, unless ``MUNET_CONV_TASKS=threads``; else on ``run_tasks``'s threads."""
    return threads <= 1 or (os.environ.get(TASKS_ENV, "").lower() != "threads" and bool(lib.munet_conv_openmp()))


def _raise_for(status: int, x) -> None:
    if status == -2:  # the packed entry serves the channel-vector kernel on whole blocks only
        raise RuntimeError("convolution: the packed weight does not fit this kernel (a block of output channels)")
    if status != 0:
        raise MemoryError(f"convolution: no memory for the direct kernel's buffers (input {tuple(x.shape)})")


def library():
    """The compiled kernel's library (``c_direct_conv``'s exports), or None without a C compiler."""
    compiler = build.find_compiler()
    return None if compiler is None else _library(compiler)


def use_isa(name: str) -> bool:
    """Run the micro-kernel ``name`` (``c_direct_conv.ISA_NAMES``: "portable", "avx512", "avx2") from
    now on, so tests cover every variant this CPU can run; False (nothing changed) where it cannot."""
    lib = library()
    return lib is not None and bool(lib.munet_conv_select(ISA_NAMES.index(name)))


def isa() -> str:
    """The micro-kernel that runs (the best this CPU supports unless :func:`use_isa` chose)."""
    lib = library()
    return "none" if lib is None else ISA_NAMES[lib.munet_conv_selected()]


def _worth_it(width: int, kernel_size, stride, lanes: int) -> bool:
    """Whether the direct kernel beats the column path, as measured (docs/perf/cpu.md): output rows
    of at least ``MIN_WIDTH`` positions, at a stride above one at least two tiles (``lanes``) wide
    (ResNet's 112-wide stem wins, its 28-wide 3x3 stride-2 layers lost at batch 16), and not a 1x1
    kernel at a stride above one (it reads one phase plane of the ``sh*sw`` copied). The forward
    kernel also wants a contraction of at least ``MIN_CONTRACTION`` (``direct_conv2d``)."""
    strided = any(s > 1 for s in stride)
    if strided and (width < 2 * lanes or all(k == 1 for k in kernel_size)):
        return False
    return width >= MIN_WIDTH


def direct_conv2d(
    x, w, stride, padding, dilation, groups, size, out=None, pack: WeightPack | None = None, epilogue=None
):
    """``out`` (N, O, *size) = the convolution of ``x`` (N, C, H, W) by ``w`` (O, C/groups, KH, KW)
    with leading padding ``padding[i][0]`` (the trailing padding is implied by ``size``; negative
    crops), or None when this kernel does not serve the call (see the module docstring). ``pack``
    (the channel-vector kernel only): the weight's packed copy kept between calls (:class:`WeightPack`).
    ``epilogue`` ``(bias, residual, relu)`` (the channel-vector kernel only, else None is returned):
    ``out = relu((conv + bias[o]) + residual)`` applied as each tile is stored, ``bias`` (O,) and
    ``residual`` (N, O, *size) float32 C-contiguous or None, ``relu`` a bool; ``out`` (given) and
    ``residual`` must not overlap ``x`` (``out`` may be ``residual``)."""
    lib = library()
    if lib is None or x.ndim != 4 or x.dtype != np.float32 or w.dtype != np.float32:
        return None
    if epilogue is not None and not _epilogue_fits(lib, epilogue, x, w, out, size):
        return None
    if not _serves(lib, x.shape, w.shape, stride, groups, size):
        return None
    channel_vectors, rows = lib.munet_conv_channel_vectors(), lib.munet_conv_rows()
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = size
    if out is None:
        out = np.empty((n, o, oh, ow), np.float32)
    elif out.dtype != np.float32 or not out.flags.c_contiguous:
        return None
    x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(w)
    og = o // groups
    geometry = np.array(
        (cg, h, wd, kh, kw, oh, ow, *stride, padding[0][0], padding[1][0], *dilation, c * h * wd, o * oh * ow),
        np.int64,
    )
    sh, sw = stride
    if channel_vectors:  # one padded copy per image (c_direct_conv's channel-vector driver)
        stack = cg * ((oh - 1) * sh + dilation[0] * (kh - 1) + 1) * ((ow - 1) * sw + dilation[1] * (kw - 1) + 1)
    else:  # sh * sw phase planes per image
        stack = sh * sw * cg * (oh + dilation[0] * (kh - 1) // sh) * (ow + dilation[1] * (kw - 1) // sw)
    threads = kernel_threads()
    # tasks split the images, or the output channels where there are fewer images than threads or
    # (channel-vector kernel, which packs its weights per task) more weights than padded images
    by_channels = n < threads or (channel_vectors and og * cg * kh * kw > n * stack and n * stack <= PADDED_FLOATS)
    step = max(1, min(PADDED_FLOATS // stack, n if by_channels or threads == 1 else -(-n // (2 * threads))))
    channels = max(rows, -(-og // threads // rows) * rows) if by_channels else og
    calls = [
        (group, b0, min(b0 + step, n), o0, min(o0 + channels, og))
        for group in range(groups)
        for b0 in range(0, n, step)
        for o0 in range(0, og, channels)
    ]
    item = x.itemsize
    packed = pack.packed(lib, w, groups) if pack is not None and channel_vectors else None
    w_pitch = og * math.prod(w.shape[1:]) * item
    bias, residual, relu = epilogue if epilogue is not None else (None, None, False)

    def run(group, b0, b1, o0, o1):
        at = (x.ctypes.data + group * cg * h * wd * item, w.ctypes.data + group * w_pitch)
        y = out.ctypes.data + group * og * oh * ow * item
        if not channel_vectors:
            status = lib.munet_conv2d_direct(*at, y, geometry.ctypes.data, o0, o1, b0, b1)
        else:
            status = lib.munet_conv2d_channels(
                *at,
                None if packed is None else packed[group].ctypes.data,
                y,
                geometry.ctypes.data,
                o0,
                o1,
                b0,
                b1,
                None if bias is None else bias.ctypes.data + group * og * item,
                None if residual is None else residual.ctypes.data + group * og * oh * ow * item,
                int(relu),
            )
        _raise_for(status, x)

    if _on_team(lib, threads):
        tasks = np.array(calls, np.int64).reshape(-1, 5)
        pitch = np.array(
            (cg * h * wd, w_pitch // item, 0 if packed is None else packed.shape[1], og * oh * ow, og), np.int64
        )
        status = lib.munet_conv2d_forward_tasks(
            x.ctypes.data, w.ctypes.data, None if packed is None else packed.ctypes.data, out.ctypes.data,
            geometry.ctypes.data, len(calls), tasks.ctypes.data, pitch.ctypes.data,
            None if bias is None else bias.ctypes.data, None if residual is None else residual.ctypes.data,
            int(relu), int(channel_vectors), threads,
        )  # fmt: skip
        _raise_for(status, x)
        return out
    run_tasks([functools.partial(run, *call) for call in calls])
    return out


def serves_forward(x_shape, w_shape, stride, groups, size) -> bool:
    """Whether :func:`direct_conv2d` runs the channel-vector kernel for float32 ``x`` of ``x_shape``
    (N, C, H, W) and ``w`` of ``w_shape`` (the kernel that takes packed weights and an epilogue)."""
    lib = library()
    return (
        lib is not None
        and bool(lib.munet_conv_channel_vectors())
        and _serves(lib, x_shape, w_shape, stride, groups, size)
    )


def _serves(lib, x_shape, w_shape, stride, groups, size) -> bool:
    """The shape rules of the module docstring: whether the kernel this CPU runs serves the call."""
    if len(x_shape) != 4 or len(size) != 2:
        return False
    n, _, _, _ = x_shape
    o, cg, kh, kw = w_shape
    oh, ow = size
    if lib.munet_conv_channel_vectors():
        worth_it = ow >= CHANNEL_MIN_WIDTH and not (any(s > 1 for s in stride) and kh == kw == 1)
    else:
        worth_it = _worth_it(ow, (kh, kw), stride, lib.munet_conv_lanes())
    return worth_it and cg * kh * kw >= MIN_CONTRACTION and o // groups >= lib.munet_conv_rows() and min(n, cg, oh) > 0


def _epilogue_fits(lib, epilogue, x, w, out, size) -> bool:
    """Whether the channel-vector kernel can apply ``epilogue`` (``direct_conv2d``) to this call."""
    bias, residual, _ = epilogue
    shape = (x.shape[0], w.shape[0], *size)
    if not lib.munet_conv_channel_vectors() or out is None or np.may_share_memory(out, x):
        return False
    if bias is not None and (bias.dtype != np.float32 or bias.shape != (w.shape[0],) or not bias.flags.c_contiguous):
        return False
    return residual is None or (
        residual.dtype == np.float32
        and residual.shape == shape
        and residual.flags.c_contiguous
        and not np.may_share_memory(residual, x)
    )


def direct_weight_grad(x, w, stride, padding, dilation, groups, size, out=None):
    """The convolution ``_weight_grad`` (``ops/conv.py``) expresses a weight gradient as, or None
    where this kernel does not serve it: ``x`` is the input with batch and channels swapped (C, N,
    H, W), ``w`` the output gradient likewise (O, N, OH, OW), ``stride``/``dilation`` the original
    dilation/stride, and the result (C, O, *size) holds ``grad_w[o, c]`` at ``[c, o]``. The kernel
    reads the input in place like the forward one and sums over each image's output positions
    (``munet_conv2d_weight_grad``). Tasks are blocks of images (``_image_blocks``: how many depends on
    the shapes only), each summing into its own partial gradient, added in order at the end, and
    within each, blocks of input channels; so the summation order, and the bits, are the same at
    every thread count. Unlike the forward kernel it serves short contractions (the CNN's first
    layer: one input channel, 9 rows of a 12-row tile): its contraction is the output positions."""
    lib = library()
    if lib is None or x.ndim != 4 or groups != 1 or x.dtype != np.float32 or w.dtype != np.float32:
        return None
    c, n, h, wd = x.shape
    o, _, oh, ow = w.shape
    kh, kw = size
    # in the original convolution's terms: its stride is this call's dilation and vice versa
    if not _worth_it(ow, size, dilation, lib.munet_conv_lanes()) or min(c, n, o, oh) == 0:
        return None
    if out is None:
        out = np.empty((c, o, kh, kw), np.float32)
    elif out.dtype != np.float32 or not out.flags.c_contiguous:
        return None
    images = np.ascontiguousarray(x.transpose(1, 0, 2, 3))  # (N, C, H, W): the original input
    grads = np.ascontiguousarray(w.transpose(1, 0, 2, 3))  # (N, O, OH, OW): the output gradient
    geometry = np.array(
        (c, h, wd, kh, kw, oh, ow, *dilation, padding[0][0], padding[1][0], *stride, c * h * wd, o * oh * ow), np.int64
    )
    blocks = _image_blocks(n, c * o * kh * kw)
    parts = out[None] if len(blocks) == 1 else np.empty((len(blocks),) + out.shape, np.float32)
    threads = kernel_threads()
    step = -(-c // max(1, -(-threads // len(blocks))))
    x_pitch, y_pitch = c * h * wd * images.itemsize, o * oh * ow * grads.itemsize

    def run(part, b0, b1, c0):
        status = lib.munet_conv2d_weight_grad(
            images.ctypes.data + b0 * x_pitch, grads.ctypes.data + b0 * y_pitch, parts[part].ctypes.data,
            geometry.ctypes.data, o, c0, min(c0 + step, c), b1 - b0, o * kh * kw, kh * kw,
        )  # fmt: skip
        if status != 0:
            raise MemoryError(f"convolution: no memory for the direct kernel's buffers (input {tuple(x.shape)})")

    calls = [(i, b0, b1, c0) for i, (b0, b1) in enumerate(blocks) for c0 in range(0, c, step)]
    if _on_team(lib, threads):
        tasks = np.array(calls, np.int64)
        status = lib.munet_conv2d_weight_grad_tasks(
            images.ctypes.data, grads.ctypes.data, parts.ctypes.data, geometry.ctypes.data, o, len(calls),
            tasks.ctypes.data, step, out.size, o * kh * kw, kh * kw, threads,
        )  # fmt: skip
        _raise_for(status, x)
    else:
        run_tasks([functools.partial(run, *call) for call in calls])
    if len(blocks) > 1:
        np.sum(parts, axis=0, out=out)
    return out


def _image_blocks(n: int, weights: int) -> list[tuple[int, int]]:
    """The blocks of images the weight gradient sums separately: ``IMAGE_BLOCKS`` of them where
    their partial gradients (``weights`` floats each) stay small, else one. It depends on the shapes
    only, never on the thread count, so every thread count sums in the same order. Splitting images
    rather than channels keeps each image's gradient packed once, and serves one input channel."""
    count = min(n, IMAGE_BLOCKS) if weights * IMAGE_BLOCKS <= PARTIAL_FLOATS else 1
    return [(i * n // count, (i + 1) * n // count) for i in range(count)]
