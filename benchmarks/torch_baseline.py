"""Eager PyTorch baseline of jab's encoder-decoder Transformer, for train-step throughput.

The same architecture as jab's Haiku model, written out in small nanoGPT-style classes
(no `nn.Transformer`) as a PyTorch user would write it for speed, so a jab train step can
be timed side by side with a PyTorch one, eager and with `torch.compile` (`compiled`):

* one token embedding shared by encoder and decoder, scaled by sqrt(d_model), plus a
  sinusoidal positional encoding, then dropout;
* post-LN encoder layers: x = LN(x + MHA(x, x, x)); x = LN(x + FFN(x));
* post-LN decoder layers: masked self-attention, cross-attention to the encoder output,
  FFN, each followed by Add & Norm;
* attention with a separate query projection and a fused key/value projection (written
  out: faster here than `F.scaled_dot_product_attention` at these shapes);
* a final linear layer to the vocabulary, cross-entropy that ignores <pad> (id 0),
  AdamW as jab's (betas 0.9 and 0.98, weight decay 0.01, lr 1e-3; the fused
  implementation) and global-norm gradient clipping at 1.0.

Data is the reverse task over digit ids 3..12, drawn before timing starts so only the
train steps are measured. Run it directly to print both benchmark shapes:

    python benchmarks/torch_baseline.py [--steps 50] [--repeats 3] [--threads N] [--compiled]

`solve_reverse` is the time-to-solve baseline: jab's reverse preset (its initializers,
AdamW with warmup and cosine decay, held-out exact match every `eval_every` steps,
early stop at the target), trained and evaluated here in eager PyTorch:

    python benchmarks/torch_baseline.py --solve --seed 0
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
FIRST_DIGIT_ID, NUM_DIGITS = 3, 10
NEG_INF = -1e9  # what masked attention logits are set to
LEARNING_RATE = 1e-3
WEIGHT_DECAY = 0.01  # jab's train.weight_decay
MAX_GRAD_NORM = 1.0


@dataclass(frozen=True)
class ModelConfig:
    d_model: int
    num_heads: int
    d_ff: int
    num_layers: int
    vocab_size: int = 50
    dropout: float = 0.1
    max_positions: int = 512


def sinusoidal_encoding(length: int, d_model: int) -> Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = position / torch.pow(10000.0, two_i / d_model)
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over `num_heads` heads, keys and values projected together."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def split_heads(self, x: Tensor) -> Tensor:
        """[batch, time, d_model] -> [batch, heads, time, head_dim]."""
        batch, time_, _ = x.shape
        return x.view(batch, time_, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, memory: Tensor, mask: Tensor) -> Tensor:
        """Queries from `x` [B, Tq, d], keys/values from `memory` [B, Tk, d].

        `mask` is boolean, broadcastable to [B, heads, Tq, Tk], True where attending is allowed.
        """
        q = self.split_heads(self.query(x))
        k, v = (self.split_heads(t) for t in self.key_value(memory).chunk(2, dim=-1))
        # Written out: on this CPU it is faster than F.scaled_dot_product_attention at
        # these shapes (27-28 against 21-23 steps/s at the preset shape, measured by
        # benchmarks/torch_variants.py).
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        weights = scores.masked_fill(~mask, NEG_INF).softmax(dim=-1)
        context = (weights @ v).transpose(1, 2).reshape(x.shape)
        return self.out(context)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.relu(self.up(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads)
        self.ln_attn = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.ln_ffn = nn.LayerNorm(cfg.d_model)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        x = self.ln_attn(x + self.self_attn(x, x, src_mask))
        return self.ln_ffn(x + self.ffn(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads)
        self.ln_self = nn.LayerNorm(cfg.d_model)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads)
        self.ln_cross = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.ln_ffn = nn.LayerNorm(cfg.d_model)

    def forward(self, y: Tensor, memory: Tensor, tgt_mask: Tensor, src_mask: Tensor) -> Tensor:
        y = self.ln_self(y + self.self_attn(y, y, tgt_mask))
        y = self.ln_cross(y + self.cross_attn(y, memory, src_mask))
        return self.ln_ffn(y + self.ffn(y))


class Transformer(nn.Module):
    """Encoder-decoder Transformer: (src [B, S], tgt_in [B, T]) -> logits [B, T, vocab]."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.register_buffer(
            "pe", sinusoidal_encoding(cfg.max_positions, cfg.d_model), persistent=False
        )
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size)

    def init_as_jab(self) -> None:
        """jab's (Haiku's) initializers: linear weights truncated normal with std
        1/sqrt(fan_in), zero biases; embeddings truncated normal with std 1/sqrt(d_model)."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                std = module.in_features**-0.5
                nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
                nn.init.zeros_(module.bias)
        std = self.cfg.d_model**-0.5
        nn.init.trunc_normal_(self.embed.weight, std=std, a=-2 * std, b=2 * std)

    def embed_tokens(self, ids: Tensor) -> Tensor:
        x = self.embed(ids) * math.sqrt(self.cfg.d_model) + self.pe[: ids.shape[1]]
        return self.dropout(x)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self.decode(src, self.encode(src), tgt_in)

    def encode(self, src: Tensor) -> Tensor:
        """[B, S] -> the encoder's output [B, S, d_model]."""
        src_mask = (src != PAD_ID)[:, None, None, :]  # [B, 1, 1, S]
        memory = self.embed_tokens(src)
        for layer in self.encoder:
            memory = layer(memory, src_mask)
        return memory

    def decode(self, src: Tensor, memory: Tensor, tgt_in: Tensor) -> Tensor:
        """The encoder's output and targets [B, T] -> logits [B, T, vocab]."""
        tgt_len = tgt_in.shape[1]
        src_mask = (src != PAD_ID)[:, None, None, :]  # [B, 1, 1, S]
        causal = torch.ones(tgt_len, tgt_len, dtype=torch.bool, device=src.device).tril()
        tgt_mask = (tgt_in != PAD_ID)[:, None, None, :] & causal  # [B, 1, T, T]
        y = self.embed_tokens(tgt_in)
        for layer in self.decoder:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.lm_head(y)


