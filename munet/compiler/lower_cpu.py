"""The cpu compile target (:class:`CpuTarget`) and its lowering of ``fused`` nodes: a prepared
call of the generated C kernel.

``prepare_fused(node, executable)`` builds the group's kernel IR, renders it as C, compiles it
(or takes it from the disk cache) and returns a step ``step(env)`` that reads the inputs from
the executable's environment, calls the kernel through ctypes and stores its outputs. Each
output is written where the memory plan puts it (``Arena.target``: an arena view, or the state
input it updates in place, which the plan allows only when the kernel reads that input at the
index it writes, ``FusedOp.reads_at_write_index``); unplanned outputs get fresh arrays. Without a working C compiler (or ``fuse`` disabled by a failing build) the
step runs the group's member nodes with the NumPy kernels instead, and the executable's
``codegen`` counters say so. ``prepare_generated`` does the same for primitive nodes with a kernel IR form
(``max_pool``, the scatter of its gradient). BLAS-bound nodes (matmul, convolution) are never fused: they
keep calling NumPy for their GEMMs; a convolution's im2col (forward) or col2im (stride-1 transposed)
step is generated C (``generated_im2col``, ``generated_col2im``). One exception: a fused group that is
a forward convolution's bias/residual/ReLU epilogue runs in the direct kernel's store where that
kernel serves the convolution (``conv_epilogue.py``; ``stats()["conv_epilogues"]`` counts them).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from types import SimpleNamespace

import numpy as np

from munet._tensor import Tensor
from munet._threads import kernel_threads
from munet.compiler.codegen import build, c_im2col
from munet.compiler.codegen.c import render_c
from munet.compiler.codegen.c_slabs import count_for, render_c_sized, render_c_slabs
from munet.compiler.codegen.c_symbolic import MAX_SIZES, counts_for, render_c_symbolic
from munet.compiler.codegen.kernel import kernel_from_group, short_dtype, unnamed_kernel_of_group
from munet.compiler.codegen.primitives import kernel_from_max_pool, kernel_from_max_pool_backward, shifted_sum_kernel
from munet.compiler.ir import Graph
from munet.compiler.resize import group_renaming, group_sizes, resized_group, size_symbols


def new_counters() -> dict:
    # generated/numpy: fused groups by how they ran; primitive: primitive nodes given a generated kernel
    # reused: kernels of a program at new sizes that took the compiled kernel of the group they copy
    return {
        "generated": 0,
        "numpy": 0,
        "primitive": 0,
        "cache_hits": 0,
        "reused": 0,
        "conv_epilogues": 0,
        "compiler": None,
        "fallback_reason": None,
    }


class CpuTarget:
    """The cpu side of a plan: contiguous NumPy results, the arena, generated C for fused groups."""

    uses_arena = True
    fused_dtypes = ("bool", "i64")  # render_c's integer arithmetic wraps as NumPy's
    fuses_integer_division = False  # C cannot report a zero divisor: those nodes run unfused
    reuses_programs = True  # generated C takes its counts as arguments (c_slabs.count_for)

    def __init__(self, backend):
        self.backend = backend
        self.counters = new_counters()  # fused groups: generated kernels, NumPy fallbacks, cache hits

    def result(self, raw, np_dtype):
        data = self.backend.wrap(raw, np_dtype)[2]
        return data if data.flags.c_contiguous else np.ascontiguousarray(data)

    def view_step(self, op, attrs, source, out, value):
        view_rule, backend = op.view, self.backend
        geometry: dict = {}  # (shape, dtype) of a C-contiguous source -> the view's geometry

        def view_step(env):
            src = source(env)
            if src.flags.c_contiguous:  # the usual case: the geometry is computed once
                key = (src.shape, src.dtype)
                g = geometry.get(key)
                if g is None:
                    g = geometry[key] = view_rule(Tensor._from_numpy(src), **attrs)
                env[out] = backend.view(src.reshape(-1), *g)
                return
            t = Tensor._from_numpy(src)
            shape, stride, offset = view_rule(t, **attrs)
            env[out] = backend.view(t._storage.data, shape, stride, offset)

        return view_step

    def fused_step(self, node, executable):
        # lower_cpu reads codegen/slot/arena/backend; a cpu node of a vulkan plan has no arena
        arena = executable.arena if executable.target is self else None
        context = SimpleNamespace(
            codegen=self.counters,
            slot=executable.slot,
            arena=arena,
            backend=self.backend,
            dynamic=executable.dynamic,
            size_symbols=executable.size_symbols,
        )
        step = prepare_fused(node, context)
        if arena is not None:
            from munet.compiler.conv_epilogue import conv_epilogue_step  # arena.py imports this module

            return conv_epilogue_step(node, executable, step) or step
        return step

    @staticmethod
    def generates(node) -> bool:
        """Whether ``node`` runs as a generated kernel of its own here (``prepare_generated``)."""
        builder = _GENERATED.get(node.name)
        return builder is not None and build.find_compiler() is not None and builder(node) is not None

    def generated_step(self, node, executable):
        """A generated kernel for a primitive node (``lower_cpu.prepare_generated``), or None."""
        if executable.target is not self:
            return None
        context = SimpleNamespace(
            codegen=self.counters, slot=executable.slot, arena=executable.arena, backend=self.backend
        )
        return prepare_generated(node, context)

    def constant(self, value):
        return value

    def argument(self, t: Tensor):
        data = t._data
        if data.flags.c_contiguous:  # ascontiguousarray would make a 0-d array 1-d
            return data
        return np.ascontiguousarray(data).reshape(data.shape)

    def upload(self, host: np.ndarray):
        return host

    def download(self, data) -> np.ndarray:
        return np.ascontiguousarray(data)

    def scope(self):
        return contextlib.nullcontext()

    def clone(self, data):
        return np.array(data, copy=True)

    def copy_into(self, dst, src) -> None:
        np.copyto(dst, src, casting="unsafe")

    @staticmethod
    def same_memory(a, b) -> bool:
        return a.shape == b.shape and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]

    def describe_fused(self, node) -> list[str]:
        return []

    def plan_inplace(self, graph, donors: dict) -> dict:
        return {}  # the arena places state updates

    def stats(self) -> dict:
        return codegen_stats(self.counters)


def codegen_stats(counters: dict) -> dict:
    """How fused groups and primitive nodes ran, from a plan's ``counters`` (``new_counters``)."""
    groups = counters["generated"] + counters["numpy"]
    generated = counters["generated"] + counters["primitive"]
    fallback = None
    kernels = "generated C" if generated else None  # how fused groups ran
    if counters["numpy"]:
        fallback = f"numpy kernels for {counters['numpy']} fused groups: {counters['fallback_reason']}"
        kernels = f"the NumPy rendering of the scalar formulas ({counters['fallback_reason']})"
    return {
        "generated_code": generated > 0,
        "elementwise_kernels": kernels,
        "fallback": fallback,
        "fused_groups": groups,
        "generated_kernels": generated,  # fused groups' and primitive nodes' (max_pool) kernels
        "kernel_cache_hits": counters["cache_hits"],
        "kernels_reused": counters["reused"],
        "conv_epilogues": counters["conv_epilogues"],  # fused groups run in a convolution's store
        "c_compiler": counters["compiler"],
    }


