"""munet.testing.assert_close vs torch.testing.assert_close: the same verdicts and messages."""

import pytest
import torch

import munet

NAN, INF = float("nan"), float("inf")

CASES = [
    (([1.0, 2.0, 3.0], [1.0, 2.5, 3.0]), {}),
    (([1.0, 2.0, 3.0], [1.0, 2.0 + 1e-6, 3.0]), {}),
    (([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 5.0]]), {}),
    (([1.0, 2.0], [1.05, 2.0]), {"rtol": 0.1, "atol": 0.0}),
    (([1.0, 2.0], [1.05, 2.0]), {"rtol": 0.01, "atol": 0.0}),
    (([NAN, 1.0], [NAN, 1.0]), {}),
    (([NAN, 1.0], [NAN, 1.0]), {"equal_nan": True}),
    (([INF, -INF], [INF, -INF]), {}),
    (([INF], [-INF]), {}),
    (([0.0], [1e-6]), {}),
    (([1, 2, 3], [1, 4, 3]), {}),
    (([True], [False]), {}),
]


def _message(fn):
    try:
        fn()
    except (AssertionError, TypeError, ValueError) as e:
        return type(e), str(e).replace("munet._tensor.", "munet.").replace("torch.", "munet.")
    return None


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize(("values", "kwargs"), CASES)
def test_tensors_match_torch(values, kwargs, dtype):
    a, e = values
    kind = "int64" if isinstance(a[0], int) and not isinstance(a[0], bool) else dtype
    kind = "bool" if isinstance(a[0], bool) else kind
    mt = [munet.tensor(v, dtype=getattr(munet, kind)) for v in (a, e)]
    tt = [torch.tensor(v, dtype=getattr(torch, kind)) for v in (a, e)]
    assert _message(lambda: munet.testing.assert_close(*mt, **kwargs)) == _message(
        lambda: torch.testing.assert_close(*tt, **kwargs)
    )


@pytest.mark.parametrize(
    ("actual", "expected", "kwargs"),
    [
        ("[1.0]", "[1.0]_f64", {}),
        ("[1.0]", "[1.0]_f64", {"check_dtype": False}),
        ("[1.0]", "[1.0, 2.0]", {}),
        ("nested", "nested_bad", {}),
        ("[1.0]", "list", {}),
        ("[1.0]", "[1.0]", {"rtol": 1e-3}),
        ("[1.0]", "[2.0]", {"msg": "custom"}),
        ("[1.0]", "[2.0]", {"msg": lambda m: "wrapped: " + m}),
    ],
)
def test_checks_containers_and_msg_match_torch(actual, expected, kwargs):
    def build(lib, name):
        t = lib.tensor
        return {
            "[1.0]": t([1.0]),
            "[2.0]": t([2.0]),
            "[1.0]_f64": t([1.0], dtype=lib.float64),
            "[1.0, 2.0]": t([1.0, 2.0]),
            "nested": [t([1.0]), {"a": t([2.0])}],
            "nested_bad": [t([1.0]), {"a": t([3.0])}],
            "list": [1.0],
        }[name]

    got = _message(lambda: munet.testing.assert_close(build(munet, actual), build(munet, expected), **kwargs))
    want = _message(lambda: torch.testing.assert_close(build(torch, actual), build(torch, expected), **kwargs))
    assert got == want


@pytest.mark.parametrize(("a", "e"), [(1.0, 1.5), (1.0, 1.0 + 1e-9), (2, 3), (2, 2), ([1.0, 2], [1.0, 2]), ((1,), [1])])
def test_numbers_match_torch(a, e):
    assert _message(lambda: munet.testing.assert_close(a, e)) == _message(lambda: torch.testing.assert_close(a, e))


def test_device_check(vulkan):
    a, b = munet.ones(2), munet.ones(2, device=vulkan)
    with pytest.raises(AssertionError, match="attribute 'device' do not match"):
        munet.testing.assert_close(a, b)
    munet.testing.assert_close(a, b, check_device=False)
