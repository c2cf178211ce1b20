"""Vulkan kernel of the ``check`` primitive (``munet/ops/checks.py``): a failing element records a
fault in the runtime's fault record (``device_asserts.py``), raised at the next synchronization."""

from __future__ import annotations

from munet import _dtype as D
from munet.backends.vulkan.copies import contiguous, new_view
from munet.backends.vulkan.device_asserts import FAULT_DECLARATION, INDEX_FAULT
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.wgsl import WORKGROUP, bindings
from munet.ops.checks import ERRORS


def _source(with_value: bool) -> str:
    # P: [numel, ok offset, value offset, fault site]; OUT is the 0-dim token. The fault record's
    # third word (an index fault's size) carries the failing position: ``{index}`` reads it.
    value = "IN1[P[2] + idx]" if with_value else "0"
    fault_binding = 4 if with_value else 3
    return f"""{bindings("u32", ["u32", "i32"] if with_value else ["u32"])}
@group(0) @binding({fault_binding}) {FAULT_DECLARATION}
{INDEX_FAULT}
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let idx = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (idx == 0u) {{ OUT[0] = 1u; }}
  if (idx >= P[0]) {{ return; }}
  if (IN0[P[1] + idx] == 0u) {{ index_fault(P[3], {value}, idx); }}
}}
"""


@kernel("check")
def check(rt, ok, value, *, message, error):
    out = new_view(rt, (), D.bool_)
    ok = contiguous(rt, ok)
    buffers, writable = [out.buffer, ok.buffer], [True, False]
    params = [ok.size, ok.offset, 0]
    if value is not None:
        value = contiguous(rt, value)
        buffers.append(value.buffer)
        writable.append(False)
        params[2] = value.offset
    params.append(rt.asserts.site(message.replace("{index}", "{size}"), ERRORS[error]))
    rt.asserts.dispatch(
        _source(value is not None), buffers, writable, params, rt.grid(-(-max(ok.size, 1) // WORKGROUP))
    )
    return out