def prepare_fused(node, executable):
    """The step running fused ``node`` in ``executable`` (generated C, else the NumPy plan)."""
    counters = executable.codegen
    group = node.attrs["group"]
    try:
        kernel, tensors, scalars = unnamed_kernel_of_group(group)
        reused = _reused_kernel(group, kernel)
        made = reused or _symbolic_kernel(group, kernel)
        if made is None:
            kernel = kernel_from_group(group)[0]
        fn, source, leading, hit = made or _rendered_kernel(group, kernel, executable.dynamic, executable.size_symbols)
    except build.CompilerUnavailableError as e:
        counters["numpy"] += 1
        counters["fallback_reason"] = str(e)
        return _numpy_step(node, executable)
    group.kernel = kernel
    counters["generated"] += 1
    counters["cache_hits"] += int(hit)
    counters["reused"] += reused is not None
    counters["compiler"] = build.compiler_name()
    return _kernel_step(fn, source, tensors, scalars, node, executable, leading)


def _rendered_kernel(group, kernel, dynamic: bool, symbols=None) -> tuple:
    """``(fn, source, leading scalars, disk cache hit)`` of ``kernel`` rendered and compiled (or loaded);
    ``dynamic``: with a run-time count in place of its leading size where it can (``codegen/c_slabs.py``),
    or, when it holds sizes of ``symbols`` (sizes that changed since the last specialization, as
    ``resize.size_symbols`` describes them), a run-time count for each (``codegen/c_symbolic.py``).
    What was rendered is kept on ``group`` for its copies at new sizes (``_reused_kernel``)."""
    if dynamic and symbols is not None:
        symbolic = _symbolic_render(group, group, kernel, *symbols)
        if symbolic is not None:
            return symbolic
    source, name, leading, rule = render_c(kernel), kernel.name, (), "static"
    if dynamic:
        sized = render_c_sized(kernel)
        if sized is not None:
            source, name, count, rule = sized
            leading = (float(count),)
        elif (slabs := render_c_slabs(kernel)) is not None:
            (source, name), leading, rule = slabs, (float(kernel.shape[0]),), "slabs"
    fn, hit = build.load_kernel(source, name)
    group.rendered = (kernel, rule, fn, source)
    return fn, source, leading, hit


