"""Renders ``docs/pytorch_coverage.md``: which of PyTorch's public names MuNet has, per namespace.

PyTorch is read only when this runs (it is a test-only dependency): ``python -m
munet._pytorch_coverage > docs/pytorch_coverage.md`` with torch 2.13 installed; a test fails when
the committed file is stale. The output is sorted and depends only on the two packages.

Which PyTorch names count (``public_names``):

- a namespace's ``__all__`` when it has one, else its ``dir()``; for ``Tensor``, ``dir(torch.Tensor)``;
  for ``backends``, the public names of its device submodules (``mps.is_available``);
- names with a leading underscore are private and left out;
- names that are modules are namespaces of their own, not names, and are left out;
- without ``__all__``, names whose object is defined outside torch (``typing.Optional``,
  ``logging.log``, plain ``int`` constants) are imports, not API, and are left out;
- names in ``DENIED`` (internal or deprecated, each with its reason) are left out.

A counted name is present in MuNet when the matching MuNet object exists, is not a function that
only raises (``only_raises``; such names are listed in ``REFUSED`` with the reason) and, where a
probe in ``PROBES`` exercises it, the probe runs without raising: a name that exists and raises is
not an API.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import inspect
import textwrap
import types
import warnings

NAMESPACES = (
    "torch",
    "Tensor",
    "nn",
    "nn.functional",
    "nn.init",
    "nn.utils",
    "optim",
    "optim.lr_scheduler",
    "utils.data",
    "autograd",
    "amp",
    "linalg",
    "fft",
    "special",
    "distributions",
    "distributed",
    "onnx",
    "testing",
    "backends",
    "cuda",
    "jit",
)

BACKEND_SUBMODULES = ("cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp")

# (namespace, globs over names separated by spaces, reason). Internal or deprecated in PyTorch itself.
DENIED = (
    (
        "torch",
        "AliasDb AggregationType AnyType Argument ArgumentSpec AwaitType Block BoolType CallStack Capsule"
        " ClassType Code CompilationUnit CompleteArgumentSpec ComplexType ConcreteModuleType*"
        " DeepCopyMemoTable DeviceObjType DictType EnumType ErrorReport ExecutionPlan FileCheck FloatType"
        " FunctionSchema FutureType Gradient Graph GraphExecutorState IODescriptor InferredType IntType"
        " InterfaceType JITException ListType LiteScriptModule LockingLogger Node NoneType NoopLogger"
        " NumberType OperatorInfo OptionalType PyObjectType RRefType Script* StaticModule StreamObjType"
        " StringType TensorType TracingState TupleType Type UnionType Use Value import_ir_module*"
        " merge_type_from_type_comment parse_ir parse_schema parse_type_comment unify_type_list fork wait"
        " AcceleratorError BenchmarkConfig BenchmarkExecutionStats ThroughputBenchmark"
        " PyTorchFileReader PyTorchFileWriter",
        "TorchScript IR, JIT runtime and C++ binding types (torch.jit is counted on its own)",
    ),
    ("torch", "DispatchKey* ExcludeDispatchKeyGuard DisableTorchFunction*", "dispatcher internals"),
    ("torch", "BufferDict ModuleDict ParameterDict", "TorchScript containers (nn has the public ones)"),
    ("torch", "cudnn_* miopen_* mkldnn_* fbgemm_*", "vendor-library kernels behind the public ops"),
    ("torch", "quantize* quantized_* fake_quantize_* *_qparams_* fused_moving_avg_obs_fake_quant", "torch.ao"),
    ("torch", "q_* qscheme int_repr dequantize empty_quantized", "quantized tensors (torch.ao)"),
    ("torch", "*_copy", "view-copy variants for functionalization backends"),
    ("torch", "batch_norm_* native_* autocast_*_nesting", "kernel entry points behind the nn ops"),
    ("torch", "Sym*", "symbolic-shape types of torch.compile/export tracing (internal)"),
    ("torch", "sym_*", "symbolic-shape helpers of torch.compile/export tracing (internal)"),
    ("torch", "*Storage", "legacy storage classes; TypedStorage is deprecated, storage is internal"),
    ("torch", "*StorageContext", "serialization internals"),
    ("torch", "q*int*", "quantized dtypes, owned by torch.ao (outside the counted namespaces)"),
    ("torch", "bits*", "bit-pattern shell dtypes without operators in PyTorch"),
    ("torch", "int[1-7]", "sub-byte shell dtypes without operators in PyTorch"),
    ("torch", "uint[1-7]", "sub-byte shell dtypes without operators in PyTorch"),
    ("torch", "float8_*", "float8 shell dtypes for scaled-mm kernels only"),
    ("torch", "float4_*", "float4 shell dtypes for scaled-mm kernels only"),
    ("torch", "*_ipu_*", "autocast hooks of the out-of-tree IPU device"),
    ("torch", "*_xla_*", "autocast hooks of the out-of-tree XLA device"),
    ("torch", "*autocast_gpu_*", "deprecated for get/set_autocast_dtype('cuda')"),
    ("torch", "AVG", "internal reduction enum of torch.distributed"),
    ("torch", "SUM", "internal reduction enum of torch.distributed"),
    ("torch", "set_default_tensor_type", "deprecated for set_default_dtype/set_default_device"),
    ("torch", "chain_matmul", "deprecated for linalg.multi_dot"),
    ("torch", "is_vulkan_available", "PyTorch's own Vulkan build flag"),
    ("Tensor", "eig lstsq solve symeig", "removed from PyTorch: the methods only raise, pointing to torch.linalg"),
    ("Tensor", "reinforce volatile", "deprecated leftovers of the Variable API"),
    ("Tensor", "storage", "returns the deprecated TypedStorage"),
    ("Tensor", "storage_type", "returns the deprecated TypedStorage class"),
    ("Tensor", "*_qscheme*", "quantized tensors (torch.ao)"),
    ("Tensor", "q_*", "quantized tensors (torch.ao)"),
    ("Tensor", "int_repr", "quantized tensors (torch.ao)"),
    ("Tensor", "dequantize", "quantized tensors (torch.ao)"),
    ("nn.functional", "has_torch_function*", "__torch_function__ override machinery (internal)"),
    ("nn.functional", "handle_torch_function", "__torch_function__ override machinery (internal)"),
    ("nn.functional", "boolean_dispatch", "internal decorator of PyTorch's own functional.py"),
    ("nn.functional", "BroadcastingList*", "TorchScript type annotations"),
    ("nn.functional", "Tensor", "re-export of torch.Tensor"),
    ("nn.functional", "GRID_SAMPLE_*", "internal enum tables of grid_sample"),
    ("nn.functional", "reproducibility_notes", "docstring fragments"),
    ("nn.functional", "sparse_support_notes", "docstring fragments"),
    ("nn.functional", "tf32_notes", "docstring fragments"),
    ("nn.functional", "assert_int_or_pair", "internal argument check"),
    ("nn.utils", "convert_conv*_weight_memory_format", "cuDNN channels-last conversion helpers"),
    ("linalg", "Tensor", "re-export of torch.Tensor"),
    ("linalg", "common_notes", "docstring fragments"),
    ("testing", "assert_allclose", "deprecated for testing.assert_close"),
    ("autograd", "variable", "removed from PyTorch: it only raises, pointing to torch.tensor"),
    ("distributed", "reduce_op", "deprecated for distributed.ReduceOp"),
)


# "namespace:name" -> why. Names MuNet defines only to refuse them with a clear error (their
# function's body is a single ``raise``, see ``only_raises``): they do not count, and are listed with
# the reason. tests/test_pytorch_coverage.py checks that every counted name whose MuNet function only
# raises is here, and that each entry still only raises.
REFUSED = {
    "jit:save": "MuNet writes no TorchScript archives (munet.save writes a module's state dict)",
    "jit:load": "MuNet reads no TorchScript archives (munet.load reads state dicts and torch.save checkpoints)",
}


def only_raises(obj) -> bool:
    """Whether ``obj`` is a Python function whose body, after its docstring, is one ``raise``: a
    name that exists only to refuse. Classes, builtins and lambdas are not judged (False)."""
    func = inspect.unwrap(obj) if callable(obj) else obj
    if not inspect.isfunction(func):
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):  # no source (generated code) or a lambda inside an expression
        return False
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = node.body
    if (
        isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return len(body) == 1 and isinstance(body[0], ast.Raise)


def _refuses(namespace: str, name: str, obj) -> bool:
    """``only_raises(obj)``, except for a Tensor method that refuses on dense tensors, as PyTorch's
    does, and that a subclass of another layout implements (``munet.sparse``'s ``indices()``)."""
    if not only_raises(obj):
        return False
    if namespace == "Tensor":
        import munet

        pending = list(munet.Tensor.__subclasses__())
        while pending:
            sub = pending.pop()
            pending.extend(sub.__subclasses__())
            impl = sub.__dict__.get(name)
            if impl is not None and not only_raises(impl):
                return False
    return True


def _torch_object(torch, namespace: str):
    if namespace == "torch":
        return torch
    if namespace == "Tensor":
        return torch.Tensor
    return importlib.import_module(f"torch.{namespace}")


def _defined_in_torch(obj) -> bool:
    module = getattr(obj, "__module__", None)
    return not isinstance(module, str) or module.startswith("torch")


def _module_names(module, *, use_all: bool = True) -> list[str]:
    if use_all and hasattr(module, "__all__"):
        names = list(module.__all__)
        keep = lambda obj: True  # noqa: E731 - __all__ is the module's own statement of its API
    else:
        names = dir(module)
        keep = _defined_in_torch
    public = []
    for name in names:
        if name.startswith("_"):
            continue
        obj = getattr(module, name, None)
        if isinstance(obj, types.ModuleType) or not keep(obj):
            continue
        public.append(name)
    return public


def _is_denied(namespace: str, name: str) -> bool:
    return any(
        ns == namespace and any(fnmatch.fnmatchcase(name, glob) for glob in patterns.split())
        for ns, patterns, _ in DENIED
    )


def public_names(torch, namespace: str) -> list[str]:
    """PyTorch's counted names in ``namespace`` (sorted), by the rules in this module's docstring."""
    if namespace == "Tensor":
        names = [n for n in dir(torch.Tensor) if not n.startswith("_")]
    elif namespace == "backends":
        names = []
        for sub in BACKEND_SUBMODULES:
            module = importlib.import_module(f"torch.backends.{sub}")
            names += [f"{sub}.{n}" for n in _module_names(module, use_all=False)]
    else:
        names = _module_names(_torch_object(torch, namespace))
    return sorted({n for n in names if not _is_denied(namespace, n)})


_ABSENT = object()


def _munet_object(path: str):
    """``munet.<path>`` by attribute, importing submodules on the way; ``_ABSENT`` when absent (a
    name may be None, as ``newaxis``)."""
    import munet

    obj = munet
    for part in path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            if not isinstance(obj, types.ModuleType):
                return _ABSENT
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
            except ImportError:
                return _ABSENT
    return obj


def _step(m, optimizer_class):
    """One step of ``optimizer_class`` on a 2-D parameter with a gradient."""
    p = m.nn.Parameter(m.ones(2, 2))
    p.grad = m.ones(2, 2)
    optimizer_class([p]).step()


def _sparse_step(m, optimizer_class):
    """One step of ``optimizer_class`` on the sparse gradient of an ``Embedding(sparse=True)``."""
    table = m.nn.Embedding(3, 2, sparse=True)
    table(m.tensor([0, 0, 2])).sum().backward()
    optimizer_class(table.parameters()).step()


def _probe_tensor():
    import munet

    return munet.arange(6, dtype=munet.float32).reshape(2, 3)


def _probe_sparse(m):
    """A coalesced sparse COO tensor, built with a repeated index."""
    s = m.sparse_coo_tensor([[0, 2, 0]], [1.0, 2.0, 3.0], (3,))
    return s.coalesce()


_SPARSE_PROBES = {
    "torch:sparse_coo_tensor": lambda m: _probe_sparse(m).to_dense(),
    "Tensor:coalesce": lambda m: _probe_sparse(m),
    "Tensor:indices": lambda m: _probe_sparse(m).indices(),
    "Tensor:values": lambda m: _probe_sparse(m).values(),
    "Tensor:is_coalesced": lambda m: _probe_sparse(m).is_coalesced(),
    "Tensor:sparse_dim": lambda m: _probe_sparse(m).sparse_dim(),
    "Tensor:dense_dim": lambda m: _probe_sparse(m).dense_dim(),
    "Tensor:to_dense": lambda m: _probe_sparse(m).to_dense(),
    "Tensor:to_sparse": lambda m: _probe_tensor().to_sparse().to_dense(),
    "Tensor:to_sparse_coo": lambda m: _probe_tensor().to_sparse_coo().to_dense(),
    "Tensor:sparse_mask": lambda m: m.ones(3).sparse_mask(_probe_sparse(m)).to_dense(),
}


# "namespace:name" -> a call that must not raise for the name to count. Probes cover commonly used
# names whose presence alone says little (they could exist and raise).
PROBES = {
    "torch:bincount": lambda m: m.bincount(m.tensor([0, 1, 1, 3])),
    "torch:histc": lambda m: m.histc(_probe_tensor(), bins=4),
    "torch:quantile": lambda m: m.quantile(_probe_tensor(), 0.5),
    "torch:isin": lambda m: m.isin(m.tensor([1, 2]), m.tensor([2])),
    "torch:diff": lambda m: m.diff(_probe_tensor()),
    "torch:cross": lambda m: m.cross(m.ones(2, 3), m.ones(2, 3), dim=1),
    "torch:finfo": lambda m: m.finfo(m.float32).eps,
    "torch:iinfo": lambda m: m.iinfo(m.int32).max,
    "torch:einsum": lambda m: m.einsum("ij,jk->ik", _probe_tensor(), _probe_tensor().t()),
    "torch:stft": lambda m: m.stft(m.ones(64), 16, return_complex=True),
    "torch:save": lambda m: m.save({"a": m.ones(1)}, __import__("io").BytesIO()),
    "torch:compile": lambda m: m.compile(lambda x: x + 1)(m.ones(2)),
    "torch:set_printoptions": lambda m: m.set_printoptions(precision=4),
    "torch:multinomial": lambda m: m.multinomial(m.ones(3), 2),
    "torch:topk": lambda m: m.topk(_probe_tensor(), 2),
    "torch:sort": lambda m: m.sort(_probe_tensor(), dim=1),
    "torch:unique": lambda m: m.unique(m.tensor([1, 1, 2])),
    "torch:where": lambda m: m.where(_probe_tensor() > 2, _probe_tensor(), 0.0),
    "torch:abs_": lambda m: m.abs_(m.ones(2)),
    "torch:fill": lambda m: m.fill(m.ones(2), 1.0),
    "torch:asarray": lambda m: m.asarray(m.ones(2).numpy()),
    "torch:frombuffer": lambda m: m.frombuffer(bytearray(8), dtype=m.int32),
    "torch:empty_strided": lambda m: m.empty_strided((2, 3), (1, 2)),
    "torch:empty_permuted": lambda m: m.empty_permuted((2, 3), (1, 0)),
    "torch:is_nonzero": lambda m: m.is_nonzero(m.ones(1)),
    "torch:use_deterministic_algorithms": lambda m: m.use_deterministic_algorithms(
        m.are_deterministic_algorithms_enabled(), warn_only=m.is_deterministic_algorithms_warn_only_enabled()
    ),
    "torch:set_float32_matmul_precision": lambda m: m.set_float32_matmul_precision(m.get_float32_matmul_precision()),
    "torch:set_autocast_enabled": lambda m: m.set_autocast_enabled("cpu", m.is_autocast_enabled("cpu")),
    "torch:get_device_module": lambda m: m.get_device_module("cpu").is_available(),
    "Tensor:type": lambda m: _probe_tensor().type(),
    "Tensor:unsqueeze_": lambda m: _probe_tensor().unsqueeze_(0),
    "Tensor:scatter_add_": lambda m: m.zeros(3).scatter_add_(0, m.tensor([0, 0]), m.ones(2)),
    "Tensor:index_add_": lambda m: m.zeros(3).index_add_(0, m.tensor([0, 2]), m.ones(2)),
    "Tensor:pin_memory": lambda m: _probe_tensor().pin_memory(),
    "Tensor:share_memory_": lambda m: _probe_tensor().share_memory_(),
    "Tensor:numpy": lambda m: _probe_tensor().numpy(),
    "Tensor:tolist": lambda m: _probe_tensor().tolist(),
    "Tensor:resize_": lambda m: _probe_tensor().resize_(3, 3),
    "Tensor:set_": lambda m: m.ones(2).set_(m.zeros(3)),
    "Tensor:apply_": lambda m: _probe_tensor().apply_(lambda v: v + 1),
    "Tensor:dim_order": lambda m: _probe_tensor().t().dim_order(),
    "Tensor:sum_to_size": lambda m: _probe_tensor().sum_to_size(1, 3),
    "Tensor:new": lambda m: _probe_tensor().new(2, 3),
    "nn:LSTM": lambda m: m.nn.LSTM(3, 4)(m.ones(2, 1, 3)),
    "nn:TransformerEncoderLayer": lambda m: m.nn.TransformerEncoderLayer(4, 2, 8)(m.ones(2, 3, 4)),
    "nn:Conv2d": lambda m: m.nn.Conv2d(1, 2, 3)(m.ones(1, 1, 5, 5)),
    "nn:ConvTranspose2d": lambda m: m.nn.ConvTranspose2d(2, 1, 4, 2, 1)(m.ones(1, 2, 3, 3)),
    "nn:CTCLoss": lambda m: m.nn.CTCLoss()(
        m.randn(5, 1, 3).log_softmax(2), m.tensor([[1, 2]]), m.tensor([5]), m.tensor([2])
    ),
    "nn.functional:grid_sample": lambda m: (
        m.nn.functional.grid_sample(m.ones(1, 1, 3, 3), m.zeros(1, 2, 2, 2), mode="bicubic", align_corners=False)
        + m.nn.functional.grid_sample(m.ones(1, 1, 2, 3, 3), m.zeros(1, 1, 2, 2, 3), align_corners=False)[:, :, 0]
    ),
    "torch:grid_sampler_2d": lambda m: m.grid_sampler_2d(m.ones(1, 1, 3, 3), m.zeros(1, 2, 2, 2), 2, 1, False),
    "torch:grid_sampler_3d": lambda m: m.grid_sampler_3d(m.ones(1, 1, 2, 3, 3), m.zeros(1, 1, 2, 2, 3), 0, 2, True),
    "nn.functional:interpolate": lambda m: m.nn.functional.interpolate(m.ones(1, 1, 4, 4), scale_factor=2),
    "nn.functional:scaled_dot_product_attention": lambda m: m.nn.functional.scaled_dot_product_attention(
        m.ones(1, 2, 3), m.ones(1, 2, 3), m.ones(1, 2, 3)
    ),
    "nn.init:sparse_": lambda m: m.nn.init.sparse_(m.empty(4, 3), 0.5),
    "nn.init:orthogonal_": lambda m: m.nn.init.orthogonal_(m.empty(3, 3)),
    "nn.utils:clip_grad_norm_": lambda m: m.nn.utils.clip_grad_norm_([m.nn.Parameter(m.ones(2))], 1.0),
    "linalg:svd": lambda m: m.linalg.svd(_probe_tensor()),
    "linalg:eigh": lambda m: m.linalg.eigh(m.eye(3)),
    "linalg:eig": lambda m: m.linalg.eig(m.eye(3)),
    "linalg:eigvals": lambda m: m.linalg.eigvals(m.eye(3)),
    "torch:vmap": lambda m: m.vmap(m.dot, in_dims=(0, None))(m.ones(2, 3), m.ones(3)),
    "linalg:solve": lambda m: m.linalg.solve(m.eye(3), m.ones(3)),
    "fft:rfft": lambda m: m.fft.rfft(m.ones(8)),
    "fft:fft": lambda m: m.fft.fft(m.ones(8)),
    "fft:irfft": lambda m: m.fft.irfft(m.fft.rfft(m.ones(8))),
    "fft:fftn": lambda m: m.fft.fftn(m.ones(2, 4)),
    "torch:istft": lambda m: m.istft(
        m.stft(m.ones(64), 16, window=m.hann_window(16), return_complex=True), 16, window=m.hann_window(16)
    ),  # fmt: skip
    "torch:view_as_real": lambda m: m.view_as_real(m.complex(m.ones(2), m.zeros(2))),
    "torch:polar": lambda m: m.polar(m.ones(2), m.zeros(2)),
    "Tensor:real": lambda m: m.complex(m.ones(2), m.zeros(2)).real,
    "Tensor:conj": lambda m: m.complex(m.ones(2), m.zeros(2)).conj(),
    "special:gammaln": lambda m: m.special.gammaln(m.ones(2)),
    "special:bessel_j0": lambda m: m.special.bessel_j0(_probe_tensor()),
    "special:gammainc": lambda m: m.special.gammainc(_probe_tensor() + 1, _probe_tensor()),
    "special:chebyshev_polynomial_t": lambda m: m.special.chebyshev_polynomial_t(_probe_tensor(), 3),
    "torch:cov": lambda m: m.cov(_probe_tensor()),
    "torch:logcumsumexp": lambda m: m.logcumsumexp(_probe_tensor(), 1),
    "torch:gcd": lambda m: m.gcd(m.tensor([4, 6]), m.tensor([6, 9])),
    "torch:trapezoid": lambda m: m.trapezoid(_probe_tensor()),
    "torch:histogramdd": lambda m: m.histogramdd(_probe_tensor(), bins=2),
    "torch:block_diag": lambda m: m.block_diag(_probe_tensor(), _probe_tensor()),
    "Tensor:index_reduce": lambda m: _probe_tensor().index_reduce(0, m.tensor([0, 0]), _probe_tensor(), "amax"),
    "special:zeta": lambda m: m.special.zeta(m.full((2,), 2.0), m.ones(2)),
    "torch:lstm": lambda m: m.lstm(
        m.ones(2, 1, 3), [m.zeros(1, 1, 2)] * 2, list(m.nn.LSTM(3, 2).parameters()), True, 1, 0.0, False, False, False
    ),  # fmt: skip
    "torch:batch_norm": lambda m: m.batch_norm(
        m.ones(2, 3), None, None, m.zeros(3), m.ones(3), False, 0.1, 1e-5, False
    ),
    "nn:FractionalMaxPool2d": lambda m: m.nn.FractionalMaxPool2d(2, output_size=2)(m.ones(1, 1, 5, 5)),
    "nn:AdaptiveLogSoftmaxWithLoss": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2])(
        m.ones(2, 4), m.tensor([0, 5])
    ),
    "nn.utils:weight_norm": lambda m: m.nn.utils.remove_weight_norm(m.nn.utils.weight_norm(m.nn.Linear(2, 2))),
    "nn.utils:spectral_norm": lambda m: m.nn.utils.spectral_norm(m.nn.Linear(2, 2))(m.ones(1, 2)),
    "optim:Adafactor": lambda m: _step(m, m.optim.Adafactor),
    "optim:Muon": lambda m: _step(m, m.optim.Muon),
    "autograd:gradcheck": lambda m: m.autograd.gradcheck(m.sin, (m.ones(2, dtype=m.float64, requires_grad=True),)),
    "testing:make_tensor": lambda m: m.testing.make_tensor(2, 3, dtype=m.float32, device="cpu"),
    "distributions:Wishart": lambda m: m.distributions.Wishart(4.0, m.eye(2)).rsample((2,)),
    "distributions:LKJCholesky": lambda m: m.distributions.LKJCholesky(3, 1.0).sample(),
    "distributions:VonMises": lambda m: m.distributions.VonMises(0.0, 1.0).sample((2,)),
    "distributions:biject_to": lambda m: m.distributions.biject_to(m.distributions.constraints.simplex)(m.ones(2)),
    "distributed:TCPStore": lambda m: _probe_store(m.distributed.TCPStore("127.0.0.1", 0, 1, True)),
    "distributed:HashStore": lambda m: _probe_store(m.distributed.HashStore()),
    "distributed:PrefixStore": lambda m: _probe_store(m.distributed.PrefixStore("p", m.distributed.HashStore())),
    "distributed:FileStore": lambda m: _probe_store(
        m.distributed.FileStore(__import__("tempfile").mktemp(prefix="munet-probe-"), 1)
    ),
    "distributions:Categorical": lambda m: m.distributions.Categorical(logits=m.zeros(3)).sample(),
    "distributions:Normal": lambda m: m.distributions.Normal(0.0, 1.0).rsample((2,)),
    "optim:SparseAdam": lambda m: _sparse_step(m, m.optim.SparseAdam),
    "testing:assert_close": lambda m: m.testing.assert_close(m.ones(2), m.ones(2)),
    "cuda:is_available": lambda m: m.cuda.is_available(),
    "cuda:is_current_stream_capturing": lambda m: m.cuda.is_current_stream_capturing(),
    "cuda:get_arch_list": lambda m: m.cuda.get_arch_list(),
    "cuda:memory_stats_as_nested_dict": lambda m: m.cuda.memory_stats_as_nested_dict(),
    "cuda:check_error": lambda m: m.cuda.check_error(0),
    "backends:mps.is_available": lambda m: m.backends.mps.is_available(),
    "backends:cpu.get_cpu_capability": lambda m: m.backends.cpu.get_cpu_capability(),
    "backends:cuda.enable_flash_sdp": lambda m: m.backends.cuda.enable_flash_sdp(m.backends.cuda.flash_sdp_enabled()),
    "jit:fork": lambda m: m.jit.wait(m.jit.fork(lambda x: x + 1, m.ones(1))),
    "jit:freeze": lambda m: m.jit.freeze(m.nn.Linear(1, 1).eval())(m.ones(1)),
    "jit:script": lambda m: m.jit.script(lambda x: x * 2),
    "jit:trace": lambda m: m.jit.trace(lambda x: x * 2, (m.ones(2),)),
    **_SPARSE_PROBES,
}


