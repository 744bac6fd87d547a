"""Looking at a trained run: `jab eval`, `jab predict` and `jab show-attention`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jabcli import runtime
from jabcli.config import Config, check_positions
from jabcli.errors import JabError
from jabcli.runs import Run, atomic_write
from jabcli.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer, clean

EVAL_SEED_STREAM = 3  # `jab eval` draws from its own stream, apart from training's
DECODE_KEY = 0  # `jab predict` and `show-attention` draw randomized positions from this key


@dataclass
class Loaded:
    run: Run
    cfg: Config
    tokenizer: Tokenizer
    setup: Any
    params: Any
    step: int


def load(path: Path | None, checkpoint: str = "latest", no_cache: bool = False) -> Loaded:
    run = Run.open(path)
    cfg, tokenizer = run.load_config()
    entry = run.checkpoint_entry(checkpoint)
    arrays = run.load_checkpoint(entry)
    runtime.configure(no_cache)
    from jabcli.train import Setup, state_from_arrays

    setup = Setup.create(cfg, tokenizer)
    try:
        state = state_from_arrays(setup, arrays)
    except (KeyError, ValueError) as err:
        raise JabError(
            f"checkpoint {entry['file']} in {run.path} does not fit its config: {err}"
        ) from None
    return Loaded(run, cfg, tokenizer, setup, state.params, entry["step"])


def parse_lengths(text: str) -> tuple[int, int]:
    """`--lengths 1-64` -> (1, 64); `--lengths 17` -> (17, 17)."""
    low, dash, high = text.partition("-")
    if not (low.strip().isdigit() and (not dash or high.strip().isdigit())):
        raise JabError(f"--lengths takes a range like 1-64 (or one length like 17), got {text!r}")
    return int(low), int(high if dash else low)


def check_lengths(loaded: Loaded, min_len: int, max_len: int) -> None:
    task = loaded.setup.task
    if min_len < task.min_length or min_len > max_len:
        raise JabError(
            f"lengths must satisfy {task.min_length} <= shortest <= longest for task "
            f"{loaded.cfg.task.name}, got {min_len} and {max_len}"
        )
    check_positions(task, loaded.cfg.model, max_len, f"length {max_len}")


def default_lengths(runs: list[Loaded]) -> tuple[int, int]:
    """From the shortest training length (that every task accepts) to twice the longest,
    cut to what every run's positions allow."""
    low = max(
        min(one.cfg.task.min_len for one in runs),
        max(one.setup.task.min_length for one in runs),
    )
    high = 2 * max(one.cfg.task.max_len for one in runs)
    for one in runs:
        while high > low and one.setup.task.positions_needed(high) > one.cfg.model.max_positions:
            high -= 1
    return low, high


def evaluate_run(
    loaded: Loaded,
    samples: int,
    min_len: int | None,
    max_len: int | None,
    seed: int,
    each_length: bool = False,
) -> dict[str, Any]:
    """Held-out accuracy of a run; with `each_length`, `samples` at every length."""
    import jax

    from jabcli.train import evaluate

    if samples <= 0:
        raise JabError(f"--samples must be positive, got {samples}")
    if not 0 <= seed < 2**32:
        raise JabError(f"--seed must be between 0 and 2**32 - 1, got {seed}")
    t = loaded.cfg.task
    min_len = t.min_len if min_len is None else min_len
    max_len = t.max_len if max_len is None else max_len
    check_lengths(loaded, min_len, max_len)
    key = jax.random.fold_in(jax.random.PRNGKey(seed), EVAL_SEED_STREAM)
    result = evaluate(loaded.setup, loaded.params, key, samples, min_len, max_len, each_length)
    if each_length:  # a data file may have no held-out pairs at some lengths
        result["missing_lengths"] = [
            n for n in range(min_len, max_len + 1) if n not in result["per_length"]
        ]
    return {
        "run": str(loaded.run.path),
        "step": loaded.step,
        "task": t.name,
        "pos_encoding": loaded.cfg.model.pos_encoding,
        "train_lengths": [t.min_len, t.max_len],
        "min_len": min_len,
        "max_len": max_len,
        **result,
    }


def encode_inputs(loaded: Loaded, texts: list[str]) -> np.ndarray:
    """User inputs -> a padded source batch, with one-line errors for bad input."""
    if not texts:
        raise JabError("give at least one input, for example: jab predict 12345")
    rows = []
    for text in texts:
        if not clean(text):
            raise JabError("an input is empty; give at least one symbol")
        rows.append(loaded.tokenizer.encode(text, loaded.cfg.task.alphabet))
        loaded.setup.task.check_input(clean(text))
    longest = max(map(len, rows))
    check_positions(loaded.setup.task, loaded.cfg.model, longest, f"an input of length {longest}")
    batch = np.full((len(rows), longest + 1), PAD_ID, np.int32)
    for i, row in enumerate(rows):
        batch[i, : len(row) + 1] = [*row, EOS_ID]  # sources end with <eos>, as in training
    return batch