def _reused_kernel(group, kernel):
    """What ``_rendered_kernel`` returns, taken from the group ``group`` copies (``resize.py``) when
    its kernel differs from ``kernel`` in nothing but the run-time count; else None."""
    template = group.template
    if template is None or template.rendered is None:
        return None
    rendered, rule, fn, source = template.rendered
    if rule == "symbolic":
        renaming = group_renaming(template, group)
        bases = tuple(renaming.get(s, s) for s in rendered.sizes[: rendered.n_bases])
        counts = counts_for(rendered, kernel, bases)
    else:
        count = count_for(rendered, rule, kernel)
        counts = None if count is None else () if rule == "static" else (float(count),)
    if counts is None:
        return None
    group.rendered = template.rendered
    return fn, source, counts, False


def _symbolic_kernel(group, kernel):
    """What ``_rendered_kernel`` returns for a copy of a group at new sizes (``resize.py``) whose
    template's kernel does not serve it: the template's kernel rendered with a run-time count for
    each size that changed (``codegen/c_symbolic.py``), kept on the template so later sizes reuse it;
    None when the kernel cannot take its sizes at run time."""
    template = group.template
    if template is None or template.rendered is None:
        return None
    renaming = group_renaming(template, group)
    if not renaming:
        return None
    previous, rule = template.rendered[:2]
    if rule == "symbolic":  # sizes made generic before stay generic (a batch, then a length)
        renaming = {s: renaming.get(s, s) for s in previous.sizes} | renaming
    symbols = size_symbols(renaming, MAX_SIZES)
    if symbols is None:
        return None
    sizes, terms, n_bases = symbols
    return _symbolic_render(template, group, kernel, sizes, terms, n_bases, tuple(renaming[s] for s in sizes[:n_bases]))


def _symbolic_render(template, group, kernel, sizes, terms, n_bases, bases=None):
    """``template``'s kernel with a run-time count for each of ``sizes`` (``c_symbolic.render_c_symbolic``),
    compiled, as ``_rendered_kernel`` returns it for ``group`` (``kernel``: its kernel, at ``bases``,
    default the sizes themselves), kept on both; None when ``template`` holds none of ``sizes``, or
    its kernel cannot take them at run time."""
    if not set(sizes) & set(group_sizes(template)):
        return None

    def kernel_at(sentinels: dict):
        try:
            return unnamed_kernel_of_group(resized_group(template, sentinels))[0]
        except Exception:  # a view rule refusing the sentinel sizes: the kernel is compiled per size
            return None

    symbolic = render_c_symbolic(kernel_at, sizes, terms, n_bases, len(kernel.params))
    bases = tuple(sizes[:n_bases]) if bases is None else bases
    counts = None if symbolic is None else counts_for(symbolic, kernel, bases)
    if counts is None:
        return None
    fn, hit = build.load_kernel(symbolic.source, symbolic.name)
    template.rendered = group.rendered = (symbolic, "symbolic", fn, symbolic.source)
    return fn, symbolic.source, counts, hit