def count_params(
    *, d_model: int, num_heads: int, d_ff: int, num_layers: int, vocab_size: int = 50
) -> int:
    """Trainable parameters of the model with this shape."""
    model = Transformer(ModelConfig(d_model, num_heads, d_ff, num_layers, vocab_size))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def reverse_batch(
    generator: torch.Generator,
    *,
    batch_size: int,
    src_len: int,
    tgt_len: int,
    min_len: int,
    max_len: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """A random reverse-task batch (src, tgt_in, tgt_out) of int64 ids, padded with <pad>.

    Lengths are uniform in [min_len, max_len], symbols uniform over digit ids 3..12;
    tgt_in = <bos> + reversed source, tgt_out = reversed source + <eos>.
    """
    if not 1 <= min_len <= max_len <= src_len or tgt_len < max_len + 1:
        raise ValueError(
            f"need 1 <= min_len <= max_len <= src_len and tgt_len > max_len, got "
            f"min_len={min_len} max_len={max_len} src_len={src_len} tgt_len={tgt_len}"
        )
    lengths = torch.randint(min_len, max_len + 1, (batch_size, 1), generator=generator)
    digits = torch.randint(
        FIRST_DIGIT_ID, FIRST_DIGIT_ID + NUM_DIGITS, (batch_size, src_len), generator=generator
    )
    src_pos = torch.arange(src_len)[None, :]
    src = torch.where(src_pos < lengths, digits, PAD_ID)

    index = lengths - 1 - src_pos
    reversed_ = torch.where(index >= 0, src.gather(1, index.clamp(min=0)), PAD_ID)
    target = F.pad(reversed_, (0, tgt_len - src_len), value=PAD_ID)

    tgt_pos = torch.arange(tgt_len)[None, :]
    keep = tgt_pos <= lengths
    tgt_out = torch.where(tgt_pos == lengths, EOS_ID, target).masked_fill(~keep, PAD_ID)
    bos = torch.full((batch_size, 1), BOS_ID, dtype=target.dtype)
    tgt_in = torch.cat([bos, target[:, :-1]], dim=1).masked_fill(~keep, PAD_ID)
    return src, tgt_in, tgt_out


def make_optimizer(
    model: nn.Module, learning_rate: float = LEARNING_RATE, weight_decay: float = WEIGHT_DECAY
) -> torch.optim.Optimizer:
    """jab's AdamW (optax.adamw with b1 0.9, b2 0.98), PyTorch's fused implementation."""
    return torch.optim.AdamW(
        model.parameters(),
        lr=learning_rate,
        betas=(0.9, 0.98),
        weight_decay=weight_decay,
        fused=True,
    )


def train_step(
    model: Transformer, optimizer: torch.optim.Optimizer, batch: tuple[Tensor, Tensor, Tensor]
) -> Tensor:
    """One full step: forward, loss, backward, clip, update. Returns the loss without syncing."""
    src, tgt_in, tgt_out = batch
    logits = model(src, tgt_in)
    loss = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD_ID
    )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    optimizer.step()
    return loss.detach()


