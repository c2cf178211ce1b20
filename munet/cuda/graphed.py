"""``make_graphed_callables``: a callable's forward and backward captured as two CUDA graphs.

PyTorch's recipe: warm up on a side stream, capture the forward on static copies of the sample
arguments, capture the backward (``autograd.grad`` of the static outputs, with static gradient
buffers, with respect to the arguments that require grad and the module's parameters), and return
an ``autograd.Function`` whose forward copies the call's arguments into the static ones and
replays the forward graph, and whose backward copies the incoming gradients into the static
buffers and replays the backward graph. Outputs and gradients are copies of the static buffers
(the next replay overwrites those). Random ops (a module's dropout in training) draw new numbers at
every call, as the callable run eagerly would: each graph's random kernels read their Philox
counters from device slots that ``CUDAGraph.replay`` fills from the generator (``graphs.py``); the
warm-up iterations draw eagerly, as PyTorch's do.
"""

from __future__ import annotations

from munet.autograd import Function, grad
from munet.autograd.grad_mode import enable_grad


def graph_callables(callables, sample_args, num_warmup_iters: int, allow_unused_input: bool, pool):
    from munet.cuda.graphs import CUDAGraph, graph, graph_pool_handle

    single = not isinstance(callables, tuple)
    fns = (callables,) if single else callables
    samples = (sample_args,) if single else sample_args
    if len(fns) != len(samples):
        raise ValueError(f"make_graphed_callables: {len(fns)} callables but {len(samples)} sample argument tuples")
    pool = graph_pool_handle() if pool is None else pool
    graphed = tuple(
        _graph_one(fn, tuple(args), num_warmup_iters, allow_unused_input, pool, CUDAGraph, graph)
        for fn, args in zip(fns, samples)
    )
    return graphed[0] if single else graphed


def _check(fn, args) -> None:
    from munet._tensor import Tensor
    from munet.compiler.compiled import CompiledFunction

    target = getattr(fn, "forward", fn)
    if isinstance(fn, CompiledFunction) or isinstance(target, CompiledFunction):
        raise TypeError(
            "make_graphed_callables: a munet.compile'd callable replays its plan as a CUDA graph of its own on "
            "cuda; pass the uncompiled callable"
        )
    for i, a in enumerate(args):
        if not isinstance(a, Tensor) or not a.is_cuda:
            raise TypeError(f"make_graphed_callables: sample argument {i} must be a cuda tensor, got {a!r}")


def _graph_one(fn, args, warmup: int, allow_unused: bool, pool, CUDAGraph, graph):  # noqa: N803 - class args
    from munet.backends.cuda.streams import capture_stream, current_stream
    from munet.backends.cuda.streams import stream as stream_context

    _check(fn, args)
    params = [p for p in getattr(fn, "parameters", lambda: [])() if p.requires_grad]
    static_args = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)
    wrt = [a for a in static_args if a.requires_grad] + params

    def run():
        with enable_grad():
            out = fn(*static_args)
        return out if isinstance(out, tuple) else (out,)

    def backward_of(outs, grad_outs):
        differentiable = [(o, g) for o, g in zip(outs, grad_outs) if o.requires_grad]
        if not differentiable or not wrt:
            return [None] * len(wrt)
        return list(grad([o for o, _ in differentiable], wrt, [g for _, g in differentiable],
                         allow_unused=allow_unused))  # fmt: skip

    side = capture_stream()
    side.wait_stream(current_stream())
    with stream_context(side):  # warm-up: lazy initialisation (kernel loads, cuBLAS) outside the capture
        for _ in range(warmup):
            outs = run()
            backward_of(outs, [o.detach().clone().fill_(1) for o in outs])
    current_stream().wait_stream(side)

    forward_graph, backward_graph = CUDAGraph(), CUDAGraph()
    with graph(forward_graph, pool=pool):
        static_outs = run()
    static_grad_outs = tuple(o.detach().clone() for o in static_outs)
    with graph(backward_graph, pool=forward_graph.pool()):
        static_grads = backward_of(static_outs, static_grad_outs)

    n_args = len(args)
    grad_positions = [i for i, a in enumerate(static_args) if a.requires_grad]

    class Graphed(Function):
        @staticmethod
        def forward(ctx, *inputs):
            for static, x in zip(static_args, inputs[:n_args]):
                if static.data_ptr() != x.data_ptr():
                    static.detach().copy_(x)
            forward_graph.replay()
            return tuple(o.detach().clone() for o in static_outs)

        @staticmethod
        def backward(ctx, *grads):
            for static, g in zip(static_grad_outs, grads):
                if g is not None:
                    static.copy_(g)
                else:
                    static.zero_()
            backward_graph.replay()
            results = [None] * (n_args + len(params))
            for k, g in enumerate(static_grads):
                position = grad_positions[k] if k < len(grad_positions) else n_args + k - len(grad_positions)
                results[position] = None if g is None else g.detach().clone()
            return tuple(results)

    def graphed(*call_args):
        if len(call_args) != n_args:
            raise TypeError(f"graphed callable: expected {n_args} arguments (as sample_args), got {len(call_args)}")
        outs = Graphed.apply(*call_args, *params)
        return outs[0] if len(outs) == 1 else outs

    if hasattr(fn, "forward"):  # a module: its forward is graphed, the module is returned
        fn.forward = graphed
        return fn
    return graphed
