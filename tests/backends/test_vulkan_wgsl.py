"""``hoist_params``: parameter reads in ``main`` move to its top; nothing else changes."""

from munet.backends.vulkan.wgsl import hoist_params

SOURCE = """fn helper(i: u32) -> u32 { return P[3] + i; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= P[0]) { return; }
  if (gid.x > 1u) { OUT[gid.x] = f32(P[2] + P[12u] + helper(P[0])); }
}
"""


def test_hoist_params_reads_each_parameter_once_at_the_top_of_main():
    out = hoist_params(SOURCE)
    head, main = out.split("fn main(")
    assert head == SOURCE.split("fn main(")[0]  # helper functions keep their reads
    body = main[main.index("{") + 1 :]
    lets = ["  let P_0 = P[0];", "  let P_2 = P[2];", "  let P_12 = P[12];"]
    assert body.splitlines()[1:4] == lets
    assert "if (gid.x >= P_0)" in body and "f32(P_2 + P_12 + helper(P_0))" in body
    assert body.count("P[") == 3


def test_hoist_params_leaves_sources_without_parameter_reads_alone():
    plain = "fn main() { let x = 1u; }"
    assert hoist_params(plain) == plain
    assert hoist_params("fn other() {}") == "fn other() {}"
