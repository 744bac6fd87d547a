"""Which choices make the PyTorch baseline fastest: attention written out or through
`F.scaled_dot_product_attention`, and Adam, AdamW (foreach) or AdamW (fused), each timed
in this one process at one shape, eager, one after the other:

    python benchmarks/torch_variants.py [D_MODEL BATCH]    # default: 64 64, the preset shape
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_baseline as baseline

written_out = baseline.MultiHeadAttention.forward
fused = baseline.make_optimizer


def sdpa(self, x, memory, mask):
    q = self.split_heads(self.query(x))
    k, v = (self.split_heads(t) for t in self.key_value(memory).chunk(2, dim=-1))
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return self.out(context.transpose(1, 2).reshape(x.shape))


def adam(model, *_, **__):
    return torch.optim.Adam(model.parameters(), lr=baseline.LEARNING_RATE)


def adamw_foreach(model, *_, **__):
    return torch.optim.AdamW(
        model.parameters(), lr=baseline.LEARNING_RATE, betas=(0.9, 0.98), weight_decay=0.01
    )


def main() -> None:
    d_model, batch = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (64, 64)
    shape = {"d_model": d_model, "num_heads": 4, "d_ff": 4 * d_model, "num_layers": 2,
             "batch_size": batch, "src_len": 17, "tgt_len": 17, "min_len": 1,
             "max_len": 16}  # fmt: skip
    variants = [
        ("attention written out, Adam", written_out, adam),
        ("scaled_dot_product_attention, Adam", sdpa, adam),
        ("attention written out, AdamW fused", written_out, fused),
        ("attention written out, AdamW foreach", written_out, adamw_foreach),
        ("scaled_dot_product_attention, AdamW fused", sdpa, fused),
    ]
    for name, forward, optimizer in variants:
        baseline.MultiHeadAttention.forward, baseline.make_optimizer = forward, optimizer
        r = baseline.measure_train_steps_per_sec(
            **shape, steps=25, warmup=5, repeats=3, dropout=0.0, threads=2
        )
        rates = ", ".join(f"{x:.1f}" for x in r["steps_per_sec_all"])
        print(f"{name:42s} {r['steps_per_sec_median']:5.1f} steps/s  ({rates})", flush=True)


if __name__ == "__main__":
    main()