def measure_train_steps_per_sec(
    *,
    d_model: int,
    num_heads: int,
    d_ff: int,
    num_layers: int,
    batch_size: int,
    src_len: int,
    tgt_len: int,
    min_len: int,
    max_len: int,
    vocab_size: int = 50,
    steps: int = 50,
    warmup: int = 5,
    repeats: int = 3,
    seed: int = 0,
    threads: int | None = None,
    dropout: float = 0.1,
    compiled: bool = False,
) -> dict:
    """Train steps per second: `warmup` untimed steps, then `repeats` timed blocks of `steps`.

    Batches are drawn before timing; each block ends with one `loss.item()`. `compiled`
    runs the model through `torch.compile` (the warm-up steps compile it: `warmup_s`).
    """
    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = Transformer(ModelConfig(d_model, num_heads, d_ff, num_layers, vocab_size, dropout))
    model.train()
    optimizer = make_optimizer(model)
    if compiled:
        model = torch.compile(model)
    batches = [
        reverse_batch(
            generator,
            batch_size=batch_size,
            src_len=src_len,
            tgt_len=tgt_len,
            min_len=min_len,
            max_len=max_len,
        )
        for _ in range(warmup + steps * repeats)
    ]

    start = time.perf_counter()
    for batch in batches[:warmup]:
        train_step(model, optimizer, batch).item()
    warmup_s = time.perf_counter() - start

    rates: list[float] = []
    for r in range(repeats):
        block = batches[warmup + r * steps : warmup + (r + 1) * steps]
        start = time.perf_counter()
        for batch in block:
            loss = train_step(model, optimizer, batch)
        loss.item()
        rates.append(steps / (time.perf_counter() - start))

    return {
        "steps_per_sec_median": statistics.median(rates),
        "steps_per_sec_all": rates,
        "warmup_s": warmup_s,
        "compiled": compiled,
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
    }


@torch.no_grad()
def greedy_answers(model: Transformer, src: Tensor, max_out: int) -> Tensor:
    """Greedy decoding, encoding once and recomputing the decoder over the prefix
    (jab keeps a key/value cache instead): [B, S] -> [B, max_out]."""
    memory = model.encode(src)
    tgt_in = torch.full((src.shape[0], 1), BOS_ID, dtype=src.dtype)
    for _ in range(max_out):
        token = model.decode(src, memory, tgt_in)[:, -1].argmax(dim=-1, keepdim=True)
        tgt_in = torch.cat([tgt_in, token], dim=1)
        if (tgt_in == EOS_ID).any(dim=1).all():
            break
    return tgt_in[:, 1:]


@torch.no_grad()
def greedy_answers_cached(model: Transformer, src: Tensor, max_out: int) -> Tensor:
    """Greedy decoding with a key/value cache, as jab decodes: the encoder once, the
    cross-attention's keys and values once, each step one token through the decoder
    appending its keys and values; stops once every row has written <eos>.
    [B, S] -> [B, max_out]."""
    batch = src.shape[0]
    src_mask = (src != PAD_ID)[:, None, None, :]
    memory = model.encode(src)
    cross = [
        [layer.cross_attn.split_heads(t) for t in layer.cross_attn.key_value(memory).chunk(2, -1)]
        for layer in model.decoder
    ]
    heads = model.decoder[0].self_attn
    shape = (batch, heads.num_heads, max_out, heads.head_dim)
    keys = [torch.zeros(shape) for _ in model.decoder]
    values = [torch.zeros(shape) for _ in model.decoder]
    token = torch.full((batch,), BOS_ID, dtype=src.dtype)
    out = torch.full((batch, max_out), PAD_ID, dtype=src.dtype)
    done = torch.zeros(batch, dtype=torch.bool)
    scale = 1 / math.sqrt(heads.head_dim)
    for step in range(max_out):
        x = model.embed(token)[:, None] * math.sqrt(model.cfg.d_model) + model.pe[step]
        for n, layer in enumerate(model.decoder):
            attn = layer.self_attn
            q = attn.split_heads(attn.query(x))
            k, v = (attn.split_heads(t) for t in attn.key_value(x).chunk(2, dim=-1))
            keys[n][:, :, step : step + 1], values[n][:, :, step : step + 1] = k, v
            weights = (q @ keys[n][:, :, : step + 1].transpose(-2, -1) * scale).softmax(-1)
            context = (weights @ values[n][:, :, : step + 1]).transpose(1, 2).reshape(x.shape)
            x = layer.ln_self(x + attn.out(context))
            attn = layer.cross_attn
            q = attn.split_heads(attn.query(x))
            scores = (q @ cross[n][0].transpose(-2, -1) * scale).masked_fill(~src_mask, NEG_INF)
            context = (scores.softmax(-1) @ cross[n][1]).transpose(1, 2).reshape(x.shape)
            x = layer.ln_cross(x + attn.out(context))
            x = layer.ln_ffn(x + layer.ffn(x))
        token = model.lm_head(x)[:, 0].argmax(dim=-1)
        out[:, step] = token
        done |= token == EOS_ID
        if done.all():
            break
    return out


