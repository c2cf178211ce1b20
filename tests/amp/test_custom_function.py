"""amp.custom_fwd / custom_bwd on a custom Function under cpu autocast, as torch.amp's, and is_autocast_available."""

import pytest
import torch

import munet


def _function(lib, cast_inputs):
    seen = {}

    class MatMul(lib.autograd.Function):
        @staticmethod
        @lib.amp.custom_fwd(device_type="cpu", cast_inputs=cast_inputs)
        def forward(ctx, a, b):
            seen["forward"] = (a.dtype, lib.is_autocast_enabled("cpu"))
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        @lib.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            seen["backward"] = lib.is_autocast_enabled("cpu")
            return grad @ b.t(), a.t() @ grad

    return MatMul, seen


@pytest.mark.parametrize("cast_inputs", [None, "float32"])
def test_custom_fwd_bwd_match_torch(cast_inputs):
    results = {}
    for lib in (munet, torch):
        fn, seen = _function(lib, None if cast_inputs is None else getattr(lib, cast_inputs))
        a = lib.ones(2, 3, requires_grad=True)
        b = lib.ones(3, 2, requires_grad=True)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out = fn.apply(a, b)
        out.float().sum().backward()
        results[lib.__name__] = (str(seen["forward"][0]).split(".")[-1], seen["forward"][1], seen["backward"],
                                 str(out.dtype).split(".")[-1])  # fmt: skip
    assert results["munet"] == results["torch"]


def test_custom_fwd_outside_autocast_is_a_no_op():
    fn, seen = _function(munet, munet.float32)
    fn.apply(munet.ones(2, 2, dtype=munet.bfloat16), munet.ones(2, 2, dtype=munet.bfloat16))
    assert seen["forward"] == (munet.bfloat16, False)


def test_custom_fwd_needs_a_device_type_string():
    with pytest.raises(ValueError, match="device_type"):
        munet.amp.custom_fwd(device_type=None)
    with pytest.raises(TypeError):
        munet.amp.custom_fwd(lambda ctx: None)


def test_is_autocast_available():
    assert munet.amp.is_autocast_available("cpu") and munet.amp.is_autocast_available("cuda")
    assert not munet.amp.is_autocast_available("meta")
