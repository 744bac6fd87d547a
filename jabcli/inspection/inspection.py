"""Looking at a trained run: what `jab eval`, `compare`, `predict` and `show-attention`
compute. Every function returns values; the CLI decides how to show them."""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import NotRequired  # typing has it from Python 3.11

from jabcli.core.errors import JabError, Note, suggest
from jabcli.core.settings import short_name
from jabcli.core.spread import Spread
from jabcli.core.tokenizer import EOS_ID, clean
from jabcli.evaluation import layout
from jabcli.evaluation.evaluate import FIGURES, Figures, HeldOut, Scores, evaluate
from jabcli.model.experiment import Experiment
from jabcli.runs import runs
from jabcli.runs.runs import Run
from jabcli.tasks import derived
from jabcli.training import checkpoints

INSPECTION_STREAM = 4  # `jab eval` draws from its own stream, apart from training's (training.py)
DECODE_KEY = 0  # `jab predict` and `show-attention` draw random positions and hints from it
# What `jab show-attention` draws: attention, or a recurrent form's memory, whose columns
# are the memory's cells (described here, for the picture's key).
MEMORY_KINDS = {
    "stack": "the stack's cells, 0 its top",
    "tape": "the tape's cells, 0 under its head",
}
ATTENTION_KINDS = ("cross", "encoder", "decoder", *MEMORY_KINDS)
SLOT_LABEL = "□"  # an empty answer slot of the encoder form (encoder_only.py)


@dataclass
class Loaded:
    """A run's experiment and the parameters of one of its checkpoints."""

    run: Run
    experiment: Experiment
    params: Any
    step: int


def load(path: Path | None, checkpoint: str = "latest") -> Loaded:
    """One run (one seed) and its checkpoint `checkpoint`."""
    return load_run(Run.open(path), checkpoint)


def load_runs(path: Path | None, checkpoint: str = "latest") -> tuple[Path, list[Loaded]]:
    """A run, or every seed of a group, with the checkpoint `checkpoint` of each."""
    path, seeds = runs.open_runs(path)
    if len(seeds) > 1:
        runs.group_config(path, seeds)  # seeds that differ are no group
    first = load_run(seeds[0], checkpoint)
    loaded = [first]
    for run in seeds[1:]:  # one experiment for every seed: decoding is compiled once
        loaded.append(load_run(run, checkpoint, first.experiment))
    return path, loaded


def load_run(run: Run, checkpoint: str, experiment: Experiment | None = None) -> Loaded:
    """The checkpoint `checkpoint` of `run`, with its own experiment or the given one. A
    damaged manifest is rebuilt and a damaged latest or best checkpoint passed over for
    the newest (or best) valid one, each told as a `Note` (`checkpoints.chosen`); the
    checkpoint is checked against the config before the config is built, so an edited
    config is named as such."""
    saved = run.load_config()  # a config that does not read is no damaged checkpoint
    found = checkpoints.repaired(run, note)
    entry, arrays = checkpoints.chosen(run, found, checkpoint, note)
    experiment = experiment or Experiment.create(*saved)
    params = checkpoints.params_of(experiment, arrays, f"checkpoint {entry['file']} in {run.path}")
    return Loaded(run, experiment, params, entry["step"])


def note(message: str) -> None:
    """Tell the user what loading a run did in their stead: a `Note` warning, which the
    command line prints as one line on stderr."""
    warnings.warn(message, Note, stacklevel=2)


def check_lengths(loaded: Loaded, min_len: int, max_len: int) -> None:
    experiment = loaded.experiment
    task = experiment.task
    if min_len < task.min_length or min_len > max_len:
        raise JabError(
            f"lengths must satisfy {task.min_length} <= shortest <= longest for task "
            f"{experiment.config.task.name}, got {min_len} and {max_len}"
        )
    experiment.check_length(max_len, f"length {max_len}")


def default_lengths(runs: list[Loaded]) -> tuple[int, int]:
    """From the shortest training length (that every task accepts) to twice the longest,
    cut to the longest input every run takes."""
    configs = [one.experiment.config for one in runs]
    low = max(
        min(c.task.min_len for c in configs), *(one.experiment.task.min_length for one in runs)
    )
    high = 2 * max(c.task.max_len for c in configs)
    return low, max(low, min(high, *(one.experiment.longest_input() for one in runs)))


def evaluation_key(seed: int):
    """The key `jab eval --seed` draws its held-out sample and positions from."""
    import jax

    return jax.random.fold_in(jax.random.PRNGKey(seed), INSPECTION_STREAM)


