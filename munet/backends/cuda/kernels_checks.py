"""cuda kernel of the ``check`` primitive (``munet/ops/checks.py``): a failing element records a
fault in the device's fault record (``device_asserts.py``), raised at the next synchronization."""

from __future__ import annotations

from munet import _dtype as D
from munet.backends.cuda import copies, launch
from munet.backends.cuda.device_asserts import FAULT_HELPER
from munet.backends.cuda.registry import kernel
from munet.backends.cuda.scalar_cuda import HEADER
from munet.backends.cuda.source import CudaSource, kernel_head
from munet.ops.checks import ERRORS

_PARAMS = (
    ("const bool *", "ok"),
    ("const long long *", "value"),  # null without a value tensor
    ("long long", "n"),
    ("unsigned long long", "site"),
    ("unsigned long long *", "fault"),
    ("bool *", "out"),
)


def render_check() -> CudaSource:
    """``out[0] = true``; every ``i < n`` with ``!ok[i]`` records ``(site, value[i], i)``
    (``ok`` and ``value`` C-contiguous, ``value`` int64)."""
    name = "munet_check"
    body = [
        "    if (i == 0) out[0] = true;",
        "    if (!ok[i]) {",
        "      munet_fault(fault, site, value ? (unsigned long long)value[i] : 0ULL, (unsigned long long)i);",
        "      return;",
        "    }",
        "  }",
        "}",
    ]
    source = HEADER + FAULT_HELPER + "\n".join([*kernel_head(name, _PARAMS, "n"), *body]) + "\n"
    return CudaSource(name, source, _PARAMS)


CHECK = render_check()


@kernel("check")
def check(rt, ok, value, *, message, error):
    cp = rt.cupy
    out = rt.empty((), D.bool_)
    if ok.size == 0:  # nothing to check (the kernel sets the token while checking)
        out.fill(True)
        return out
    ok = cp.ascontiguousarray(ok)
    value_ptr = 0
    if value is not None:
        value = cp.ascontiguousarray(copies.cast(cp, value, D.int64))
        value_ptr = value.data.ptr
    asserts = rt.asserts
    site = asserts.site(message, ERRORS[error])
    arguments = [ok.data.ptr, value_ptr, ok.size, site, asserts.record(), out.data.ptr]
    launch.launch(rt, CHECK, ok.size, list(zip((t for t, _ in _PARAMS), arguments)))
    asserts.launched()
    return out
