"""A convolution and its fused bias/residual/ReLU group as one cpu step (munet/compiler/conv_epilogue.py):
the same bits as eager (which runs them apart), forward and in a training step, and the calls it leaves
as two steps."""

import numpy as np
import pytest

import munet
import munet.nn as nn
import munet.nn.functional as F
from munet.backends.cpu import direct_conv

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def channel_vectors():
    lib = direct_conv.library()
    if lib is None or not lib.munet_conv_channel_vectors():
        pytest.skip("the epilogue runs in the channel-vector (AVX-512) kernel only")


class Block(nn.Module):
    """conv + bias, then optionally a residual, then optionally ReLU (ResNet's basic block's tail)."""

    def __init__(self, residual: bool, relu: bool, channels: int = 40):
        super().__init__()
        self.first = nn.Conv2d(16, channels, 3, padding=1)
        self.second = nn.Conv2d(channels, channels, 3, padding=1)
        self.residual, self.relu = residual, relu

    def forward(self, x):
        h = F.relu(self.first(x))
        y = self.second(h)
        if self.residual:
            y = y + h
        return F.relu(y) if self.relu else y


def _input(shape=(2, 16, 12, 12), seed=0):
    return munet.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _stats(compiled) -> dict:
    return compiled.stats()


@pytest.fixture(params=[1, 2])
def threads(request):
    before = munet.get_num_threads()
    munet.set_num_threads(request.param)
    yield request.param
    munet.set_num_threads(before)


@pytest.mark.parametrize("residual, relu", [(False, True), (True, True), (True, False), (False, False)])
def test_fused_epilogue_gives_the_unfused_bits(residual, relu, threads):
    munet.manual_seed(0)
    block = Block(residual, relu).eval()
    compiled = munet.compile(block)
    x = _input((3, 16, 12, 12))  # at two threads: tasks of images
    with munet.no_grad():
        eager = block(x).numpy()
        for _ in range(3):  # per-call packing, then the kept pack
            np.testing.assert_array_equal(compiled(x).numpy(), eager)
    # the first convolution's group is bias + relu; the second's bias (+ residual) (+ relu)
    assert _stats(compiled)["conv_epilogues"] >= 1


def test_fused_epilogue_matches_torch():
    munet.manual_seed(1)
    block = Block(True, True).eval()
    compiled = munet.compile(block)
    x = _input(seed=1)
    with munet.no_grad():
        got = compiled(x).numpy()
    w1, b1, w2, b2 = (torch.from_numpy(p.detach().numpy().astype(np.float64)) for p in block.parameters())
    tx = torch.from_numpy(x.numpy().astype(np.float64))
    h = torch.relu(torch.nn.functional.conv2d(tx, w1, b1, padding=1))
    expected = torch.relu(torch.nn.functional.conv2d(h, w2, b2, padding=1) + h).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert _stats(compiled)["conv_epilogues"] >= 2


def test_a_training_step_with_epilogues_gives_eager_gradients(threads):
    munet.manual_seed(2)
    block = Block(True, True)
    reference = Block(True, True)
    reference.load_state_dict(block.state_dict())
    x = _input(seed=2)

    def loss_of(model):
        return (model(x) ** 2).mean()

    compiled = munet.compile(block)
    for _ in range(2):
        for model in (block, reference):
            model.zero_grad()
        loss = loss_of(compiled)
        loss.backward()
        expected = loss_of(reference)
        expected.backward()
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-5)
        for (name, p), q in zip(block.named_parameters(), reference.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    assert _stats(compiled)["conv_epilogues"] >= 1  # the group whose convolution output backward does not read


def test_a_convolution_read_elsewhere_keeps_its_own_step():
    # the convolution's output is also returned: the group cannot take over its store
    conv = nn.Conv2d(16, 40, 3, padding=1).eval()

    def both(x):
        y = F.conv2d(x, conv.weight, padding=1)
        return y, F.relu(y + conv.bias.view(1, -1, 1, 1))

    compiled = munet.compile(both)
    x = _input(seed=3)
    with munet.no_grad():
        got, expected = compiled(x), both(x)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert _stats(compiled)["conv_epilogues"] == 0


def test_the_kernel_epilogue_against_numpy():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 9, 20)).astype(np.float32)
    w = rng.standard_normal((40, 16, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    args = (x, w, (1, 1), ((1, 1), (1, 1)), (1, 1), 1, (9, 20))
    plain = direct_conv.direct_conv2d(*args)
    residual = rng.standard_normal(plain.shape).astype(np.float32)
    expected = np.maximum((plain + bias[:, None, None]) + residual, 0)
    out = residual.copy()  # the output may be the residual's memory
    got = direct_conv.direct_conv2d(*args, out=out, epilogue=(bias, out, True))
    np.testing.assert_array_equal(got, expected)
    no_relu = direct_conv.direct_conv2d(*args, out=np.empty_like(plain), epilogue=(bias, None, False))
    np.testing.assert_array_equal(no_relu, plain + bias[:, None, None])
    # an output over the input is declined (the caller runs the unfused steps)
    alias = np.empty(x.size + plain.size, np.float32)
    xa, outa = alias[: x.size].reshape(x.shape), alias[: plain.size].reshape(plain.shape)
    xa[...] = x
    assert direct_conv.direct_conv2d(xa, *args[1:], out=outa, epilogue=(bias, None, True)) is None


def test_the_kernel_epilogue_of_a_grouped_strided_convolution():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 32, 30, 30)).astype(np.float32)
    w = rng.standard_normal((80, 16, 3, 3)).astype(np.float32)  # two groups of 40: a partial block each
    bias = rng.standard_normal(80).astype(np.float32)
    args = (x, w, (2, 2), ((1, 1), (1, 1)), (1, 1), 2, (15, 15))
    plain = direct_conv.direct_conv2d(*args)
    assert plain is not None
    residual = rng.standard_normal(plain.shape).astype(np.float32)
    got = direct_conv.direct_conv2d(*args, out=np.empty_like(plain), epilogue=(bias, residual, True))
    np.testing.assert_array_equal(got, np.maximum((plain + bias[:, None, None]) + residual, 0))
