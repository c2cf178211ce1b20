"""The column path's blocks of a convolution as tasks on MuNet's OpenMP team: :func:`run`.

``kernels_conv._conv_columns`` cuts a forward convolution into blocks (of images, of output rows of
one image, or of images laid side by side) whose columns stay in cache between the copy that writes
them and the GEMM that reads them. Above one thread, :func:`run` runs every block as one task of an
OpenMP loop with a dynamic schedule: the thread that claims a block writes its columns with the
generated im2col (``codegen/c_im2col.py``, at one thread) into its own buffer and calls OpenBLAS's
``cblas_?gemm`` (NumPy's, held at one thread) per image and group, or once per group for images side
by side, whose (O, B, P) product it then copies into the (B, O, P) result. The team is the one the
generated kernels, ``gemm_tasks``'s products, the direct convolution and OpenBLAS's jobs use, so no
second pool waits on the cores (``munet._threads``), and a call meets its threads once, where
``run_tasks``'s Python threads took the GIL around each block's copy and product.

The columns are the generated im2col's whether the caller passed it (the compiler) or not (eager
calls), and the products' shapes are the blocks', so eager and compiled calls give the same bits at
a given thread count. Nothing runs here (:func:`run` returns False and the caller uses
``run_tasks``) without a C compiler with OpenMP, without OpenBLAS's CBLAS, or for a dtype other
than float32 and float64 or a rank the im2col does not serve.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from munet import _threads
from munet.backends.cpu import gemm_tasks
from munet.backends.cpu.scratch import work
from munet.compiler.codegen.c_team import TEAM_TASKS

_SOURCE = (
    TEAM_TASKS
    + r"""
#include <stdint.h>
#include <string.h>

typedef {index} blas_int;
typedef {real} real;
typedef void (*gemm_fn)(int order, int trans_a, int trans_b, blas_int m, blas_int n, blas_int k, real alpha,
                        const real *a, blas_int lda, const real *b, blas_int ldb, real beta, real *c, blas_int ldc);
typedef void (*im2col_fn)(const real *x, real *cols, long images, long oy0, long oy1, long image_pitch,
                          long row_pitch, int threads);

static void product(gemm_fn gemm, int64_t m, int64_t n, int64_t k, const real *a, const real *b, int64_t ldb,
                    real *c, int64_t ldc) {
    gemm(101, 111, 111, m, n, k, 1, a, k, b, ldb, 0, c, ldc);
}

/* Block i is blocks[4i .. 4i+3] = (b0, b1, oy0, oy1): output rows oy0 .. oy1 (run = (oy1 - oy0) * ow
   positions) of images b0 .. b1 of x (x_pitch apart). Its columns go to this thread's part of `cols`
   (cols_floats apart), (images, groups * kg, run), then y[b, g*og .. (g+1)*og, oy0*ow ..] (y is
   (N, groups * og, p), row pitch p) = w[g] (og x kg) @ columns[b, g*kg ..] per image and group;
   `side` (whole planes: run = p): the columns (groups * kg, images, p), one product per group into
   this thread's part of `products` (product_floats apart), (groups * og, images, p), copied into y. */
