"""Batched matmul: 64x64 output tiles per workgroup, 16-deep K slices staged in workgroup
memory, and a 4x4 register block per thread. Operands are read through their strides, so
transposed views (as in matmul's backward) need no copy; batch dims broadcast.
"""

from __future__ import annotations

import math

import numpy as np

from munet._device import DeviceError
from munet.backends.vulkan.copies import new_view
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import coalesce, contiguous_strides, storage_type
from munet.backends.vulkan.wgsl import bindings

TILE, DEPTH = 64, 16


def _source(kind: str, brank: int) -> str:
    # P: [M, N, K, a_off, a_sm, a_sk, b_off, b_sk, b_sn, bshape.., a_bstrides.., b_bstrides..]
    zero = f"{kind}(0)"
    batch = ["  var rem = wid.z;"]
    a_terms, b_terms = ["P[3]"], ["P[6]"]
    for d in reversed(range(brank)):
        batch.append(f"  let q{d} = rem % P[{9 + d}]; rem = rem / P[{9 + d}];")
        a_terms.append(f"q{d} * P[{9 + brank + d}]")
        b_terms.append(f"q{d} * P[{9 + 2 * brank + d}]")
    return f"""{bindings(kind, [kind, kind])}
var<workgroup> As: array<{kind}, {TILE * DEPTH}>;
var<workgroup> Bs: array<{kind}, {TILE * DEPTH}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {{
  let M = P[0];
  let N = P[1];
  let K = P[2];
{chr(10).join(batch)}
  let a_base = {" + ".join(a_terms)};
  let b_base = {" + ".join(b_terms)};
  let c_base = wid.z * M * N;
  let row0 = wid.y * {TILE}u;
  let col0 = wid.x * {TILE}u;
  var acc: array<{kind}, 16>;
  for (var k0 = 0u; k0 < K; k0 = k0 + {DEPTH}u) {{
    for (var l = 0u; l < 4u; l = l + 1u) {{
      let e = t + l * 256u;
      let m = e % {TILE}u;
      let kk = e / {TILE}u;
      let gk = k0 + kk;
      var av = {zero};
      if (row0 + m < M && gk < K) {{ av = IN0[a_base + (row0 + m) * P[4] + gk * P[5]]; }}
      As[e] = av;
      var bv = {zero};
      if (gk < K && col0 + m < N) {{ bv = IN1[b_base + gk * P[7] + (col0 + m) * P[8]]; }}
      Bs[e] = bv;
    }}
    workgroupBarrier();
    for (var kk = 0u; kk < {DEPTH}u; kk = kk + 1u) {{
      var ar: array<{kind}, 4>;
      var br: array<{kind}, 4>;
      for (var i = 0u; i < 4u; i = i + 1u) {{
        ar[i] = As[kk * {TILE}u + lid.y + 16u * i];
        br[i] = Bs[kk * {TILE}u + lid.x + 16u * i];
      }}
      for (var i = 0u; i < 4u; i = i + 1u) {{
        for (var j = 0u; j < 4u; j = j + 1u) {{
          acc[i * 4u + j] = acc[i * 4u + j] + ar[i] * br[j];
        }}
      }}
    }}
    workgroupBarrier();
  }}
  for (var i = 0u; i < 4u; i = i + 1u) {{
    for (var j = 0u; j < 4u; j = j + 1u) {{
      let r = row0 + lid.y + 16u * i;
      let c = col0 + lid.x + 16u * j;
      if (r < M && c < N) {{ OUT[c_base + r * N + c] = acc[i * 4u + j]; }}
    }}
  }}
}}
"""


@kernel("matmul")
def matmul(rt, a, b):
    kind = storage_type(a.dtype, "matmul")
    if kind == "u32":
        raise DeviceError("matmul: bool tensors are not supported")
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    out = new_view(rt, (*batch, m, n), a.dtype)
    count = math.prod(batch)
    if out.size == 0:
        return out
    if k == 0:
        from munet.backends.vulkan.copies import copy_into

        return copy_into(rt, out, 0)
    a_b = a.expand_to((*batch, m, k))[: len(batch)]
    b_b = b.expand_to((*batch, k, n))[: len(batch)]
    bshape, (a_bs, b_bs, _) = coalesce(batch, a_b, b_b, contiguous_strides(batch))
    if count > rt.max_groups:
        raise DeviceError(f"matmul: {count} batch entries exceed this device's {rt.max_groups} workgroups per dim")
    params = [m, n, k, a.offset, a.strides[-2], a.strides[-1], b.offset, b.strides[-2], b.strides[-1]]
    params += [*bshape, *a_bs, *b_bs]
    groups = (-(-n // TILE), -(-m // TILE), count)
    rt.dispatch(_source(kind, len(bshape)), [out.buffer, a.buffer, b.buffer], [True, False, False], params, groups)
    return out
