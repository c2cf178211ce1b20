"""munet.rtc.signature: the signature parser and the argument checks every module kind shares."""

import pytest

import munet
from munet.rtc.signature import TYPES, check_arguments, check_devices, parse_signature


def test_each_argument_form_parses():
    params = parse_signature("const float *x, float* y, float alpha, int64_t, const __half *h, bool flag")
    assert [(p.name, p.type, p.pointer, p.const, p.written) for p in params] == [
        ("x", "float", True, True, False),
        ("y", "float", True, False, True),
        ("alpha", "float", False, False, False),
        ("argument 3", "int64_t", False, False, False),
        ("h", "__half", True, True, False),
        ("flag", "bool", False, False, False),
    ]
    assert parse_signature("") == () and parse_signature(" void ") == ()


def test_type_table_maps_each_c_type_to_its_dtype():
    expected = {
        "float": munet.float32,
        "double": munet.float64,
        "__half": munet.float16,
        "__nv_bfloat16": munet.bfloat16,
        "int8_t": munet.int8,
        "char": munet.int8,
        "uint8_t": munet.uint8,
        "int": munet.int32,
        "int32_t": munet.int32,
        "int64_t": munet.int64,
        "bool": munet.bool,
    }
    assert TYPES == expected
    for name, dtype in expected.items():
        (p,) = parse_signature(f"{name} *t")
        assert p.dtype is dtype


def test_unknown_type_lists_the_supported_ones():
    with pytest.raises(TypeError, match=r"unsupported type 'unsigned'.*float, double, __half, __nv_bfloat16"):
        parse_signature("const float *x, unsigned *y", "CudaKernel(k)")


@pytest.mark.parametrize("bad", ["float **x", "const float x", "x y z", "float *x y", "float *x,"])
def test_malformed_argument_shows_the_expected_form(bad):
    with pytest.raises(ValueError, match=r"expected '\(const\) type \(\*\) \(name\)'"):
        parse_signature(bad, "CudaKernel(k)")


def test_argument_checks_name_the_kernel_and_argument():
    params = parse_signature("const float *x, float *y, int n")
    x, y = munet.ones(3), munet.ones(3)
    with pytest.raises(TypeError, match=r"^CudaKernel\(axpy\) expects 3 arguments but got 2$"):
        check_arguments("CudaKernel(axpy)", params, [x, y])
    with pytest.raises(
        TypeError, match=r"argument 1 \('y'\) is 'float \*', expected a tensor of dtype float32, got float64"
    ):
        check_arguments("K", params, [x, y.double(), 3])
    with pytest.raises(TypeError, match=r"argument 0 \('x'\) is 'float \*', expected a tensor, got float"):
        check_arguments("K", params, [1.0, y, 3])
    with pytest.raises(
        TypeError, match=r"argument 2 \('n'\) is the scalar 'int', expected a Python number, got Tensor"
    ):
        check_arguments("K", params, [x, y, munet.tensor(3)])
    with pytest.raises(TypeError, match=r"integer scalar 'int', got the float 2.5"):
        check_arguments("K", params, [x, y, 2.5])
    with pytest.raises(OverflowError, match=r"argument 2 \('n'\): 4294967296 does not fit in 'int' \[-2147483648"):
        check_arguments("K", params, [x, y, 1 << 32])
    assert check_arguments("K", params, (x, y, 3)) == [x, y, 3]
    (flag,) = parse_signature("bool flag")
    assert check_arguments("K", (flag,), [True]) == [True]


def test_device_checks_refuse_strided_views_and_written_tensors_that_require_grad():
    params = parse_signature("const float *x, float *y")
    x = munet.ones(4, 4)
    with pytest.raises(ValueError, match=r"argument 0 \('x'\): expected a contiguous tensor.*strides \[1, 4\]"):
        check_devices("K", params, [x.t(), munet.ones(4)], "cpu")
    with pytest.raises(munet.DeviceError, match=r"argument 0 \('x'\): expected a tensor on vulkan, got one on cpu"):
        check_devices("K", params, [x, x], "vulkan")
    w = munet.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="writes a tensor that requires grad"):
        check_devices("K", params, [x, w], "cpu")
    with munet.no_grad():
        check_devices("K", params, [x, w], "cpu")
    check_devices("K", params, [munet.ones(4, requires_grad=True), x], "cpu")  # read only: fine