class Evaluated(Scores):
    """What `jab eval` measures of a run: its held-out `Scores`, which checkpoint of
    which run, and the lengths measured (`missing_lengths`: those a data file has no
    held-out pair at); of a group of seeds, the figures over seeds (`combine`) and each
    seed's own under `seeds`."""

    run: str
    step: int
    task: str
    pos_encoding: str
    arch: str  # the model's form (model.arch)
    train_lengths: list[int]
    min_len: int
    max_len: int
    missing_lengths: NotRequired[list[int]]
    seeds: NotRequired[list[Evaluated]]


def evaluate_run(loaded: Loaded, held_out: HeldOut, *, seed: int) -> Evaluated:
    """Held-out accuracy of a run on the inputs `held_out` names (its lengths None: the
    run's training lengths), drawn from `seed`."""

    cfg = loaded.experiment.config
    t = cfg.task
    min_len = t.min_len if held_out.min_len is None else held_out.min_len
    max_len = t.max_len if held_out.max_len is None else held_out.max_len
    check_lengths(loaded, min_len, max_len)
    held_out = dataclasses.replace(held_out, min_len=min_len, max_len=max_len)
    result = evaluate(loaded.experiment, loaded.params, evaluation_key(seed), held_out)
    if held_out.each_length:  # a data file may have no held-out pairs at some lengths
        result["missing_lengths"] = [
            n for n in range(min_len, max_len + 1) if n not in result["per_length"]
        ]
    return {
        "run": str(loaded.run.path),
        "step": loaded.step,
        "task": short_name(t.name),
        "pos_encoding": cfg.model.positions,
        "arch": cfg.model.arch,
        "train_lengths": [t.min_len, t.max_len],
        "min_len": min_len,
        "max_len": max_len,
        **result,
    }


def evaluate_runs(path: Path, seeds: list[Loaded], held_out: HeldOut, *, seed: int) -> Evaluated:
    """`evaluate_run` of a run; of a group, every seed's on the same held-out sample,
    combined (see `combine`)."""
    results = [evaluate_run(one, held_out, seed=seed) for one in seeds]
    return results[0] if len(results) == 1 else combine(str(path), results)


def combine(path: str, results: list[Evaluated]) -> Evaluated:
    """Several seeds' results as one: each accuracy, overall and per length, is the median
    over seeds, with [min, max] under `<name>_range`; `seeds` holds every seed's result,
    `examples` the first seed's."""

    def spread(rows: list[Figures]) -> dict[str, Any]:
        figures = {}
        for name in (name for name in FIGURES if name in rows[0]):
            median, low, high = Spread.of(row[name] for row in rows)
            figures[name] = float(median)
            figures[f"{name}_range"] = [low, high]
        return figures

    first = results[0]
    lengths = set.intersection(*(set(r["per_length"]) for r in results))
    return {
        **first,
        "run": path,
        "step": min(r["step"] for r in results),
        **spread(results),
        "per_length": {
            n: {
                "samples": first["per_length"][n]["samples"],
                **spread([r["per_length"][n] for r in results]),
            }
            for n in sorted(lengths)
        },
        "seeds": results,
    }


def encode_input(experiment: Experiment, text: str) -> list[int]:
    """One user input as token ids, or the one-line error saying why the run cannot take it."""
    if not clean(text):
        raise JabError("an input is empty; give at least one symbol")
    row = experiment.tokenizer.encode(text, experiment.config.task.alphabet)
    experiment.task.check_input(clean(text))
    experiment.check_length(len(row), f"an input of length {len(row)}")
    return row


def input_errors(loaded: Loaded, texts: list[str]) -> dict[int, str]:
    """The inputs the run cannot take, by their index in `texts`, each with why."""
    errors = {}
    for i, text in enumerate(texts):
        try:
            encode_input(loaded.experiment, text)
        except JabError as err:
            errors[i] = str(err)
    return errors


def encode_inputs(loaded: Loaded, texts: list[str]) -> np.ndarray:
    """User inputs -> a padded source batch, with one-line errors for bad input."""
    experiment = loaded.experiment
    if not texts:
        raise JabError("give at least one input, for example: jab predict 12345")
    rows = [encode_input(experiment, text) for text in texts]
    import jax

    key = jax.random.fold_in(jax.random.PRNGKey(DECODE_KEY), 1)  # not the positions' key
    return layout.source_rows(derived.model_sources(experiment.task, rows, key))


