"""Compiled attention training steps equal eager: multi-head attention's view layout, ViT and CLIP blocks.

The gradient of ``x.reshape(L, N * H, d).transpose(0, 1).view(N, H, L, d)`` (the layout of
``nn.MultiheadAttention``) views a permuted product again; the fusion pass that turns a matmul
read only transposed around must leave such a product's layout alone (passes/fuse.py).
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from tests.compiler.models import train_step

RTOL, ATOL = 1e-5, 1e-6
STEPS = 3


class ViTBlock(nn.Module):
    """Pre-LN encoder block as in a vision transformer: attention without a mask, GELU MLP."""

    def __init__(self, width=16, heads=2, need_weights=False):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.need_weights = need_weights

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=self.need_weights)[0]
        return x + self.mlp(self.ln2(x))


class CLIPTextBlock(nn.Module):
    """A CLIP-style text encoder: token + position embeddings, pre-LN layers under a causal mask;
    logits as (batch * time, vocab)."""

    def __init__(self, vocab=11, context=6, width=16, heads=2, layers=2, is_causal=None):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        layer = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(width), enable_nested_tensor=False)
        self.mask = nn.Transformer.generate_square_subsequent_mask(context)  # a constant of the compiled step
        self.head = nn.Linear(width, vocab)
        self.is_causal = is_causal

    def forward(self, idx):
        x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
        logits = self.head(self.encoder(x, mask=self.mask, is_causal=self.is_causal))
        return logits.reshape(-1, logits.shape[-1])


def _regression_step(model, opt, x, target):
    opt.zero_grad()
    loss = F.mse_loss(model(x), target)
    loss.backward()
    opt.step()
    return loss


def _assert_trains_as_eager(make, step, x, target):
    """Losses, parameters and gradients of eager and compiled SGD agree after every one of STEPS steps."""
    munet.manual_seed(0)
    eager = make()
    munet.manual_seed(0)
    compiled_model = make()
    opts = [munet.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (eager, compiled_model)]
    compiled = munet.compile(step)
    for _ in range(STEPS):
        expected = step(eager, opts[0], x, target).item()
        got = compiled(compiled_model, opts[1], x, target).item()
        assert got == pytest.approx(expected, rel=RTOL)
    for (name, p), q in zip(eager.named_parameters(), compiled_model.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=name)
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=f"{name}.grad")
    return compiled


def _images():
    rng = np.random.default_rng(1)
    x = munet.tensor(rng.standard_normal((2, 5, 16)).astype(np.float32))
    return x, munet.tensor(rng.standard_normal((2, 5, 16)).astype(np.float32))


def test_multi_head_view_layout_feeds_attention_in_a_compiled_step():
    L, N, H, d = 5, 2, 2, 4

    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.out = nn.Linear(H * d, 3 * H * d), nn.Linear(H * d, H * d)

        def forward(self, x):  # x: (L, N, E), as nn.MultiheadAttention lays it out
            q, k, v = (z.reshape(L, N * H, d).transpose(0, 1).view(N, H, L, d) for z in self.qkv(x).chunk(3, -1))
            y = F.scaled_dot_product_attention(q, k, v)
            return self.out(y.permute(2, 0, 1, 3).reshape(L, N, H * d))

    rng = np.random.default_rng(0)
    x = munet.tensor(rng.standard_normal((L, N, H * d)).astype(np.float32))
    target = munet.tensor(rng.standard_normal((L, N, H * d)).astype(np.float32))
    compiled = _assert_trains_as_eager(Heads, _regression_step, x, target)
    assert compiled.stats()["fused_groups"] > 0  # the fused plan, not a fallback, is what agreed


@pytest.mark.parametrize("need_weights", [False, True])
def test_vit_block_with_multihead_attention_trains_as_eager(need_weights):
    x, target = _images()
    _assert_trains_as_eager(lambda: ViTBlock(need_weights=need_weights), _regression_step, x, target)


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_sequence_first_trains_as_eager(need_weights):
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(16, 4)

        def forward(self, x):
            out, weights = self.attn(x, x, x, need_weights=need_weights)
            return out if weights is None else out + weights.sum()

    x, target = _images()
    _assert_trains_as_eager(Attention, _regression_step, x.transpose(0, 1), target.transpose(0, 1))


@pytest.mark.parametrize("is_causal", [None, True])
def test_clip_text_encoder_with_a_constant_causal_mask_trains_as_eager(is_causal):
    rng = np.random.default_rng(2)
    idx = munet.tensor(rng.integers(0, 11, (3, 6)))
    target = munet.tensor(rng.integers(0, 11, 3 * 6))
    _assert_trains_as_eager(lambda: CLIPTextBlock(is_causal=is_causal), train_step, idx, target)


def test_transformer_encoder_with_a_mask_argument_compiles_for_inference():
    munet.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = munet.randn(2, 4, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    compiled = munet.compile(encoder)
    with munet.no_grad():
        np.testing.assert_allclose(compiled(x, mask=mask).numpy(), encoder(x, mask=mask).numpy(), rtol=RTOL, atol=ATOL)