void munet_column_tasks(void *im2col_address, void *gemm_address, int64_t count, const int64_t *blocks,
                        const real *x, int64_t x_pitch, const real *w, real *y, int64_t groups, int64_t og,
                        int64_t kg, int64_t p, int64_t ow, int64_t side, real *cols, int64_t cols_floats,
                        real *products, int64_t product_floats, int64_t threads) {
    im2col_fn im2col = (im2col_fn)im2col_address;
    gemm_fn gemm = (gemm_fn)gemm_address;
    const int64_t o = groups * og;
    long done = 0;
    #pragma omp parallel num_threads(threads)
    {
        #pragma omp for schedule(dynamic, 1) nowait
        for (int64_t i = 0; i < count; i++) {
            const int64_t *block = blocks + 4 * i, b0 = block[0], images = block[1] - block[0];
            const int64_t oy0 = block[2], run = (block[3] - block[2]) * ow;
            real *c = cols + omp_get_thread_num() * cols_floats;
            const real *xb = x + b0 * x_pitch;
            if (side) {
                real *out = products + omp_get_thread_num() * product_floats;
                const int64_t n = images * run;
                im2col(xb, c, images, oy0, block[3], run, n, 1);
                for (int64_t g = 0; g < groups; g++)
                    product(gemm, og, n, kg, w + g * og * kg, c + g * kg * n, n, out + g * og * n, n);
                for (int64_t b = 0; b < images; b++)
                    for (int64_t r = 0; r < o; r++)
                        memcpy(y + ((b0 + b) * o + r) * p, out + (r * images + b) * run, (size_t)run * sizeof(real));
            } else {
                im2col(xb, c, images, oy0, block[3], groups * kg * run, run, 1);
                for (int64_t b = 0; b < images; b++)
                    for (int64_t g = 0; g < groups; g++)
                        product(gemm, og, run, kg, w + g * og * kg, c + (b * groups + g) * kg * run, run,
                                y + ((b0 + b) * o + g * og) * p + oy0 * ow, p);
            }
            munet_task_done(&done);
        }
        munet_wait_awake(&done, count);
    }
}
"""
)


@functools.cache
def _library(dtype: np.dtype):
    """``munet_column_tasks`` for ``dtype`` and the CBLAS function's address, or None."""
    found = gemm_tasks.load_with_cblas(_SOURCE, "munet_column_tasks", dtype, "munet: convolution blocks on the team")
    if found is None:
        return None
    fn, gemm = found
    fn.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.argtypes += [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 6 + [ctypes.c_void_p, ctypes.c_int64] * 2
    fn.argtypes += [ctypes.c_int64]
    return fn, gemm


def _im2col(x_shape, geometry, dtype: np.dtype):
    """The address of the generated im2col of this convolution, or None where it does not serve it."""
    from munet.compiler.codegen.c_im2col import im2col_geometry, load_im2col

    if len(x_shape) not in (3, 4):
        return None
    kernel_size, stride, padding, dilation, size = geometry
    shape = im2col_geometry(x_shape, kernel_size, stride, padding, dilation, size)
    fn = load_im2col(shape, "f32" if dtype == np.float32 else "f64")
    return ctypes.cast(fn, ctypes.c_void_p).value


def run(x: np.ndarray, w: np.ndarray, result: np.ndarray, blocks: list, side: bool, geometry, threads: int) -> bool:
    """The blocks ``[(b0, b1, oy0, oy1), ...]`` of the forward convolution of ``x`` (N, C, *spatial),
    C-contiguous, by ``w`` (G, Og, C/G * K), C-contiguous, into ``result`` (N, G*Og, *size),
    C-contiguous, on ``threads`` threads (module docstring); ``side``: every block is whole planes of
    images side by side. ``geometry``: ``(kernel_size, stride, padding, dilation, size)``, the padding
    as ``(lo, hi)`` pairs. False, with nothing written, where this module does not serve the call."""
    dtype = x.dtype
    if not (dtype == w.dtype == result.dtype and dtype in (np.float32, np.float64)) or not blocks:
        return False
    if not all(a.flags.c_contiguous and a.flags.aligned for a in (x, w, result)):
        return False
    from munet.compiler.codegen import build

    library = _library(np.dtype(dtype))
    if library is None or build.find_compiler() is None:  # the im2col of a new geometry needs it
        return False
    im2col = _im2col(x.shape, geometry, dtype)
    if im2col is None:
        return False
    fn, gemm = library
    size = geometry[4]
    groups, og, kg = w.shape
    width = size[-1] if len(size) > 1 else size[0]  # an output row (1-d: the whole output, one row)
    p = result[0, 0].size
    largest = max((b1 - b0) * (y1 - y0) for b0, b1, y0, y1 in blocks) * width
    cols = work("cols", (threads, groups * kg * largest), dtype)
    products = work("rows", (threads, groups * og * largest), dtype) if side else cols
    bounds = np.array(blocks, np.int64).reshape(-1, 4)
    with _threads.single_threaded_blas():
        fn(im2col, gemm, len(bounds), bounds.ctypes.data, x.ctypes.data, x[0].size if len(x) else 0,
           w.ctypes.data, result.ctypes.data, groups, og, kg, p, width, int(side), cols.ctypes.data,
           cols.shape[1], products.ctypes.data, products.shape[1], threads)  # fmt: skip
    return True
