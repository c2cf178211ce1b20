"""A forward convolution and the fused bias/residual/ReLU pass after it as one cpu step.

ResNet-style plans (an imported model with BatchNorm folded into its convolutions) run each
convolution, then a fused elementwise group ``relu((conv + bias) + residual)`` over its output: one
more pass over every activation, and at two threads one more OpenMP region per layer. Where the
convolution's only reader is that group, and the channel-vector direct kernel serves the
convolution (``direct_conv.direct_conv2d``), :func:`conv_epilogue_step` runs both as one step: the
kernel applies the group's adds and ReLU as it stores each tile (the same float operations in the
same order, so the same bits as the two steps), writing the group's output; the convolution's own
output is never written. The convolution's step becomes a no-op. Where the kernel declines at run
time (the planned output overlapping the input), the step runs the two original steps.

The group must be exactly: an optional view of a (O,) bias to a per-channel broadcast, ``add(conv,
bias)``, optionally ``add(_, residual)`` with the output's shape, optionally ``relu``; one output.
In a training plan the convolution's output then has no other reader (the backward reads the
group's output or its input), so nothing the backward needs is lost.
"""

from __future__ import annotations

from munet.backends.cpu import direct_conv
from munet.compiler.arena import weight_pack
from munet.compiler.ir import Value
from munet.ops.conv import conv_output_spatial


def _match(node):
    """``(conv node, bias value or None, bias is a view source, residual or None, relu)`` of fused
    ``node``'s group when it is a convolution's epilogue (module docstring), else None."""
    group = node.attrs["group"]
    members = list(group.members)
    if len(group.outputs) != 1 or not members:
        return None
    viewed = {}  # a view member's output -> its (O,) source
    if members[0].name == "view":
        view = members.pop(0)
        viewed[view.outputs[0]] = view.args[0]
    if not members or members[0].name != "add":
        return None
    first = members.pop(0)
    a, b = first.args[:2]
    conv = a.producer if isinstance(a, Value) else None
    if conv is None or conv.name != "convolution":
        a, b = b, a
        conv = a.producer if isinstance(a, Value) else None
    if conv is None or conv.name != "convolution" or not isinstance(b, Value):
        return None
    y = conv.outputs[0]
    if len(y.shape) != 4 or y.dtype is None or y.dtype.np.name != "float32":
        return None
    channels = y.shape[1]
    bias = viewed.get(b, b)
    if tuple(bias.shape) not in ((channels,), (channels, 1, 1), (1, channels, 1, 1)) or bias.dtype is not y.dtype:
        return None
    if b in viewed and tuple(b.shape) not in ((channels, 1, 1), (1, channels, 1, 1)):
        return None
    current, residual, relu = first.outputs[0], None, False
    if members and members[0].name == "add":
        second = members.pop(0)
        other = [v for v in second.args[:2] if v is not current]
        if len(other) != 1 or current not in second.args[:2] or not isinstance(other[0], Value):
            return None
        residual = other[0]
        if tuple(residual.shape) != tuple(y.shape) or residual.dtype is not y.dtype or residual is y:
            return None
        current = second.outputs[0]
    if members and members[0].name == "relu" and members[0].args[0] is current:
        relu, current = True, members.pop(0).outputs[0]
    if members or current is not group.outputs[0] or group.inputs.count(y) != 1:
        return None
    return conv, bias, residual, relu


def conv_epilogue_step(node, executable, fused_step):
    """The step running fused ``node`` together with the convolution it finishes (module docstring),
    replacing that convolution's step (the executable's last) by a no-op; None where it does not apply."""
    arena = executable.arena
    lib = direct_conv.library()
    if arena is None or lib is None or not lib.munet_conv_channel_vectors() or not executable.step_nodes:
        return None
    matched = _match(node)
    if matched is None:
        return None
    conv, bias, residual, relu = matched
    attrs = conv.attrs
    x, w = conv.args[0], conv.args[1]
    y, out = conv.outputs[0], node.outputs[0]
    if executable.step_nodes[-1] is not conv or attrs.get("transposed") or len(x.shape) != 4:
        return None
    if executable.graph.users().get(y, 0) != 1 or any(v.dtype is not y.dtype for v in (x, w)):
        return None
    stride, padding, dilation, groups = attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"]
    size = conv_output_spatial(tuple(x.shape[2:]), tuple(w.shape[2:]), stride, padding, dilation, False, ())
    if not direct_conv.serves_forward(tuple(x.shape), tuple(w.shape), stride, groups, size):
        return None
    target = arena.target(out)
    if target is None:
        return None
    slot = executable.slot
    x_slot, w_slot, out_slot = slot[x], slot[w], slot[out]
    bias_slot = slot[bias]
    residual_slot = None if residual is None else slot[residual]
    conv_step = executable.steps[-1]
    pack = weight_pack(conv)
    channels = y.shape[1]

    def conv_epilogue(env):
        buf = target(env)
        epilogue = (
            env[bias_slot].reshape(channels),
            None if residual_slot is None else env[residual_slot],
            relu,
        )
        result = direct_conv.direct_conv2d(
            env[x_slot], env[w_slot], stride, padding, dilation, groups, size, buf, pack, epilogue
        )
        if result is None:  # declined at run time: the two steps as planned
            conv_step(env)
            fused_step(env)
            return
        env[out_slot] = buf

    executable.steps[-1] = _folded_into_epilogue
    executable.target.counters["conv_epilogues"] += 1
    return conv_epilogue


def _folded_into_epilogue(env) -> None:
    """The step of a convolution whose output the next step's epilogue writes (``conv_epilogue_step``)."""