def decode_batch(loaded: Loaded, src: np.ndarray) -> tuple[np.ndarray, Any]:
    """Greedy answers [B, max_out] to a source batch, and the positions they were read at."""
    import jax

    from jabcli.evaluation.decode import answered, row_keys

    experiment = loaded.experiment
    max_out = layout.answer_width(experiment.task, src.shape[1])
    keys = row_keys(jax.random.PRNGKey(DECODE_KEY), np.arange(len(src)))
    out, positions = answered(experiment, loaded.params, keys, src, max_out)
    return np.asarray(out), positions


def predict(loaded: Loaded, texts: list[str]) -> list[dict[str, Any]]:
    """Each input's answer, its reference and whether they agree (None: no reference);
    the inputs decoded in chunks of similar length, as many as they are."""
    import jax

    from jabcli.evaluation.decode import decode_rows

    src = encode_inputs(loaded, texts)
    max_out = layout.answer_width(loaded.experiment.task, src.shape[1])
    key = jax.random.PRNGKey(DECODE_KEY)
    outputs = decode_rows(loaded.experiment, loaded.params, key, src, max_out)
    rows = []
    for text, out in zip(texts, outputs):
        answer = loaded.experiment.tokenizer.decode(out)
        expected = loaded.experiment.task.solve(clean(text))
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
    """A held-out input drawn afresh each time."""
    import jax

    from jabcli.evaluation.evaluate import draw_held_out

    seed = int.from_bytes(os.urandom(4), "little")
    t = loaded.experiment.config.task
    batch = draw_held_out(loaded.experiment, evaluation_key(seed), 1, t.min_len, t.max_len)
    return loaded.experiment.tokenizer.decode(np.asarray(jax.device_get(batch.src[0])))


@dataclass
class AttentionMap:
    """One kind of attention while answering an input: weights [layers, heads, rows,
    cols], with the tokens labelling rows (queries) and columns (keys)."""

    kind: str
    input: str
    answer: str
    expected: str | None
    weights: np.ndarray
    rows: list[str]
    cols: list[str]
    # For a recurrent form's memory (kind "stack" or "tape"): what its columns are.
    memory: str | None = None


def attention(loaded: Loaded, text: str | None, kind: str | None = None) -> AttentionMap:
    """Decode `text` (default: a random held-out input) and return the `kind` attention
    ("cross", "encoder" or "decoder"; default: the form's first, cross for the
    encoder-decoder) of the pass that produced the answer. A decoder-only model's
    "decoder" attention is over the input, then the answer. A Stack-RNN's or Tape-RNN's
    "stack" or "tape" is its memory instead (`one_pass_picture`)."""
    from jabcli.evaluation.decode import attention_weights

    experiment = loaded.experiment
    form = experiment.form
    if not form.attention:
        raise JabError(f"a model.arch={form.name} run has no attention and no memory to draw")
    kind = kind or form.attention[0]
    if kind not in ATTENTION_KINDS:
        raise JabError(f"attention kind must be one of {', '.join(ATTENTION_KINDS)}, got {kind!r}")
    if kind not in form.attention:
        missing = kind if kind in MEMORY_KINDS else f"{kind} attention"
        raise JabError(
            f"a model.arch={form.name} run has no {missing}: it has "
            f"{', '.join(form.attention)} (--kind {form.attention[0]})"
        )
    text = clean(text) if text is not None else random_input(loaded)
    src = encode_inputs(loaded, [text])
    outputs, (src_positions, tgt_positions) = decode_batch(loaded, src)
    out = outputs[0]
    produced = layout.produced(out)
    if experiment.one_pass:
        return one_pass_picture(
            loaded, kind, text, src, out, produced, src_positions, tgt_positions
        )
    tgt_in = layout.decoder_input(produced)
    # The positions decoding read, so the picture shows the computation that answered.
    weights = attention_weights(
        experiment, loaded.params, src, tgt_in, src_positions, tgt_positions[:, : tgt_in.shape[1]]
    )
    tokens = experiment.tokenizer.tokens
    src_labels = [tokens[i] for i in src[0]]
    out_labels = [tokens[i] for i in produced]
    in_labels = [tokens[i] for i in tgt_in[0]]
    if form.prefixed:  # one causal sequence: the input's tokens, then the answer's
        out_labels, in_labels = src_labels + out_labels, src_labels + in_labels
    matrices, rows, cols = {
        "cross": (weights.cross, out_labels, src_labels),
        "decoder": (weights.decoder, out_labels, in_labels),
        "encoder": (weights.encoder, src_labels, src_labels),
    }[kind]
    return AttentionMap(
        kind=kind,
        input=text,
        answer=experiment.tokenizer.decode(out),
        expected=experiment.task.solve(text),
        weights=np.asarray(matrices)[:, 0],
        rows=rows,
        cols=cols,
    )