def exact_match(answers: Tensor, tgt_out: Tensor) -> float:
    """Share of rows whose answer up to and including its first <eos> equals the target."""
    hits = 0
    for answer, target in zip(answers.tolist(), tgt_out.tolist()):
        want = target[: target.index(EOS_ID) + 1]
        hits += answer[: len(want)] == want
    return hits / len(answers)


def warmup_cosine(step: int, warmup: int, total: int) -> float:
    """optax.warmup_cosine_decay_schedule(0, lr, warmup, total, 0.1 lr), as a factor of lr."""
    if step < warmup:
        return step / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def solve_reverse(
    *,
    seed: int = 0,
    d_model: int = 64,
    num_heads: int = 4,
    d_ff: int = 256,
    num_layers: int = 2,
    vocab_size: int = 50,
    batch_size: int = 64,
    min_len: int = 1,
    max_len: int = 16,
    steps: int = 2000,
    learning_rate: float = 3e-3,
    warmup_steps: int = 200,
    weight_decay: float = 0.01,
    eval_every: int = 200,
    eval_samples: int = 512,
    target_seq_acc: float = 0.995,
    threads: int | None = None,
) -> dict:
    """Wall seconds to train the reverse task until held-out exact match reaches the
    target, with jab's preset model and hyperparameters (one example per row: the
    baseline does not pack). Batches are drawn as it goes, as jab draws them."""
    if threads is not None:
        torch.set_num_threads(threads)
    start = time.perf_counter()
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    held_out = torch.Generator().manual_seed(seed + 1_000_003)
    model = Transformer(ModelConfig(d_model, num_heads, d_ff, num_layers, vocab_size, 0.0))
    model.init_as_jab()
    optimizer = make_optimizer(model, learning_rate, weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_cosine(step, min(warmup_steps, steps), steps)
    )
    shape = {"src_len": max_len, "tgt_len": max_len + 1, "min_len": min_len, "max_len": max_len}

    def draw(source: torch.Generator, rows: int) -> tuple[Tensor, Tensor, Tensor]:
        """A reverse batch whose sources end with <eos>, as jab's do."""
        src, tgt_in, tgt_out = reverse_batch(source, batch_size=rows, **shape)
        src = F.pad(src, (0, 1), value=PAD_ID)
        src.scatter_(1, (src != PAD_ID).sum(dim=1, keepdim=True), EOS_ID)
        return src, tgt_in, tgt_out

    seq_acc, step, eval_s = 0.0, 0, 0.0
    while step < steps:
        model.train()
        train_step(model, optimizer, draw(generator, batch_size))
        schedule.step()
        step += 1
        if step % eval_every == 0 or step == steps:
            tic = time.perf_counter()
            model.eval()
            src, _, tgt_out = draw(held_out, eval_samples)
            seq_acc = exact_match(greedy_answers(model, src, max_len + 1), tgt_out)
            eval_s += time.perf_counter() - tic
            if seq_acc >= target_seq_acc:
                break
    return {
        "seed": seed,
        "wall_s": time.perf_counter() - start,
        "eval_s": eval_s,
        "steps": step,
        "seq_acc": seq_acc,
        "reached": seq_acc >= target_seq_acc,
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
    }


SHAPES: dict[str, dict[str, int]] = {
    "seed": {
        "d_model": 64, "num_heads": 4, "d_ff": 256, "num_layers": 2,
        "batch_size": 32, "min_len": 10, "max_len": 10, "src_len": 10, "tgt_len": 11,
    },
    "reference": {
        "d_model": 128, "num_heads": 4, "d_ff": 512, "num_layers": 2,
        "batch_size": 128, "min_len": 1, "max_len": 16, "src_len": 16, "tgt_len": 17,
    },
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--compiled", action="store_true", help="through torch.compile")
    parser.add_argument("--solve", action="store_true", help="time to solve reverse instead")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.solve:
        print(json.dumps(solve_reverse(seed=args.seed, threads=args.threads)))
        return

    for name, shape in SHAPES.items():
        params = count_params(
            d_model=shape["d_model"],
            num_heads=shape["num_heads"],
            d_ff=shape["d_ff"],
            num_layers=shape["num_layers"],
        )
        result = measure_train_steps_per_sec(
            **shape,
            steps=args.steps,
            warmup=args.warmup,
            repeats=args.repeats,
            threads=args.threads,
            compiled=args.compiled,
        )
        print(json.dumps({"shape": name, "params": params, **shape, **result}))


if __name__ == "__main__":
    main()
