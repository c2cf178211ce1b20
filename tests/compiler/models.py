"""Small models shared by the compiler tests (compiled == eager on cpu and vulkan)."""

import munet.nn.functional as F
from munet import nn


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        # no qkv bias: the key bias's gradient is zero in exact arithmetic (softmax ignores a per-query
        # shift), so AdamW would turn its rounding noise into full-size updates that no two programs share
        self.qkv, self.proj = nn.Linear(width, 3 * width, bias=False), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """A GPT-style transformer: token+position embeddings, pre-LayerNorm blocks of causal
    scaled_dot_product_attention and a GELU MLP, a (tied or untied) head; logits as (batch*time, vocab)."""

    def __init__(self, vocab=13, context=8, width=16, heads=2, layers=2, tied=False):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=not tied)
        if tied:
            self.head.weight = self.tok.weight
        self.vocab = vocab

    def forward(self, idx):
        x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)).reshape(-1, self.vocab)


def train_step(model, opt, x, y):
    """One classification training step; compiled tests call ``munet.compile(train_step)``."""
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss
