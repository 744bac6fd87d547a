"""Looking at a trained run: a run or group of seeds loaded at a checkpoint, and what `jab
eval`, `compare` and `predict` compute on it (a group's evaluation folded over its seeds
by `combine`). `show-attention`'s is attention.py's, `curves`' curves.py's. Every function
returns values; the CLI decides how to show them."""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np
from typing_extensions import NotRequired  # typing has it from Python 3.11

from jabcli.core.errors import JabError, Note
from jabcli.core.settings import short_name
from jabcli.core.spread import Spread
from jabcli.core.tokenizer import clean
from jabcli.evaluation import layout
from jabcli.evaluation.evaluate import HeldOut, evaluate
from jabcli.evaluation.figures import FIGURES, Figures, Scores
from jabcli.experiment.experiment import Experiment
from jabcli.runs import runs
from jabcli.runs.runs import Run
from jabcli.tasks import derived
from jabcli.training import checkpoints, manifest

INSPECTION_STREAM = 4  # `jab eval` draws from its own stream, apart from training's (training.py)
DECODE_KEY = 0  # `jab predict` and `show-attention` draw random positions and hints from it


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
    found = manifest.repaired(run, note)
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
    evaluated: Evaluated = {
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
    if held_out.each_length:  # a data file may have no held-out pairs at some lengths
        evaluated["missing_lengths"] = [
            n for n in range(min_len, max_len + 1) if n not in result["per_length"]
        ]
    return evaluated


def evaluate_runs(path: Path, seeds: list[Loaded], held_out: HeldOut, *, seed: int) -> Evaluated:
    """`evaluate_run` of a run; of a group, every seed's on the same held-out sample,
    combined (see `combine`)."""
    results = [evaluate_run(one, held_out, seed=seed) for one in seeds]
    return results[0] if len(results) == 1 else combine(str(path), results)


def combine(path: str, results: list[Evaluated]) -> Evaluated:
    """Several seeds' results as one: each accuracy, overall and per length, is the median
    over seeds, with [min, max] under `<name>_range`; `seeds` holds every seed's result,
    `examples` the first seed's."""

    def over_seeds(rows: Sequence[Figures]) -> dict[str, float | list[float]]:
        figures: dict[str, float | list[float]] = {}
        for name in (name for name in FIGURES if name in rows[0]):
            figures.update(Spread.of(row[name] for row in rows).keyed(name))
        return figures

    first = results[0]
    lengths = set.intersection(*(set(r["per_length"]) for r in results))
    combined = {
        **first,
        "run": path,
        "step": min(r["step"] for r in results),
        **over_seeds(results),
        "per_length": {
            n: {
                "samples": first["per_length"][n]["samples"],
                **over_seeds([r["per_length"][n] for r in results]),
            }
            for n in sorted(lengths)
        },
        "seeds": results,
    }
    return cast(Evaluated, combined)  # a seed's record, its figures those over the seeds


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


class Prediction(TypedDict):
    """An input, the model's answer, the task's reference (None: it has none) and whether
    they agree (None: no reference): a row of `jab predict`."""

    input: str
    output: str
    expected: str | None
    correct: bool | None


def predict(loaded: Loaded, texts: list[str]) -> list[Prediction]:
    """Each input's answer, its reference and whether they agree (None: no reference);
    the inputs decoded in chunks of similar length, as many as they are."""
    import jax

    from jabcli.evaluation.decode import decode_rows

    src = encode_inputs(loaded, texts)
    max_out = layout.answer_width(loaded.experiment.task, src.shape[1])
    key = jax.random.PRNGKey(DECODE_KEY)
    outputs = decode_rows(loaded.experiment, loaded.params, key, src, max_out)
    rows: list[Prediction] = []
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