def _probe_store(store) -> None:
    """A store works: set, get, add and compare_set give PyTorch's results."""
    store.set("k", "v")
    store.add("n", 2)
    if store.get("k") != b"v" or store.add("n", 1) != 3 or store.compare_set("k", "v", "w") != b"w":
        raise AssertionError("the store gave other results than PyTorch's")


def _path(namespace: str, name: str) -> str:
    return name if namespace == "torch" else f"{namespace}.{name}"


def refusing_names(torch) -> set[str]:
    """``"namespace:name"`` of the counted names whose MuNet function only raises (``only_raises``)."""
    return {
        f"{namespace}:{name}"
        for namespace in NAMESPACES
        for name in public_names(torch, namespace)
        if _refuses(namespace, name, _munet_object(_path(namespace, name)))
    }


def munet_has(namespace: str, name: str) -> bool:
    """Whether MuNet has ``name`` working in ``namespace`` (exists and passes its probe, if any)."""
    import munet

    obj = _munet_object(_path(namespace, name))
    if obj is _ABSENT or f"{namespace}:{name}" in REFUSED or _refuses(namespace, name, obj):
        return False
    probe = PROBES.get(f"{namespace}:{name}")
    if probe is None:
        return True
    rng_state = munet.get_rng_state()  # probes that sample must not move the caller's random stream
    try:
        with warnings.catch_warnings():  # deprecated names warn as PyTorch's do; the probe asks whether they run
            warnings.simplefilter("ignore")
            probe(munet)
    except Exception:  # noqa: BLE001 - any failure, NotImplementedError included, means "does not work"
        return False
    finally:
        munet.set_rng_state(rng_state)
    return True


