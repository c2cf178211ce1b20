"""A character-level GPT trained on the public-domain text in examples/data, then sampled.

A decoder-only transformer in the style of GPT-2: token and position embeddings, pre-LayerNorm
blocks of causal self-attention (``F.scaled_dot_product_attention(is_causal=True)``) and a
GELU MLP, a final LayerNorm and a linear head whose weight is tied to the token embedding.
Trained with AdamW and a warmup + cosine schedule; at the end it samples text with
temperature and top-k multinomial sampling. Written as the PyTorch script would be, with
``import munet as torch``.

    python examples/char_gpt.py --steps 400 --context 64 --width 64 --layers 2 --heads 4
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import munet as torch
import munet.nn as nn
import munet.nn.functional as F
from munet import optim

DEFAULT_TEXT = Path(__file__).resolve().parent / "data" / "public_domain.txt"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="character-level GPT on a small public-domain text")
    parser.add_argument("--text", type=Path, default=DEFAULT_TEXT)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--context", type=int, default=64, help="tokens the model sees (block size)")
    parser.add_argument("--width", type=int, default=64, help="embedding width")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--lr", type=float, default=6e-3)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--no-tie-weights", dest="tie_weights", action="store_false")
    parser.add_argument("--log-every", type=int, default=50, help="print the loss every K steps")
    parser.add_argument("--eval-batches", type=int, default=4)
    parser.add_argument("--sample-length", type=int, default=300)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--prompt", type=str, default="We the People")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


class CharTokenizer:
    """Maps each distinct character of the training text to an integer id."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {ch: i for i, ch in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - set(self.index))
        if unknown:
            raise ValueError(f"char_gpt: characters {unknown} do not occur in the training text")
        return [self.index[ch] for ch in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        if width % heads != 0:
            raise ValueError(f"char_gpt: width {width} is not divisible by heads {heads}")
        self.heads = heads
        self.dropout = dropout
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x):
        batch, time_steps, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        # (B, T, C) -> (B, heads, T, C // heads)
        q = q.view(batch, time_steps, self.heads, width // self.heads).transpose(1, 2)
        k = k.view(batch, time_steps, self.heads, width // self.heads).transpose(1, 2)
        v = v.view(batch, time_steps, self.heads, width // self.heads).transpose(1, 2)
        dropout_p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(batch, time_steps, width)
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    def __init__(self, width: int, dropout: float):
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's GELU
        self.proj = nn.Linear(4 * width, width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.proj(self.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, dropout)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        context: int,
        width: int,
        layers: int,
        heads: int,
        dropout: float = 0.0,
        tie_weights: bool = True,
    ):
        super().__init__()
        self.context = context
        self.tok_emb = nn.Embedding(vocab_size, width)
        self.pos_emb = nn.Embedding(context, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(width, heads, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.tok_emb.weight
        self.apply(self._init_weights)
        # GPT-2: scale the residual projections by 1/sqrt(2 * layers).
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        _, time_steps = idx.shape
        if time_steps > self.context:
            raise ValueError(f"GPT: sequence of length {time_steps} is longer than the context {self.context}")
        pos = torch.arange(time_steps)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, new_tokens: int, temperature: float = 1.0, top_k: int | None = None, generator=None):
        """Extend ``idx`` (B, T) by ``new_tokens`` sampled tokens, one at a time."""
        for _ in range(new_tokens):
            logits, _ = self(idx[:, -self.context :])
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                kth_largest = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]
                logits = logits.masked_fill(logits < kth_largest, -float("inf"))
            probs = F.softmax(logits, dim=-1)
            next_token = torch.multinomial(probs, num_samples=1, generator=generator)
            idx = torch.cat((idx, next_token), dim=1)
        return idx


def get_batch(data, batch_size: int, context: int):
    """Random windows of ``context`` tokens and the same windows shifted by one."""
    starts = torch.randint(len(data) - context, (batch_size,))
    offsets = starts[:, None] + torch.arange(context)
    return data[offsets], data[offsets + 1]


@torch.no_grad()
def estimate_loss(model, splits: dict, batches: int, batch_size: int, context: int) -> dict:
    model.eval()
    result = {}
    for name, data in splits.items():
        losses = [model(*get_batch(data, batch_size, context))[1].item() for _ in range(batches)]
        result[name] = sum(losses) / len(losses)
    model.train()
    return result


def lr_lambda(warmup: int, total: int):
    """Linear warmup, then cosine decay to 10% of the peak learning rate."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)

    text = args.text.read_text(encoding="utf-8")
    tokenizer = CharTokenizer(text)
    data = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    n_train = int(0.9 * len(data))
    splits = {"train": data[:n_train], "val": data[n_train:]}
    print(f"{len(text)} characters, vocabulary of {tokenizer.vocab_size}")

    model = GPT(tokenizer.vocab_size, args.context, args.width, args.layers, args.heads, args.dropout, args.tie_weights)
    print(f"{sum(p.numel() for p in model.parameters())} parameters")

    # Weight decay on the matrices (linear weights, embeddings), not on biases or LayerNorm.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.99),
    )
    warmup = max(1, args.steps // 10)
    scheduler = optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(warmup, args.steps))

    log_every = max(1, args.log_every)
    initial = estimate_loss(model, splits, args.eval_batches, args.batch_size, args.context)
    print(f"step {0:5d}  train loss {initial['train']:.4f}  val loss {initial['val']:.4f}")
    history = [(0, initial["train"], initial["val"])]
    start = time.perf_counter()
    model.train()
    for step in range(1, args.steps + 1):
        x, y = get_batch(splits["train"], args.batch_size, args.context)
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if step % log_every == 0 or step == args.steps:
            losses = estimate_loss(model, splits, args.eval_batches, args.batch_size, args.context)
            history.append((step, losses["train"], losses["val"]))
            elapsed = time.perf_counter() - start
            print(
                f"step {step:5d}  train loss {losses['train']:.4f}  val loss {losses['val']:.4f}  "
                f"lr {scheduler.get_last_lr()[0]:.2e}  {elapsed:.1f} s"
            )
    train_seconds = time.perf_counter() - start

    model.eval()
    prompt = torch.tensor([tokenizer.encode(args.prompt)], dtype=torch.long)
    out = model.generate(
        prompt,
        args.sample_length,
        temperature=args.temperature,
        top_k=args.top_k,
        generator=torch.Generator().manual_seed(args.seed),
    )
    sample = tokenizer.decode(out[0].tolist())
    print("-" * 72)
    print(sample)
    print("-" * 72)
    print(f"trained {args.steps} steps in {train_seconds:.1f} s")
    return {
        "history": history,
        "sample": sample,
        "prompt": args.prompt,
        "vocabulary": tokenizer.chars,
        "train_seconds": train_seconds,
    }


if __name__ == "__main__":
    main()
