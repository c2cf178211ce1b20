"""Memory formats (munet/_memory_format.py): clone/contiguous/to honour channels_last, and
is_contiguous(memory_format=) answers as PyTorch's does."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, check, randn

SHAPES = [
    (2, 3, 4, 5),
    (3, 1, 1, 1),
    (1, 3, 1, 4),
    (2, 3, 1, 1),
    (2, 1, 4, 5),
    (1, 3, 4, 5),
    (2, 3, 4, 1),
    (0, 3, 4, 5),
    (2, 0, 3, 3),
]
FORMATS = ["channels_last", "contiguous_format"]


def layouts(lib, shape):
    """Tensors of ``shape`` in several layouts: row-major, channels-last, transposed, sliced."""
    base = lib.arange(float(np.prod(shape))).reshape(shape)
    out = [base, base.contiguous(memory_format=lib.channels_last), base.transpose(2, 3), base[:, :, ::2]]
    out += [base.permute(0, 2, 3, 1), base[..., :1], base.transpose(1, 3), base[:, :1, :1]]
    if shape[0] > 0 and shape[1] > 1:
        out.append(base[:, 1:])
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_strides_and_is_contiguous_match_torch(shape):
    for m, t in zip(layouts(munet, shape), layouts(torch, shape)):
        assert m.stride() == t.stride()
        for fmt in ("channels_last", "contiguous_format", "preserve_format"):
            assert m.is_contiguous(memory_format=getattr(munet, fmt)) == t.is_contiguous(
                memory_format=getattr(torch, fmt)
            ), (shape, m.stride(), fmt)
        for fmt in FORMATS:
            mc, tc = m.clone(memory_format=getattr(munet, fmt)), t.clone(memory_format=getattr(torch, fmt))
            assert mc.stride() == tc.stride() and mc.tolist() == tc.tolist()
            assert mc.data_ptr() != m.data_ptr() or m.numel() == 0
            ms, ts = m.contiguous(memory_format=getattr(munet, fmt)), t.contiguous(memory_format=getattr(torch, fmt))
            assert ms.stride() == ts.stride() and (ms is m) == (ts is t)
            mt, tt = m.to(memory_format=getattr(munet, fmt)), t.to(memory_format=getattr(torch, fmt))
            assert mt.stride() == tt.stride() and (mt is m) == (tt is t) and mt.tolist() == tt.tolist()


def test_channels_last_3d():
    for lib in (munet, torch):
        x = lib.ones(2, 3, 4, 5, 6).contiguous(memory_format=lib.channels_last_3d)
        assert x.stride() == (360, 1, 90, 18, 3) and x.is_contiguous(memory_format=lib.channels_last_3d)
        assert not x.is_contiguous(memory_format=lib.channels_last) and not x.is_contiguous()


def test_clone_in_channels_last_is_differentiable():
    check(
        lambda x: x.clone(memory_format=munet.channels_last) * 2,
        lambda x: x.clone(memory_format=torch.channels_last) * 2,
        randn(2, 3, 4, 5),
    )
    check(
        lambda x: x.contiguous(memory_format=munet.channels_last).sum(1),
        lambda x: x.contiguous(memory_format=torch.channels_last).sum(1),
        randn(2, 3, 4, 5),
    )


def test_ops_on_channels_last_tensors_match_torch():
    x = randn(2, 3, 6, 6)
    w = randn(4, 3, 3, 3, seed=1)
    m = munet.tensor(x).contiguous(memory_format=munet.channels_last)
    t = torch.tensor(x).contiguous(memory_format=torch.channels_last)
    assert_close(munet.nn.functional.conv2d(m, munet.tensor(w)), torch.nn.functional.conv2d(t, torch.tensor(w)))
    assert_close(m.view(-1) if m.is_contiguous() else m.reshape(-1), t.reshape(-1))


def test_module_to_channels_last_converts_4d_tensors():
    for lib in (munet, torch):
        model = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4)).to(memory_format=lib.channels_last)
        assert model[0].weight.stride() == (27, 1, 9, 3) and model[0].bias.stride() == (1,)
        assert model[0].weight.is_contiguous(memory_format=lib.channels_last)
        assert type(model[0].weight) is lib.nn.Parameter


def test_memory_format_errors_as_torch():
    for lib in (munet, torch):
        x = lib.ones(3, 4)
        for call in (
            lambda: x.contiguous(memory_format=lib.channels_last),
            lambda: x.clone(memory_format=lib.channels_last),
        ):
            with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
                call()
        assert x.contiguous(memory_format=lib.preserve_format) is x
        with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
            x.t().contiguous(memory_format=lib.preserve_format)
        assert not x.is_contiguous(memory_format=lib.channels_last)
    with pytest.raises(TypeError, match="memory_format must be a munet.memory_format"):
        munet.ones(2).clone(memory_format="channels_last")


def test_factories_take_the_row_major_formats_and_the_strided_layout():
    for lib in (munet, torch):
        assert lib.empty(2, 3, memory_format=lib.contiguous_format).stride() == (3, 1)
        assert lib.zeros(2, 3, layout=lib.strided).stride() == (3, 1)
        assert lib.zeros_like(lib.ones(2, 3), memory_format=lib.preserve_format).stride() == (3, 1)
    with pytest.raises(NotImplementedError, match=r"empty: MuNet's factories make row-major tensors.*\.contiguous"):
        munet.empty(2, 3, 4, 5, memory_format=munet.channels_last)


def test_names_print_and_pickle_as_torch():
    import pickle

    for name in ("channels_last", "channels_last_3d", "contiguous_format", "preserve_format", "strided"):
        value = getattr(munet, name)
        assert repr(value) == repr(getattr(torch, name)).replace("torch.", "munet.")
        assert pickle.loads(pickle.dumps(value)) is value
    assert isinstance(munet.channels_last, munet.memory_format) and isinstance(munet.strided, munet.layout)