def one_pass_picture(
    loaded: Loaded,
    kind: str,
    text: str,
    src: np.ndarray,
    out: np.ndarray,
    produced: np.ndarray,
    src_positions,
    tgt_positions,
) -> AttentionMap:
    """The one pass that answered `text` (source `src` [1, S], answer `out`, `produced` up
    to its <eos>), over the input and every answer slot: rows are the tokens read, the
    slots labelled SLOT_LABEL with the token each wrote. The encoder form's self-attention
    (queries and keys), or a Stack-RNN's or Tape-RNN's memory (`kind` "stack" or "tape"),
    drawn as attention is, one layer of one head: after each token read, the size
    (Euclidean norm) of each cell's vector, the largest 1 (columns: the cells, numbered by
    their last two digits; the trailing cells no step wrote, left out)."""
    from jabcli.evaluation.decode import attention_weights
    from jabcli.model.encoder_only import answer_slots

    experiment = loaded.experiment
    slots = np.zeros_like(tgt_positions)  # only their width is read, as decoding did
    seen = attention_weights(experiment, loaded.params, src, slots, src_positions, tgt_positions)
    count = src.shape[1] + int(answer_slots(experiment.task, src, slots.shape[1])[0])
    read = src[0]
    if experiment.config.model.answer_slots == "exact":  # the paper's: no <eos>, fewer slots
        read = read[read != EOS_ID]
        count = len(read) + int(derived.exact_slots(experiment.task, src)[0])
    tokens = experiment.tokenizer.tokens
    written = ["$" if i == EOS_ID else tokens[i] for i in produced]
    written = written[: count - len(read)]  # exact slots: the <eos> past them is no slot's
    rows = [tokens[i] for i in read] + [f"{SLOT_LABEL}→{token}" for token in written]
    rows += [SLOT_LABEL] * (count - len(rows))
    answered = {
        "input": text,
        "answer": experiment.tokenizer.decode(out),
        "expected": experiment.task.solve(text),
        "rows": rows,
    }
    if kind in MEMORY_KINDS:
        sizes = np.linalg.norm(np.asarray(seen.cells, np.float64)[0, :count], axis=-1)  # [N, M]
        written_cells = np.flatnonzero(sizes.max(axis=0) > 0)
        sizes = sizes[:, : written_cells[-1] + 1 if len(written_cells) else 1]
        return AttentionMap(
            kind=kind,
            weights=(sizes / max(sizes.max(), 1e-30))[None, None],
            cols=[str(cell % 100) for cell in range(sizes.shape[1])],
            memory=MEMORY_KINDS[kind],
            **answered,
        )
    return AttentionMap(
        kind="encoder",
        weights=np.asarray(seen.encoder)[:, 0, :, :count, :count],
        cols=rows[: src.shape[1]] + [SLOT_LABEL] * (count - src.shape[1]),
        **answered,
    )


METRICS = ("loss", "token_acc", "seq_acc", "eval_token_acc", "eval_seq_acc", "lr", "grad_norm")


@dataclass
class Curve:
    """One metric of a run over its steps; of a group of seeds, the median at each step
    with the min and max as a band (`low`, `high`; None for one run)."""

    name: str
    metric: str
    steps: list[int]
    values: list[float]
    low: list[float] | None = None
    high: list[float] | None = None


def curve(path: Path | None, metric: str) -> Curve:
    """`metric` as recorded in metrics.jsonl by a run, or by every seed of a group (at the
    steps every seed has)."""
    if metric not in METRICS:
        raise JabError(
            f"unknown metric {metric!r}{suggest(metric, METRICS)}; one of: {', '.join(METRICS)}"
        )
    path, seeds = runs.open_runs(path)
    series = [
        {r["step"]: r[metric] for r in run.read_metrics() if r.get(metric) is not None}
        for run in seeds
    ]
    steps = sorted(set.intersection(*(set(one) for one in series)))
    if not steps:
        kind = "no held-out evaluation" if metric.startswith("eval") else "no metrics"
        raise JabError(f"{path} has {kind} yet (nothing to draw for {metric})")
    values = np.array([[one[step] for step in steps] for one in series])
    name = str(path)
    if len(seeds) == 1:
        return Curve(name, metric, steps, values[0].tolist())
    return Curve(
        f"{name} (median of {len(seeds)} seeds)",
        metric,
        steps,
        np.median(values, axis=0).tolist(),
        values.min(axis=0).tolist(),
        values.max(axis=0).tolist(),
    )
