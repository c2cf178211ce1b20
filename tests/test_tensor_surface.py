"""The Tensor surface of ``munet/_tensor_surface.py`` and ``Tensor.resize_``/``set_``, against
PyTorch: predicates, ``layout``, ``dim_order``, ``output_nr``, the legacy ``new``, ``apply_``/``map_``/
``map2_``, ``sum_to_size`` (with its gradient), the splits, ``resize_`` (shrinking, growing, versions),
``set_``, ``as_subclass``, ``module_load``."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import randn

FALSE_PROPERTIES = ["is_ipu", "is_maia", "is_meta", "is_mkldnn", "is_mps", "is_mtia", "is_nested", "is_quantized",
                    "is_sparse", "is_sparse_csr", "is_xla", "is_xpu", "is_vulkan"]  # fmt: skip


@pytest.mark.parametrize("name", FALSE_PROPERTIES)
def test_predicates_on_cpu_match_torch(name):
    assert getattr(munet.ones(2), name) is getattr(torch.ones(2), name) is False


def test_is_vulkan_is_true_on_vulkan(vulkan):
    assert munet.ones(2, device=vulkan).is_vulkan is True
    assert munet.ones(2, device=vulkan).get_device() == (vulkan.index or 0)


def test_simple_properties_match_torch():
    m, t = munet.ones(2, 3), torch.ones(2, 3)
    assert m.layout is munet.strided and str(t.layout) == "torch.strided"
    assert m.ndimension() == t.ndimension() == 2
    assert m.name is t.name is None
    assert m.get_device() == t.get_device() == -1
    assert m.const_data_ptr() == m.data_ptr()
    assert m.is_shared() is t.is_shared() is False
    assert m.is_distributed() is t.is_distributed() is False
    assert m.is_nonzero is not None and munet.ones(1).is_nonzero()
    assert m.is_same_size(munet.zeros(2, 3))


def test_output_nr_matches_torch():
    x = randn(3, 3) + 3 * np.eye(3, dtype=np.float32)
    outputs = []
    for lib in (munet, torch):
        leaf = lib.tensor(x, requires_grad=True)
        q, r = lib.linalg.qr(leaf * 2)
        outputs.append([q.output_nr, r.output_nr, (leaf * 2).output_nr, leaf.output_nr])
    assert outputs[0] == outputs[1] == [0, 1, 0, 0]


LAYOUTS = {
    "contiguous": lambda lib: lib.ones(2, 3, 4),
    "transposed": lambda lib: lib.ones(2, 3, 4).transpose(0, 2),
    "permuted": lambda lib: lib.ones(2, 3, 4, 5).permute(0, 2, 3, 1),
    "channels_last": lambda lib: lib.ones(2, 3, 4, 5).contiguous(memory_format=lib.channels_last),
    "sliced": lambda lib: lib.ones(4, 6)[::2, 1:],
    "expanded": lambda lib: lib.ones(3, 1).expand(3, 4),
    "size_one": lambda lib: lib.ones(3, 1, 2).transpose(0, 2),
    "vector": lambda lib: lib.ones(5),
    "scalar": lambda lib: lib.ones(()),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_dim_order_matches_torch(layout):
    m, t = LAYOUTS[layout](munet), LAYOUTS[layout](torch)
    assert m.stride() == t.stride()
    assert m.dim_order() == t.dim_order()
    try:
        expected = t.dim_order(ambiguity_check=True)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="unique dim order"):
            m.dim_order(ambiguity_check=True)
    else:
        assert m.dim_order(ambiguity_check=True) == expected


def test_dim_order_with_memory_formats():
    m = munet.ones(2, 1, 4, 4).contiguous(memory_format=munet.channels_last)
    t = torch.ones(2, 1, 4, 4).contiguous(memory_format=torch.channels_last)
    for formats in ([munet.contiguous_format], [munet.channels_last]):
        torch_formats = [getattr(torch, f.name) for f in formats]
        try:
            expected = t.dim_order(ambiguity_check=torch_formats)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                m.dim_order(ambiguity_check=formats)
        else:
            assert m.dim_order(ambiguity_check=formats) == expected


def test_new_is_the_legacy_constructor():
    x = munet.ones(2, dtype=munet.int64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype is munet.int64
    assert x.new([1, 2]).tolist() == [1, 2] and x.new().shape == (0,)
    assert x.new(munet.Size([4])).shape == (4,)
    with pytest.raises(TypeError, match="expected a tensor of"):
        x.new(munet.ones(2))


def test_new_empty_strided_matches_torch():
    m = munet.ones(1, dtype=munet.float64).new_empty_strided((2, 3), (1, 2))
    t = torch.ones(1, dtype=torch.float64).new_empty_strided((2, 3), (1, 2))
    assert m.shape == t.shape and m.stride() == t.stride() and m.dtype is munet.float64


def test_apply_and_map_match_torch():
    x, y, z = randn(2, 3), randn(3, seed=1), randn(2, 1, seed=2)
    results = []
    for lib in (munet, torch):
        a = lib.tensor(x).t()  # a non-contiguous destination
        a.apply_(lambda v: v * 2 + 1)
        b = lib.tensor(x)
        b.map_(lib.tensor(y), lambda p, q: p * q)
        c = lib.tensor(x)
        c.map2_(lib.tensor(y), lib.tensor(z), lambda p, q, r: p + q - r)
        results.append([a.numpy(), b.numpy(), c.numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    ints = munet.arange(4)
    assert ints.apply_(lambda v: v // 2).tolist() == torch.arange(4).apply_(lambda v: v // 2).tolist()


def test_apply_refuses_grad_and_devices():
    with pytest.raises(RuntimeError, match="Can't call apply_\\(\\) on Variable that requires grad"):
        munet.ones(2, requires_grad=True).apply_(lambda v: v)
    version = (x := munet.ones(2))._version
    x.apply_(lambda v: v + 1)
    assert x._version > version and x.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("size", [(1, 3), (3,), (2, 1), (1, 1), (2, 3)])
def test_sum_to_size_matches_torch_with_gradient(size):
    x = randn(2, 3)
    outs, grads = [], []
    for lib in (munet, torch):
        leaf = lib.tensor(x, requires_grad=True)
        out = leaf.sum_to_size(*size)
        (out * 2).sum().backward()
        outs.append(out.detach().numpy())
        grads.append(leaf.grad.numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)
    np.testing.assert_allclose(grads[0], grads[1])
    with pytest.raises(RuntimeError, match="is not expandable"):
        munet.ones(2, 3).sum_to_size(4)


def test_splits_match_torch():
    x = randn(5, 4)
    m, t = munet.tensor(x), torch.tensor(x)
    for ours, theirs in [
        (m.split_with_sizes([2, 3]), t.split_with_sizes([2, 3])),
        (munet.split_with_sizes(m, [1, 3], 1), torch.split_with_sizes(t, [1, 3], 1)),
        (m.unsafe_split(2), t.unsafe_split(2)),
        (munet.unsafe_split_with_sizes(m, [4, 1]), torch.unsafe_split_with_sizes(t, [4, 1])),
        (munet.unsafe_chunk(m, 3, 1), torch.unsafe_chunk(t, 3, 1)),
    ]:
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 5"):
        m.split_with_sizes([2, 2])


def test_resize_shrinks_in_place_and_bumps_version():
    m, t = munet.arange(6.0), torch.arange(6.0)
    mv, tv = m._version, t._version
    assert m.resize_(2, 2) is m
    t.resize_(2, 2)
    np.testing.assert_array_equal(m.numpy(), t.numpy())
    assert m._version - mv == t._version - tv == 1
    m.resize_(3)
    assert m.tolist() == [0.0, 1.0, 2.0]


def test_resize_grows_keeping_the_elements():
    m, t = munet.arange(4.0)[1:], torch.arange(4.0)[1:]  # offset 1
    m.resize_(2, 3)
    t.resize_(2, 3)
    assert m.shape == t.shape and m.stride() == t.stride() and m.storage_offset() == t.storage_offset() == 1
    np.testing.assert_array_equal(m.numpy().reshape(-1)[:3], t.numpy().reshape(-1)[:3])
    m.fill_(5.0)
    assert m.tolist() == [[5.0] * 3] * 2


def test_resize_grows_under_existing_views():
    results = []
    for lib in (munet, torch):
        base = lib.arange(4.0)
        view = base[:2]
        alias = base.detach()
        base.resize_(8)
        base.fill_(3.0)
        results.append((view.tolist(), alias.tolist(), base.data_ptr() == view.data_ptr() == alias.data_ptr()))
    assert results[0] == results[1] == ([3.0, 3.0], [3.0] * 4, True)


def test_resize_refusals_and_variants():
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        munet.ones(2, requires_grad=True).resize_(3)
    m = munet.ones(2, 3)
    assert m.resize_as_(munet.ones(1, 6)).shape == (1, 6)
    assert munet.resize_as_(m, munet.ones(3, 2)).shape == (3, 2)
    cl = munet.ones(2, 3, 4, 5).resize_(2, 3, 4, 5, memory_format=munet.channels_last)
    assert cl.stride() == torch.ones(2, 3, 4, 5).resize_(2, 3, 4, 5, memory_format=torch.channels_last).stride()
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        r = munet.arange(6).resize(2, 3)
    assert r.tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.warns(UserWarning, match="deprecated"):
        assert munet.arange(6).resize_as(munet.ones(3, 2)).shape == (3, 2)


def test_set_shares_memory_as_torch():
    m, b = munet.ones(2, 3), munet.zeros(5)
    assert m.set_(b) is m and m.is_set_to(b) and m.shape == (5,)
    b[0] = 3.0
    assert m[0].item() == 3.0
    c = munet.ones(2)
    c.set_(b.untyped_storage(), 1, (2, 2), (1, 1))
    t = torch.ones(2)
    t.set_(torch.tensor([3.0, 0, 0, 0, 0]).untyped_storage(), 1, (2, 2), (1, 1))
    assert c.shape == t.shape and c.stride() == t.stride() and c.storage_offset() == 1
    assert not c.is_set_to(b)
    empty = munet.ones(3).set_()
    assert empty.shape == (0,) and empty.numel() == 0
    with pytest.raises(RuntimeError, match="out of bounds"):
        munet.ones(1).set_(b.untyped_storage(), 4, (2,), (1,))
    with pytest.raises(RuntimeError, match="expected a tensor of dtype"):
        munet.ones(1).set_(munet.ones(1, dtype=munet.int64))
    leaf = munet.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf.set_(b)
    with munet.no_grad():
        leaf.set_(b)  # as PyTorch's optimizers and loaders do
    assert leaf.shape == (5,) and leaf.requires_grad


def test_as_subclass_keeps_memory_and_graph():
    class Tagged(munet.Tensor):
        pass

    leaf = munet.ones(3, requires_grad=True)
    y = leaf * 2
    tagged = y.as_subclass(Tagged)
    assert type(tagged) is Tagged and tagged.data_ptr() == y.data_ptr() and tagged.grad_fn is y.grad_fn
    (tagged * 3).sum().backward()
    assert leaf.grad.tolist() == [6.0, 6.0, 6.0]
    with pytest.raises(TypeError, match="subclass of munet.Tensor"):
        y.as_subclass(int)


def test_module_load_matches_torch():
    for assign in (False, True):
        ours = munet.zeros(2).module_load(munet.ones(2), assign=assign)
        theirs = torch.zeros(2).module_load(torch.ones(2), assign=assign)
        assert ours.tolist() == theirs.tolist() and not ours.requires_grad


@pytest.mark.parametrize(
    "call",
    [lambda x: x.resize_(9), lambda x: x.set_(munet.ones(2)), lambda x: x.share_memory_()],
    ids=["resize_", "set_", "share_memory_"],
)
def test_storage_methods_refuse_inside_compile(call):
    compiled = munet.compile(lambda x: call(x) * 2, fullgraph=True)
    with pytest.raises(RuntimeError, match="not supported inside munet.compile"):
        compiled(munet.ones(3))