def coverage() -> dict[str, tuple[list[str], list[str]]]:
    """Per namespace, (present names, missing names), each sorted."""
    import torch

    table = {}
    for namespace in NAMESPACES:
        names = public_names(torch, namespace)
        present = [n for n in names if munet_has(namespace, n)]
        missing = [n for n in names if n not in set(present)]
        table[namespace] = (present, missing)
    return table


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "n/a"


def render_pytorch_coverage() -> str:
    import torch

    table = coverage()
    total = sum(len(p) + len(m) for p, m in table.values())
    have = sum(len(p) for p, _ in table.values())
    version = torch.__version__.split("+")[0]
    lines = [
        "# PyTorch coverage",
        "",
        f"Which public names of PyTorch {version} MuNet has, per namespace. Generated by",
        "`python -m munet._pytorch_coverage > docs/pytorch_coverage.md`;",
        "`tests/test_pytorch_coverage.py` fails when this file is stale.",
        "",
        "Counted: a namespace's `__all__` (else its `dir()`), without names that start with `_`,",
        "names that are modules, names imported from outside torch, and the internal or deprecated",
        "names listed at the end with their reasons. A name is present when MuNet has it under the",
        "same path and, for the names with a behaviour probe in `munet/_pytorch_coverage.py`, the",
        "probe runs: a name that exists and raises does not count, and neither does one whose MuNet",
        "function only raises (listed under Refused with the reason).",
        "",
        f"**Overall: {have} of {total} ({_percent(have, total)}).**",
        "",
        "| namespace | present | counted | share |",
        "|---|---|---|---|",
    ]
    for namespace, (present, missing) in table.items():
        counted = len(present) + len(missing)
        lines.append(f"| `{namespace}` | {len(present)} | {counted} | {_percent(len(present), counted)} |")
    for namespace, (present, missing) in table.items():
        lines += ["", f"## `{namespace}`", ""]
        lines.append(f"Missing ({len(missing)}): " + (", ".join(f"`{n}`" for n in missing) or "none"))
        lines.append("")
        lines.append(f"Present ({len(present)}): " + (", ".join(f"`{n}`" for n in present) or "none"))
    lines += ["", "## Left out", "", "| namespace | names | reason |", "|---|---|---|"]
    for ns, patterns, reason in DENIED:
        lines.append(f"| `{ns}` | " + ", ".join(f"`{glob}`" for glob in patterns.split()) + f" | {reason} |")
    lines += ["", "## Refused", "", "| namespace | name | reason |", "|---|---|---|"]
    for key, reason in REFUSED.items():
        ns, name = key.split(":")
        lines.append(f"| `{ns}` | `{name}` | {reason} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_pytorch_coverage(), end="")