def decode_batch(loaded: Loaded, src: np.ndarray) -> tuple[np.ndarray, Any]:
    """Greedy answers [B, max_out] to a source batch, and the positions they were read at."""
    import jax

    from jabcli.decode import greedy_decode

    max_out = loaded.setup.task.target_length(src.shape[1] - 1) + 1
    positions = loaded.setup.positions(jax.random.PRNGKey(DECODE_KEY), src, max_out)
    out = greedy_decode(loaded.setup.fns, loaded.params, src, max_out, *positions)
    return np.asarray(out), positions


def predict(loaded: Loaded, texts: list[str]) -> list[dict[str, Any]]:
    src = encode_inputs(loaded, texts)
    outputs, _ = decode_batch(loaded, src)
    rows = []
    for text, out in zip(texts, outputs):
        answer = loaded.tokenizer.decode(out)
        expected = loaded.setup.task.solve(clean(text))
        rows.append(
            {
                "input": clean(text),
                "output": answer,
                "expected": expected,
                "correct": None if expected is None else answer == expected,
            }
        )
    return rows


def random_input(loaded: Loaded) -> str:
    import jax

    seed = int.from_bytes(os.urandom(4), "little")
    key = jax.random.fold_in(jax.random.PRNGKey(seed), EVAL_SEED_STREAM)
    t = loaded.cfg.task
    batch = loaded.setup.held_out(key, 1, t.min_len, t.max_len)
    return loaded.tokenizer.decode(np.asarray(batch.src[0]))


def attention(loaded: Loaded, text: str, kind: str):
    """Decode `text`; return weights [layers, heads, rows, cols], row and column labels, answer."""
    src = encode_inputs(loaded, [text])
    outputs, (src_positions, tgt_positions) = decode_batch(loaded, src)
    out = outputs[0]
    ends = np.flatnonzero(out == EOS_ID)
    produced = out[: ends[0] + 1] if ends.size else out
    tgt_in = np.concatenate([[BOS_ID], produced[:-1]]).astype(np.int32)[None]
    # The positions decoding read, so the picture shows the computation that answered.
    _, weights = loaded.setup.fns.forward(
        loaded.params,
        None,
        src,
        tgt_in,
        src_positions=src_positions,
        tgt_positions=tgt_positions[:, : tgt_in.shape[1]],
    )
    tokens = loaded.tokenizer.tokens
    src_labels = [tokens[i] for i in src[0]]
    out_labels = [tokens[i] for i in produced]
    in_labels = [tokens[i] for i in tgt_in[0]]
    chosen = {
        "cross": (weights.cross, out_labels, src_labels),
        "decoder": (weights.decoder, out_labels, in_labels),
        "encoder": (weights.encoder, src_labels, src_labels),
    }[kind]
    matrices, rows, cols = chosen
    return np.asarray(matrices)[:, 0], rows, cols, loaded.tokenizer.decode(out)


def show_attention(
    loaded: Loaded,
    text: str | None,
    kind: str,
    layer: int | None,
    head: str | None,
    save: Path | None,
) -> None:
    from rich.console import Console

    from jabcli.display import attention_view, console, heatmap

    num_layers, num_heads = loaded.cfg.model.num_layers, loaded.cfg.model.num_heads
    layer = num_layers - 1 if layer is None else layer
    if not 0 <= layer < num_layers:
        raise JabError(f"--layer must be between 0 and {num_layers - 1}, got {layer}")
    if head not in (None, "mean") and not (head.isdigit() and int(head) < num_heads):
        raise JabError(
            f"--head must be 'mean' or a head between 0 and {num_heads - 1}, got {head!r}"
        )
    if save is not None and not save.parent.is_dir():
        raise JabError(f"cannot save to {save}: folder {save.parent} does not exist")
    text = clean(text) if text is not None else random_input(loaded)
    weights, rows, cols, answer = attention(loaded, text, kind)
    layer_weights = weights[layer]
    if head is None:
        panels = [heatmap(layer_weights[h], rows, cols, f"head {h}") for h in range(num_heads)]
    elif head == "mean":
        panels = [heatmap(layer_weights.mean(0), rows, cols, "mean of heads")]
    else:
        panels = [heatmap(layer_weights[int(head)], rows, cols, f"head {head}")]
    expected = loaded.setup.task.solve(text)
    if expected is None:
        verdict = "no reference answer"
    else:
        verdict = "right" if answer == expected else f"wrong, expected {expected}"
    title = (
        f"{kind} attention, layer {layer} of {loaded.run.path}: "
        f"input {text} -> output {answer} ({verdict})"
    )
    view = attention_view(panels, title)
    if save is None:
        console.print(view)
        return
    recorder = Console(record=True, width=max(console.width, 40 + 2 * len(cols) * len(panels)))
    recorder.print(view)
    if save.suffix.lower() == ".svg":
        picture = recorder.export_svg(title="jab show-attention")
    else:
        picture = recorder.export_html()
    atomic_write(save, picture.encode())
    console.print(f"Saved {save}")
