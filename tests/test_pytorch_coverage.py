"""docs/pytorch_coverage.md is generated from PyTorch's and MuNet's public names and must not go stale."""

import warnings
from pathlib import Path

import pytest

from munet import _pytorch_coverage

DOC = Path(__file__).resolve().parents[1] / "docs" / "pytorch_coverage.md"


def _torch_2_13():
    torch = pytest.importorskip("torch")
    if not torch.__version__.startswith("2.13"):
        pytest.skip(f"the committed listing is of torch 2.13, installed is {torch.__version__}")
    return torch


def test_pytorch_coverage_doc_is_current():
    _torch_2_13()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading deprecated torch names warns
        expected = _pytorch_coverage.render_pytorch_coverage()
    actual = DOC.read_text() if DOC.exists() else ""
    assert actual == expected, (
        "docs/pytorch_coverage.md is stale: run `python -m munet._pytorch_coverage > docs/pytorch_coverage.md`"
    )


def test_counting_rules_leave_out_private_modules_and_denied_names():
    torch = _torch_2_13()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        names = _pytorch_coverage.public_names(torch, "torch")
        functional = _pytorch_coverage.public_names(torch, "nn.functional")
    assert "add" in names and "tensor" in names
    assert not [n for n in names if n.startswith("_")]
    assert "nn" not in names and "linalg" not in names  # modules
    assert "SymInt" not in names and "set_default_tensor_type" not in names  # denied
    assert "Optional" not in functional and "conv2d" in functional  # imports from typing are not API


def test_a_name_that_raises_does_not_count(monkeypatch):
    import munet

    def stub(*args, **kwargs):
        raise NotImplementedError("stub")

    monkeypatch.setattr(munet, "bincount", stub, raising=False)
    assert not _pytorch_coverage.munet_has("torch", "bincount")
    assert _pytorch_coverage.munet_has("torch", "add")
    assert not _pytorch_coverage.munet_has("torch", "no_such_name_anywhere")


def test_every_probe_names_a_counted_namespace():
    assert {key.split(":")[0] for key in _pytorch_coverage.PROBES} <= set(_pytorch_coverage.NAMESPACES)


def test_a_function_that_only_raises_does_not_count(monkeypatch):
    import munet

    def refuse(input, other):
        """Documented, but it only refuses."""
        raise RuntimeError("add: refused")

    monkeypatch.setattr(munet, "add", refuse)
    assert _pytorch_coverage.only_raises(refuse) and not _pytorch_coverage.munet_has("torch", "add")
    assert not _pytorch_coverage.only_raises(munet.sub) and _pytorch_coverage.munet_has("torch", "sub")
    assert not _pytorch_coverage.only_raises(munet.Tensor) and not _pytorch_coverage.only_raises(len)


def test_every_counted_name_that_only_raises_is_listed_as_refused():
    """A refusal needs its reason in REFUSED, and each entry there must still only refuse."""
    torch = _torch_2_13()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refusing = _pytorch_coverage.refusing_names(torch)
    assert refusing == set(_pytorch_coverage.REFUSED)
    for key in _pytorch_coverage.REFUSED:
        assert not _pytorch_coverage.munet_has(*key.split(":"))