# primitive nodes with a generated kernel: op name -> builder of (kernel, input values), or None
# when the node is outside the form the kernel handles
_GENERATED = {"max_pool": kernel_from_max_pool, "max_pool_backward": kernel_from_max_pool_backward}


def prepare_generated(node, executable):
    """The step running ``node`` as a generated kernel, or None: an unpadded ``max_pool``
    (values and indices from one window kernel) or a ``max_pool_backward`` whose windows tile the
    input (gathered per input cell). Otherwise (or without a C compiler) the NumPy kernel runs, writing into the
    plan all the same."""
    builder = _GENERATED.get(node.name)
    built = None if builder is None else builder(node)
    if built is None:
        return None
    kernel, tensors = built
    source = render_c(kernel)
    try:
        fn, hit = build.load_kernel(source, kernel.name)
    except build.CompilerUnavailableError:
        return None
    counters = executable.codegen
    counters["primitive"] += 1
    counters["cache_hits"] += int(hit)
    counters["compiler"] = build.compiler_name()
    return _kernel_step(fn, source, tensors, [], node, executable)


def generated_col2im():
    """``kernels_conv.shifted_sum`` as generated C (one pass instead of a zeroing and K adds), or
    None without a C compiler. Kernels are built per shape on first use."""
    if build.find_compiler() is None:
        return None
    from munet.backends.cpu.kernels_conv import shifted_sum

    kernels: dict = {}

    def col2im(target, columns, offsets):
        dtype = short_dtype(target.dtype)
        if (
            dtype not in ("f32", "f64")
            or target.dtype != columns.dtype
            or not (target.flags.c_contiguous and columns.flags.c_contiguous)
        ):
            return shifted_sum(target, columns, offsets)
        key = (target.shape, columns.shape[-2], tuple(offsets), dtype)
        fn = kernels.get(key)
        if fn is None:
            kernel = shifted_sum_kernel(target.shape, columns.shape[-2], tuple(offsets), dtype)
            fn = kernels[key] = build.load_kernel(render_c(kernel), kernel.name)[0]
        ins = (ctypes.c_void_p * 1)(columns.ctypes.data)
        outs = (ctypes.c_void_p * 1)(target.ctypes.data)
        fn(ctypes.addressof(ins), ctypes.addressof(outs), None, kernel_threads())

    return col2im


def generated_im2col():
    """The im2col of a forward convolution as generated C (``codegen/c_im2col.py``), or None without
    a C compiler: ``im2col(cols, x, kernel_size, stride, padding, dilation, size, rows)`` fills
    ``cols`` with the columns of output rows ``rows = (lo, hi)`` (None: all) of the block ``x``
    (B, C, *spatial) of 1-d or 2-d float32/float64 images: ``cols`` is (B, C*K, R*OW) (R = hi -
    lo) or, with ``side``, (C*K, B, R*OW) (the images side by side, for one GEMM), C-contiguous, on ``threads``
    OpenMP threads (None: the budget). Returns True, or False (nothing written) for anything else. Kernels are built per geometry on first use."""
    if build.find_compiler() is None:
        return None

    def im2col(cols, x, kernel_size, stride, padding, dilation, size, rows=None, threads=None, side=False) -> bool:
        dtype = short_dtype(x.dtype)
        if (
            dtype not in ("f32", "f64")
            or x.ndim not in (3, 4)
            or cols.dtype != x.dtype
            or not (x.flags.c_contiguous and cols.flags.c_contiguous)
        ):
            return False
        geometry = c_im2col.im2col_geometry(x.shape, kernel_size, stride, padding, dilation, size)
        fn = c_im2col.load_im2col(geometry, dtype)
        lo, hi = rows if rows is not None else (0, geometry[5])
        run = (hi - lo) * geometry[6]
        k = x.shape[1] * math.prod(kernel_size)
        images = x.shape[0]
        if cols.shape != ((k, images, run) if side else (images, k, run)):
            return False
        pitches = (run, images * run) if side else (k * run, run)
        fn(x.ctypes.data, cols.ctypes.data, images, lo, hi, *pitches, kernel_threads() if threads is None else threads)
        return True

    return im2col


