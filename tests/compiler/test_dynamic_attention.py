"""Attention under changing sequence lengths: one shape-polymorphic program (``codegen/c_symbolic.py``).

A new length of a dynamic dim reuses the cached program (``compiler/resize.py``); the kernels that
hold the length beyond a leading count (attention's ``(batch, heads, time, time)`` scores, the softmax
over time, the causal mask's strides, a mean over ``batch * time``) are compiled once more with a
run-time count per changed size, and later lengths compile no C. Compiled results equal eager at
every length (float32, bounded by eager's own error against a float64 run), length 1 included.
"""

import copy

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from munet.compiler.codegen import build
from munet.compiler.resize import size_symbols
from tests.compiler.models import GPT, train_step
from tests.reference import assert_close_to_reference

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def test_size_symbols_write_changed_sizes_over_a_few_bases():
    # a batch * time of 27 beside a time of 9: 3 * time at both values
    assert size_symbols({9: 12, 27: 36}) == ((9, 27), ((1, (1,)), (3, (1,))), 1)
    # both changed: 27 is batch * time
    assert size_symbols({3: 5, 9: 12, 27: 60}) == ((3, 9, 27), ((1, (1, 0)), (1, (0, 1)), (1, (1, 1))), 2)
    assert size_symbols({4: 6, 7: 9}) == ((4, 7), ((1, (1, 0)), (1, (0, 1))), 2)  # unrelated sizes
    assert size_symbols({2: 3, 5: 7, 11: 13, 17: 19}, max_bases=3) is None


class _Attention(nn.Module):
    """Causal scaled_dot_product_attention over (batch, heads, time, head dim) projections of x."""

    def __init__(self, width=16, heads=2):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class _Encoder(nn.Module):
    """nn.TransformerEncoder under a causal mask given as an argument, made per length."""

    def __init__(self, width=16, heads=2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x, mask):
        return self.encoder(x, mask=mask)


class _SelfAttention(nn.Module):
    def __init__(self, width=16, heads=2, need_weights=False):
        super().__init__()
        self.attn, self.need_weights = nn.MultiheadAttention(width, heads, batch_first=True), need_weights

    def forward(self, x):
        out, weights = self.attn(x, x, x, need_weights=self.need_weights)
        return out if weights is None else out.sum(-1) + (weights * weights).sum(-1)


def _inputs(kind: str, t: int, rng, dtype=np.float32) -> list:
    if kind == "tokens":
        return [rng.integers(0, 13, (3, t)), rng.integers(0, 13, 3 * t)]
    x = rng.standard_normal((3, t, 16)).astype(dtype)
    if kind == "masked":
        return [x, np.triu(np.full((t, t), -np.inf, dtype), 1)]
    return [x]


def _loss(model, kind: str, arrays: list, dtype):
    tensors = [munet.tensor(a.astype(dtype) if a.dtype.kind == "f" else a) for a in arrays]
    if kind == "tokens":
        return F.cross_entropy(model(tensors[0]), tensors[1])
    out = model(*tensors)
    return (out * out).mean()


def _assert_compiled_equals_eager_at_lengths(make, kind: str, lengths, record_calls):
    """``munet.compile(model)`` (``dynamic=None``) against the eager model at each length: the loss and
    every gradient within eager float32's own error against a float64 copy. Returns the C compiles per length."""
    compiles = record_calls(build, "_compile")
    munet.manual_seed(0)
    eager = make()
    tested, reference = copy.deepcopy(eager), copy.deepcopy(eager).double()
    compiled = munet.compile(tested)
    rng = np.random.default_rng(1)
    counts = []
    for t in lengths:
        arrays = _inputs(kind, t, rng)
        before = len(compiles)
        losses = []
        for model, dtype in ((compiled, np.float32), (eager, np.float32), (reference, np.float64)):
            model.zero_grad()
            loss = _loss(model, kind, arrays, dtype)
            loss.backward()
            losses.append(loss.detach().numpy())
        counts.append(len(compiles) - before)
        assert_close_to_reference(*losses, what=f"loss at length {t}")
        for (name, p), q, r in zip(eager.named_parameters(), tested.parameters(), reference.parameters()):
            assert_close_to_reference(q.grad.numpy(), p.grad.numpy(), r.grad.numpy(), what=f"{name}.grad at {t}")
    return counts, compiled.stats()


@needs_cc
@pytest.mark.parametrize(
    "make, kind",
    [
        (lambda: GPT(vocab=13, context=16, width=16, heads=2, layers=1), "tokens"),
        (_Attention, "features"),
        (_SelfAttention, "features"),
        (lambda: _SelfAttention(need_weights=True), "features"),
        (_Encoder, "masked"),
    ],
    ids=["gpt", "sdpa", "multihead", "multihead-weights", "encoder-mask"],
)
def test_new_lengths_compile_no_c_and_equal_eager(make, kind, record_calls):
    # 6: static; 9: the dim becomes dynamic (optimized); 12: reuses 9's program, its attention kernels
    # compiled with run-time counts; 5, 7 and 11 reuse it all; 1 is a program of its own
    counts, stats = _assert_compiled_equals_eager_at_lengths(make, kind, (6, 9, 12, 5, 7, 1, 11), record_calls)
    assert stats["dynamic_dims"], stats
    assert counts[3:5] == [0, 0] and counts[6] == 0, counts
    assert stats["reused"] == 4, stats["last_reuse_refusal"]


@needs_cc
def test_a_training_step_over_new_lengths_compiles_no_c_after_the_first_reuse(record_calls):
    compiles = record_calls(build, "_compile")
    munet.manual_seed(1)
    model = GPT(vocab=13, context=16, width=16, heads=2, layers=1)
    opt = munet.optim.AdamW(model.parameters(), lr=1e-2)
    step = munet.compile(lambda x, y: train_step(model, opt, x, y), dynamic=True)
    rng = np.random.default_rng(0)
    counts = []
    for t in (9, 9, 12, 5, 7, 11):
        before = len(compiles)
        step(munet.tensor(rng.integers(0, 13, (3, t))), munet.tensor(rng.integers(0, 13, 3 * t)))
        counts.append(len(compiles) - before)
    assert counts[2] > 0 and counts[3:] == [0, 0, 0], counts
    assert step.stats()["reused"] == 4
