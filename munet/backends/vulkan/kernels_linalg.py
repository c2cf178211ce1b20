"""Batched matmul, in two shapes of the same kernel: operands are read through their
strides, so transposed views (as in matmul's backward) need no copy; batch dims broadcast.

- GPUs: 64x64 output tiles per workgroup, 16-deep K slices staged in workgroup memory,
  and a 4x4 register block per thread.
- CPU drivers (lavapipe, SwiftShader): a 16x16 register block per invocation and no
  workgroup memory. There every buffer or workgroup-memory load costs one scalar load
  per SIMD lane while the FMAs are vector ops, so loads per FMA set the speed: 32 loads
  per 256 FMAs ran 7x faster than the tiled kernel (see docs/perf/vulkan.md).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from munet._device import DeviceError
from munet._tensor import contiguous_strides
from munet.backends.vulkan.copies import new_view
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import coalesce, storage_type
from munet.backends.vulkan.wgsl import bindings

TILE, DEPTH = 64, 16


# Register-blocked kernel for CPU drivers: a (BLOCK_Y * RB) x (BLOCK_X * RB) output tile per
# workgroup; invocation (x, y) owns rows y*RB .. y*RB+RB-1 and columns x, x+BLOCK_X, ...
BLOCK_X, BLOCK_Y, RB = 8, 4, 16


def _batch(brank: int) -> tuple[str, str, str]:
    """(WGSL that splits wid.z into batch coordinates, A's base offset, B's base offset).

    P: [M, N, K, a_off, a_sm, a_sk, b_off, b_sk, b_sn, bshape.., a_bstrides.., b_bstrides..]
    """
    batch = ["  var rem = wid.z;"]
    a_terms, b_terms = ["P[3]"], ["P[6]"]
    for d in reversed(range(brank)):
        batch.append(f"  let q{d} = rem % P[{9 + d}]; rem = rem / P[{9 + d}];")
        a_terms.append(f"q{d} * P[{9 + brank + d}]")
        b_terms.append(f"q{d} * P[{9 + 2 * brank + d}]")
    return "\n".join(batch), " + ".join(a_terms), " + ".join(b_terms)


@functools.cache  # built once per (dtype, batch rank): building the string cost a third of a small op
def _blocked_source(kind: str, brank: int) -> str:
    split, a_base, b_base = _batch(brank)
    rows, cols = range(RB), range(RB)
    acc = "\n".join(f"  var acc{i}_{j} = {kind}(0);" for i in rows for j in cols)
    # Clamped (always in-bounds) loads keep the loop free of branches; stores are guarded.
    loads = [f"    let a{i} = IN0[a_base + min(r0 + {i}u, M - 1u) * P[4] + k * P[5]];" for i in rows]
    loads += [f"    let b{j} = IN1[b_base + k * P[7] + min(c0 + {BLOCK_X * j}u, N - 1u) * P[8]];" for j in cols]
    fmas = [f"    acc{i}_{j} = acc{i}_{j} + a{i} * b{j};" for i in rows for j in cols]
    stores = [
        f"  if (r0 + {i}u < M && c0 + {BLOCK_X * j}u < N) {{ OUT[c_base + (r0 + {i}u) * N + c0 + {BLOCK_X * j}u] = acc{i}_{j}; }}"
        for i in rows
        for j in cols
    ]
    nl = "\n"
    return f"""{bindings(kind, [kind, kind])}
@compute @workgroup_size({BLOCK_X}, {BLOCK_Y})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{
  let M = P[0];
  let N = P[1];
  let K = P[2];
{split}
  let a_base = {a_base};
  let b_base = {b_base};
  let c_base = wid.z * M * N;
  let r0 = (wid.y * {BLOCK_Y}u + lid.y) * {RB}u;
  let c0 = wid.x * {BLOCK_X * RB}u + lid.x;
{acc}
  for (var k = 0u; k < K; k = k + 1u) {{
{nl.join(loads)}
{nl.join(fmas)}
  }}
{nl.join(stores)}
}}
"""


@functools.cache
def _tiled_source(kind: str, brank: int) -> str:
    zero = f"{kind}(0)"
    split, a_base, b_base = _batch(brank)
    return f"""{bindings(kind, [kind, kind])}
var<workgroup> As: array<{kind}, {TILE * DEPTH}>;
var<workgroup> Bs: array<{kind}, {TILE * DEPTH}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {{
  let M = P[0];
  let N = P[1];
  let K = P[2];
{split}
  let a_base = {a_base};
  let b_base = {b_base};
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
    if rt.cpu_driver:
        source = _blocked_source(kind, len(bshape))
        groups = (-(-n // (BLOCK_X * RB)), -(-m // (BLOCK_Y * RB)), count)
    else:
        source = _tiled_source(kind, len(bshape))
        groups = (-(-n // TILE), -(-m // TILE), count)
    rt.dispatch(source, [out.buffer, a.buffer, b.buffer], [True, False, False], params, groups)
    return out