def _kernel_step(fn, source, tensors, scalars, node, executable, extra_params=()):
    """The step calling kernel ``fn``; ``extra_params`` are constant run-time scalars after the group's."""
    slot = executable.slot
    in_slots = [slot[v] for v in tensors]
    in_dtypes = [np.dtype(v.dtype.np) for v in tensors]
    in_shapes = [tuple(v.shape) for v in tensors]
    param_slots = [slot[v] for v in scalars]
    outs = [(slot[v], tuple(v.shape), np.dtype(v.dtype.np)) for v in node.outputs]
    fixed, targets = _targets(node, executable)
    in_ptrs = (ctypes.c_void_p * max(len(in_slots), 1))()
    out_ptrs = (ctypes.c_void_p * max(len(outs), 1))()
    params = (ctypes.c_double * max(len(param_slots) + len(extra_params), 1))()
    for k, value in enumerate(extra_params):
        params[len(param_slots) + k] = value
    parallel = "omp parallel" in source  # the thread budget is read per call: set_num_threads applies at once
    addr_in, addr_out, addr_p = ctypes.addressof(in_ptrs), ctypes.addressof(out_ptrs), ctypes.addressof(params)
    for k, r in enumerate(fixed):
        if r is not None:
            out_ptrs[k] = r.ctypes.data

    def fused_step(env):
        keep = []
        for k, i in enumerate(in_slots):
            a = env[i]
            if not (type(a) is np.ndarray and a.flags.c_contiguous and a.dtype == in_dtypes[k]):
                a = np.ascontiguousarray(a, dtype=in_dtypes[k]).reshape(in_shapes[k])
                keep.append(a)
            in_ptrs[k] = a.ctypes.data
        for k, i in enumerate(param_slots):
            params[k] = env[i]
        results = []
        for k, (i, shape, dtype) in enumerate(outs):
            r = fixed[k]
            if r is None:
                t = targets[k]
                r = np.empty(shape, dtype) if t is None else t(env)
                out_ptrs[k] = r.ctypes.data
            results.append((i, r))
        fn(addr_in, addr_out, addr_p, kernel_threads() if parallel else 1)
        for i, r in results:
            env[i] = r

    return fused_step


def _targets(node, executable) -> tuple:
    """Per output: its arena view (fixed), else ``env -> array`` (a state updated in place), else None."""
    arena = executable.arena
    if arena is None:
        return [None] * len(node.outputs), [None] * len(node.outputs)
    fixed = [arena.buffer(v) if v in arena.plan.offsets else None for v in node.outputs]
    targets = [None if f is not None else arena.target(v) for v, f in zip(node.outputs, fixed)]
    return fixed, targets


def _numpy_step(node, executable):
    from munet.compiler.executable import Executable

    group = node.attrs["group"]
    sub = Graph()
    sub.inputs = list(group.inputs)
    sub.nodes = list(group.members)
    sub.outputs = list(group.outputs)
    inner = Executable(sub, executable.backend.device, plan_memory=False)  # results must be fresh arrays
    in_slots = [executable.slot[v] for v in group.inputs]
    out_slots = [executable.slot[v] for v in group.outputs]

    fixed, targets = _targets(node, executable)
    if not any(f is not None or t is not None for f, t in zip(fixed, targets)):

        def numpy_step(env):
            results = inner.run([env[i] for i in in_slots])
            for i, r in zip(out_slots, results):
                env[i] = r

        return numpy_step

    def planned_numpy_step(env):
        results = inner.run([env[i] for i in in_slots])  # everything is read before anything is written
        bufs = [f if f is not None else (t(env) if t is not None else None) for f, t in zip(fixed, targets)]
        # a result may alias an input (a kernel handing it back): copy it before any buffer is written
        results = [
            np.array(r, copy=True) if any(b is not None and np.may_share_memory(r, b) for b in bufs) else r
            for r in results
        ]
        for i, r, b in zip(out_slots, results, bufs):
            if b is not None:
                np.copyto(b, r)
                r = b
            env[i] = r

    return planned_numpy_step

    return numpy_step
