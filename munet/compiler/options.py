"""``munet.compile``'s PyTorch keywords (``backend``, ``mode``, ``options``) resolved to MuNet's settings.

``backend`` picks how much of the pipeline runs: ``"inductor"`` (the default, PyTorch's name for its
own compiler) is MuNet's: trace, optimize, fuse, generate kernels. ``"aot_eager"`` traces and replays
the graph with every op its own eager kernel (no fusion, no generated fused code). ``"eager"`` does not
capture at all: the function runs as plain Python at every call.

``mode`` names PyTorch's presets. MuNet has no autotuner and replays a whole step as one lowered plan
anyway (on vulkan one command buffer per call; on cuda one CUDA graph), so every mode selects the
same plan, except ``"max-autotune-no-cudagraphs"``, which turns the cuda plans' graph capture off
as in PyTorch; they are accepted so PyTorch scripts run unchanged (docs/compiler.md).

``options`` holds backend settings by name: MuNet's own (``fuse``, ``optimize``, ``cache_size``,
``cuda_graphs``: capture a cuda plan as one CUDA graph, default True; ``remat``: fused kernels
recompute cheap elementwise values instead of loading them, ``passes/remat.py``, default True), nothing else; PyTorch's
inductor settings have no meaning here and are refused by name.
"""

from __future__ import annotations

BACKENDS = ("inductor", "aot_eager", "eager")
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTIONS = ("fuse", "optimize", "cache_size", "cuda_graphs", "remat")


def resolve(backend, mode, options, fuse) -> dict:
    """MuNet's settings for ``backend``/``mode``/``options``/``fuse``, or TypeError/ValueError naming the bad one.

    Returns ``{"backend": name, "fuse": bool, "cuda_graphs": bool, **options}`` (the other option keys
    only when given).
    """
    if not isinstance(backend, str):
        raise TypeError(
            f"munet.compile: backend must be one of {', '.join(map(repr, BACKENDS))} (a string), got "
            f"{type(backend).__name__}; custom backend callables are not supported"
        )
    if backend not in BACKENDS:
        raise ValueError(
            f"munet.compile: unknown backend {backend!r}; expected one of {', '.join(map(repr, BACKENDS))}"
        )
    if mode is not None and mode not in MODES:
        raise ValueError(f"munet.compile: unknown mode {mode!r}; expected None or one of {', '.join(map(repr, MODES))}")
    if mode is not None and options is not None:
        raise ValueError("munet.compile: either mode or options can be given, not both (as torch.compile)")
    settings = _check_options(options)
    fuse = settings.pop("fuse", fuse)
    if fuse is not None and not isinstance(fuse, bool):
        raise TypeError(f"munet.compile: fuse must be a bool, got {type(fuse).__name__}")
    if backend == "aot_eager" and fuse:
        raise ValueError("munet.compile: backend='aot_eager' runs the graph unfused; fuse=True contradicts it")
    settings["fuse"] = backend != "aot_eager" if fuse is None else fuse
    settings["backend"] = backend
    graphs = settings.get("cuda_graphs", mode != "max-autotune-no-cudagraphs")
    if not isinstance(graphs, bool):
        raise TypeError(f"munet.compile: options['cuda_graphs'] must be a bool, got {type(graphs).__name__}")
    settings["cuda_graphs"] = graphs
    if not isinstance(settings.get("remat", True), bool):
        raise TypeError(f"munet.compile: options['remat'] must be a bool, got {type(settings['remat']).__name__}")
    return settings


def _check_options(options) -> dict:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"munet.compile: options must be a dict, got {type(options).__name__}")
    unknown = [k for k in options if k not in OPTIONS]
    if unknown:
        raise ValueError(
            f"munet.compile: unknown option(s) {', '.join(map(repr, unknown))}; MuNet's backend accepts "
            f"{', '.join(map(repr, OPTIONS))}"
        )
    return dict(options)
