"""The paper's own code beside jab on the Chomsky-hierarchy protocol (Delétang et al.
2023): its samplers against jab's reference answers, its Transformer and jab's paper form
(configs/paper_transformer.yaml) on one set of weights, and its Transformer trained by its
own training loop beside jab's paper form at the same settings.

Not part of the test suite: it needs the paper's code, which jab does not ship. Get it,
and what it imports beyond jab's own dependencies (keep jax and jaxlib as they are):

    git clone https://github.com/google-deepmind/neural_networks_chomsky_hierarchy
    pip install chex dm-tree tqdm absl-py einshape
    python benchmarks/chomsky_side_by_side.py neural_networks_chomsky_hierarchy \\
        [--tasks even_pairs,bucket_sort,cycle_navigation,reverse] [--seeds 3] [--steps 1000]
        [--sides paper,jab] [--skip-check] [--skip-same-weights] [--skip-train]
    python benchmarks/chomsky_side_by_side.py neural_networks_chomsky_hierarchy --speed-only \\
        [--steps 500] [--repeats 3] [--before FOLDER]

`--speed-only` trains and times, nothing else (`speed_only`): the speed table of
docs/performance.md, with `--before` a folder holding another version's jabcli
(`git archive REV jabcli | tar -x -C FOLDER`) as a third side.

What it does, one process at a time (each run in a fresh child process of its own):

0. One model, two codes. For each of the fifteen tasks, the paper's Transformer (its
   builder, dropout 0) is initialised from seed 0, its weights are loaded into jab's
   model with configs/paper_transformer.yaml (`paper_to_jab`), and both read one batch
   of the paper's sampler at lengths 1-100: the largest difference of their logits over
   the task's classes, and how many answers differ.
1. Samplers. Every one of the fifteen tasks (the paper's names and options: brackets
   with `*`, bucket_sort on five symbols) draws `--check-samples` inputs at each of
   `--check-lengths` with the paper's `sample_batch`; each input is written in jab's
   alphabet and jab's `solve` (the task as `studies/chomsky_paper.yaml` sets it: odds_first
   counted from 0, ...) must give the paper's answer. Inputs shorter than the jab task's
   shortest are counted apart, as are inputs jab's `check_input` refuses.
2. Training. For each task of `--tasks` and each seed: the paper's Transformer encoder
   (its builder's defaults: 5 layers of width 64, 8 heads, dropout 0.1, sinusoidal
   positions) trained by its `TrainingWorker` (Adam at 1e-3, gradients clipped at 1,
   batch 128, lengths uniform in 1-40), built as its `experiments/example.py` builds it
   (empty answer slots, its loss and accuracy); and jab's paper form,
   configs/paper_transformer.yaml (the paper's model and training, the study's base).
   Both train `--steps` updates from the same seed number. Steps per second leave out
   each side's first 100 steps, where both compile (jab its one program for lengths up
   to 40; the paper's code one per length it meets, most of the 40 by then), and on the
   paper's side every 100 steps up to its last compilation where 100 steps are left
   after it; they count the rest of its loop: the paper's own sampling included, jab's
   held-out evaluation (once, at the end) not.
3. Score. The paper's score, per-symbol accuracy on the answer at its true length,
   averaged over lengths (each length weighs the same): on 1-40 and on 41, 51, ..., 491,
   `--samples` inputs per length. The paper's side as its `range_evaluation` computes it
   (its `apply` with a random key, so dropout is on; argmax over the task's classes), and
   with the same weights in its builder's model without dropout, as jab scores; jab's as
   `jab eval --force-length` does (`forced_symbol_acc`, on inputs jab draws).

Prints the sampler table and one markdown table (median [min-max] over seeds), and writes
every figure to `--out` (default benchmarks/side_by_side.json) as each run ends;
`--resume` keeps the runs already there.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STUDY = HERE.parent / "studies" / "chomsky_paper.yaml"
PRESET = HERE.parent / "configs" / "paper_transformer.yaml"  # the study's base.set
PACKAGE = "neural_networks_chomsky_hierarchy"  # how the paper's modules import each other

TRAIN_LENGTHS = list(range(1, 41))
LONG_LENGTHS = list(range(41, 500, 10))  # 41, 51, ..., 491; --long-lengths scores fewer
PAPER_CACHE = Path(tempfile.gettempdir()) / "chomsky_side_by_side_xla"
WARM = 100  # steps left out of steps/s on both sides: the first compilations
BATCH = 128
LEARNING_RATE = 1e-3

# jab's task name -> the paper's (experiments/constants.py, TASK_BUILDERS).
PAPER_NAMES = {
    "even_pairs": "even_pairs",
    "modular_arithmetic": "modular_arithmetic",
    "parity_check": "parity_check",
    "cycle_navigation": "cycle_navigation",
    "stack_manipulation": "stack_manipulation",
    "reverse": "reverse_string",
    "modular_arithmetic_brackets": "modular_arithmetic_brackets",
    "solve_equation": "solve_equation",
    "duplicate": "duplicate_string",
    "missing_duplicate": "missing_duplicate_string",
    "odds_first": "odds_first",
    "binary_addition": "binary_addition",
    "binary_multiplication": "binary_multiplication",
    "compute_sqrt": "compute_sqrt",
    "bucket_sort": "bucket_sort",
}

# The paper's input symbols, by their index in its one-hot code, as jab writes them
# (the paper's task files define the codes; jab's alphabets are in jabcli/tasks/).
INPUT_SYMBOLS = {
    "modular_arithmetic": "01234+-*_",
    "cycle_navigation": "012",
    "stack_manipulation": "01-ab",  # 2 pop, 3 push 0, 4 push 1
    "modular_arithmetic_brackets": "01234+-*()x=",
    "solve_equation": "01234+-()x=",
    "missing_duplicate": "01_#",
    "binary_addition": "01+",
    "binary_multiplication": "01*",
    "bucket_sort": "01234",
}
# Answers that end in the paper's termination symbol 2, padded with 0s after it.
TERMINATED = {"stack_manipulation", "binary_addition", "binary_multiplication"}


def paper_modules(path: Path) -> types.SimpleNamespace:
    """The paper's modules, imported from its clone at `path` whatever the folder is named
    (its files import each other as `neural_networks_chomsky_hierarchy.*`)."""
    if not (path / "experiments" / "training.py").is_file():
        raise SystemExit(
            f"{path} is not the paper's code (no experiments/training.py); get it with\n"
            "  git clone https://github.com/google-deepmind/neural_networks_chomsky_hierarchy"
        )
    package = types.ModuleType(PACKAGE)
    package.__path__ = [str(path.resolve())]
    sys.modules[PACKAGE] = package

    def module(name: str):
        return importlib.import_module(f"{PACKAGE}.{name}")

    return types.SimpleNamespace(
        constants=module("experiments.constants"),
        curriculum=module("experiments.curriculum"),
        training=module("experiments.training"),
        utils=module("experiments.utils"),
        transformer=module("models.transformer"),
    )


def paper_task(paper, name: str):
    """The paper's task for jab's task `name`, built as its experiments build it. Its
    modular_arithmetic keeps its operators as a generator, which the first length its
    jitted sampler traces uses up (every later length of 3 or more then fails); a tuple
    of the same operators stands in for it."""
    task = paper.constants.TASK_BUILDERS[PAPER_NAMES[name]]()
    if isinstance(getattr(task, "_operators", None), types.GeneratorType):
        task._operators = tuple(task._operators)
    return task


def study_settings() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """jab's settings for the paper's shape (studies/chomsky_paper.yaml): the base's
    `set`, and each task's own."""
    import yaml

    study = yaml.safe_load(STUDY.read_text())
    rows = {row["task"]: row.get("set", {}) for row in study["rows"]}
    return study["base"]["set"], rows


def jab_experiment(name: str, sets: dict[str, Any] | None = None, **options):
    """jab's experiment for task `name`: configs/paper_transformer.yaml (the paper's model
    and training, the study's base), the task's options as the study sets them, then
    `sets`."""
    from jabcli.experiment.resolve import resolve

    _, rows = study_settings()
    return resolve(name, PRESET, overrides={**rows[name], **(sets or {})}, **options)


def jab_task(name: str):
    """The jab task `name` with the protocol's options, as the study builds it."""
    return jab_experiment(name).task


# 1. Samplers ------------------------------------------------------------------------


def as_text(codes, symbols: str) -> str:
    return "".join(symbols[int(c)] for c in codes)


def paper_answer(name: str, output) -> str:
    """The paper's answer (one-hot [classes] or [T, classes]) as jab writes it."""
    import numpy as np

    codes = np.argmax(np.asarray(output), axis=-1)
    if codes.ndim == 0:  # a class task: the class's digit
        return str(int(codes))
    codes = list(codes)
    if name in TERMINATED:  # the answer ends where the termination symbol is
        codes = codes[: codes.index(2)]
    return as_text(codes, INPUT_SYMBOLS.get(name, "01234"))


def check_samplers(paper, tasks: list[str], lengths: list[int], samples: int, seed: int):
    """For each task, the paper's inputs and answers against jab's `solve`: a row per
    task, with up to three disagreements written out."""
    import jax
    import numpy as np

    from jabcli.core.errors import JabError

    random.seed(seed)
    np.random.seed(seed)
    rows = []
    for name in tasks:
        task = paper_task(paper, name)
        ours = jab_task(name)
        symbols = INPUT_SYMBOLS.get(name, "01234")
        row = {"task": name, "checked": 0, "disagree": 0, "refused": 0, "too_short": 0}
        examples = []
        tic = time.perf_counter()
        for length in lengths:
            key = jax.random.PRNGKey(seed * 100_003 + length)
            batch = task.sample_batch(key, samples, length)
            inputs = np.argmax(np.asarray(batch["input"]), axis=-1)
            for codes, output in zip(inputs, np.asarray(batch["output"])):
                text, expected = as_text(codes, symbols), paper_answer(name, output)
                if len(text) < ours.min_length:
                    row["too_short"] += 1
                    continue
                try:
                    ours.check_input(text)
                except JabError:
                    row["refused"] += 1
                    continue
                row["checked"] += 1
                answer = ours.solve(text)
                if answer != expected:
                    row["disagree"] += 1
                    if len(examples) < 3:
                        examples.append({"input": text, "paper": expected, "jab": answer})
        row["examples"] = examples
        row["seconds"] = round(time.perf_counter() - tic, 1)
        rows.append(row)
        print(
            f"  {name}: {row['checked']} checked, {row['disagree']} disagree, "
            f"{row['refused']} refused, {row['too_short']} shorter than jab's shortest",
            flush=True,
        )
    return rows


def sampler_table(rows: list[dict[str, Any]], lengths: list[int], samples: int) -> str:
    lines = [
        f"The paper's samplers against jab's `solve`: {samples} inputs at each of "
        f"{len(lengths)} lengths ({describe(lengths)})",
        "",
        "| task | inputs checked | disagreements | refused by jab | shorter than jab takes |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['task']} | {row['checked']} | {row['disagree']} | {row['refused']} "
            f"| {row['too_short']} |"
        )
    for row in rows:
        for example in row["examples"]:
            lines.append(
                f"\n{row['task']}: {example['input']!r}: paper {example['paper']!r}, "
                f"jab {example['jab']!r}"
            )
    return "\n".join(lines)


def describe(lengths: list[int]) -> str:
    if lengths == list(range(lengths[0], lengths[-1] + 1)):
        return f"{lengths[0]}-{lengths[-1]}"
    return ", ".join(map(str, lengths))


# 0. One model, two codes ---------------------------------------------------------------


def paper_to_jab(paper_params: dict, experiment, name: str, input_size: int) -> dict:
    """The paper's encoder's parameters (`make_transformer_encoder` under
    `make_model_with_empty_targets`) as jab's encoder form with the paper's options holds
    them: the one-hot embedding's rows at the token ids of the paper's symbols (its
    empty-slot row at the slot token's), the query and the key/value projections fused as
    jab fuses them, the output layer's columns at the ids of the task's classes; jab's
    other embedding rows and output columns are zero (no input holds those tokens, and
    model.outputs=classes masks the logits)."""
    import numpy as np

    from jabcli.model.encoder_only import SLOT_ID, class_ids

    tokenizer, m = experiment.tokenizer, experiment.config.model
    vocab, d = len(tokenizer), m.d_model
    symbols = INPUT_SYMBOLS.get(name, "01234")[:input_size]
    embeddings = np.zeros((vocab, d), np.float32)
    rows = np.asarray(paper_params["transformer_encoder/linear"]["w"])
    embeddings[tokenizer.ids(symbols)] = rows[:input_size]
    embeddings[SLOT_ID] = rows[input_size]
    classes = class_ids(m, experiment.task)
    logits_w, logits_b = np.zeros((d, vocab), np.float32), np.zeros(vocab, np.float32)
    out = paper_params["linear"]
    logits_w[:, classes] = np.asarray(out["w"])[:, : len(classes)]
    logits_b[classes] = np.asarray(out["b"])[: len(classes)]
    top, layer = "encoder_only/~/transformer/~/", "transformer_encoder/"
    found = {
        f"{top}embed": {"embeddings": embeddings},
        f"{top}to_logits": {"w": logits_w, "b": logits_b},
    }
    for i in range(m.num_layers):
        mine = f"{top}encoder_{i}/~/"
        attention = f"{layer}multi_head_dot_product_attention{'_' + str(i) if i else ''}/"
        q, k, v, o = (
            np.asarray(paper_params[f"{attention}linear{s}"]["w"]) for s in ("", "_1", "_2", "_3")
        )
        found[f"{mine}self_attention/~/query"] = {"w": q}
        found[f"{mine}self_attention/~/key_value"] = {"w": np.concatenate([k, v], axis=1)}
        found[f"{mine}self_attention/~/output"] = {"w": o}
        for residual, norm in (("attention_residual", 2 * i), ("feed_forward_residual", 2 * i + 1)):
            suffix = f"_{norm}" if norm else ""
            found[f"{mine}{residual}/~/norm"] = dict(paper_params[f"{layer}layer_norm{suffix}"])
        for part, linear in (("hidden", 2 * i + 1), ("out", 2 * i + 2)):
            found[f"{mine}feed_forward/~/{part}"] = dict(paper_params[f"{layer}linear_{linear}"])
    return found


def same_weights(paper_path: Path, name: str, lengths: list[int], samples: int) -> dict:
    """The paper's Transformer and jab's encoder form with configs/paper_transformer.yaml
    (the study's settings), one set of weights, on one batch of the paper's sampler at
    each length: the largest difference of their logits over the task's classes, and
    how often their answers (argmax) differ. A length where the two lay out another
    number of answer slots is not compared (binary_addition: the paper's code has one
    more, after the longest answer's end). Dropout off on both sides (the paper's
    builder with dropout 0, jab's forward not training); the weights are the paper's
    initialisation from seed 0."""
    import haiku as hk
    import jax
    import numpy as np

    from jabcli.model.encoder_only import class_ids
    from jabcli.tasks import derived

    paper = paper_modules(paper_path)
    task = paper_task(paper, name)
    single = task.output_length(10) == 1
    experiment = jab_experiment(name, {"model.dropout": 0.0})
    m = experiment.config.model
    model = paper.transformer.make_transformer_encoder(
        output_size=task.output_size,
        return_all_outputs=True,
        dropout_prob=0.0,
        embedding_dim=m.d_model,
        num_layers=m.num_layers,
        num_heads=m.num_heads,
    )
    model = hk.transform(paper.utils.make_model_with_empty_targets(model, task, 0, single))
    first = task.sample_batch(jax.random.PRNGKey(0), 2, 10)
    params = model.init(jax.random.PRNGKey(0), first["input"])
    mine = paper_to_jab(params, experiment, name, task.input_size)
    classes = class_ids(m, experiment.task)[: task.output_size]
    symbols = INPUT_SYMBOLS.get(name, "01234")
    worst, differ, count, slots = 0.0, 0, 0, set()
    for length in lengths:
        batch = task.sample_batch(jax.random.PRNGKey(length), samples, length)
        key = jax.random.PRNGKey(1)  # at rate 0 its dropout drops nothing
        theirs = np.asarray(model.apply(params, key, batch["input"]))
        theirs = theirs[:, None] if single else theirs
        codes = np.argmax(np.asarray(batch["input"]), axis=-1)
        src = np.asarray(
            [[*experiment.tokenizer.ids(as_text(row, symbols)), 2] for row in codes], np.int32
        )
        if int(derived.exact_slots(experiment.task, src[:1])[0]) != theirs.shape[1]:
            slots.add(length)  # another sequence: not the same computation
            continue
        width = derived.answer_width_for(experiment.task, src.shape[1])
        logits, _ = experiment.model.forward(mine, None, src, np.zeros((samples, width), np.int32))
        ours = np.asarray(logits)[:, : theirs.shape[1], classes]
        worst = max(worst, float(np.max(np.abs(ours - theirs))))
        differ += int(np.sum(np.argmax(ours, -1) != np.argmax(theirs, -1)))
        count += theirs.shape[0] * theirs.shape[1]
    compared = [n for n in lengths if n not in slots]
    return {"task": name, "lengths": describe(compared) if compared else "none",
            "max_abs_diff": worst, "answers_differ": differ, "answers": count,
            "other_slots": sorted(slots)}  # fmt: skip


def same_weights_table(rows: list[dict]) -> str:
    lines = [
        "| task | lengths | largest logit difference | answers that differ |",
        "|---|---|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['task']} | {row['lengths']} | {row['max_abs_diff']:.1e} "
            f"| {row['answers_differ']} of {row['answers']} |"
        )
    for row in rows:
        if row["other_slots"]:
            lines.append(
                f"\n{row['task']}: the paper's code has other answer slots than jab's at "
                f"lengths {', '.join(map(str, row['other_slots']))}: not compared"
            )
    return "\n".join(lines)


# 2 and 3. Training and score, one run per child process ------------------------------


class Timed:
    """The paper's task with the time of every `sample_batch` call kept: its training
    loop draws one batch per step (after one for initialising), so these times mark the
    steps. Everything else is the task's own."""

    def __init__(self, task):
        self.task, self.times, self.lengths = task, [], []

    def sample_batch(self, rng, batch_size, length):
        self.times.append(time.perf_counter())
        self.lengths.append(length)
        return self.task.sample_batch(rng, batch_size=batch_size, length=length)

    def compiled_by(self) -> int:
        """The step after which the loop met no length it had not met before (compiled
        a program for, or loaded one from JAX's cache)."""
        lengths = self.lengths[1:]  # after the one drawn for initialising
        return max(lengths.index(n) for n in set(lengths))

    def __getattr__(self, name):
        return getattr(self.task, name)


def train_paper(
    paper_path: Path,
    name: str,
    seed: int,
    steps: int,
    samples: int,
    long: list[int],
    scored: bool = True,
) -> dict:
    """The paper's Transformer trained by its own loop, as experiments/example.py builds
    it, then (`scored`) scored as its range evaluation scores."""
    import haiku as hk
    import jax
    import jax.numpy as jnp
    import numpy as np

    paper = paper_modules(paper_path)
    task = paper_task(paper, name)
    single_output = task.output_length(10) == 1
    model = paper.transformer.make_transformer_encoder(
        output_size=task.output_size, return_all_outputs=True
    )  # the builder's defaults are the paper's: 5 layers, width 64, 8 heads, dropout 0.1
    model = hk.transform(paper.utils.make_model_with_empty_targets(model, task, 0, single_output))

    def loss_fn(output, target):  # example.py's
        return jnp.mean(jnp.sum(task.pointwise_loss_fn(output, target), axis=-1)), {}

    def accuracy_fn(output, target):  # example.py's
        mask = task.accuracy_mask(target)
        return jnp.sum(mask * task.accuracy_fn(output, target)) / jnp.sum(mask)

    timed = Timed(task)
    params = paper.training.ClassicTrainingParams(
        seed=seed,
        model_init_seed=seed,
        training_steps=steps - 1,  # its loop runs steps 0 to training_steps
        log_frequency=100,
        length_curriculum=paper.curriculum.UniformCurriculum(values=TRAIN_LENGTHS),
        batch_size=BATCH,
        task=timed,
        model=model,
        loss_fn=loss_fn,
        learning_rate=LEARNING_RATE,
        accuracy_fn=accuracy_fn,
        compute_full_range_test=False,
    )
    tic = time.perf_counter()
    _, _, trained = paper.training.TrainingWorker(params).run()
    jax.block_until_ready(trained)
    end = time.perf_counter()
    # Its loop pulls the loss to the host after steps 0, 100, 200, ...; the batch it
    # draws next (times[k + 1] is drawn for step k) starts once that step is done. Timed
    # from the first of them after step WARM and after its last compilation, where at
    # least WARM steps are left (a run whose compilations are cached, and most others).
    start = WARM if steps > 2 * WARM else 0
    compiled = WARM * (timed.compiled_by() // WARM + 1)
    start = max(start, compiled) if steps - compiled >= WARM else start
    rate = (steps - 1 - start) / (end - timed.times[start + 2])
    half = 100 * (steps // 200)
    late = (steps - 1 - half) / (end - timed.times[half + 2]) if half > start else None
    trained_for = {"steps_per_sec": rate, "steps_per_sec_second_half": late, "train_s": end - tic}
    trained_for["timed_from"] = start
    if not scored:
        return trained_for

    # range_evaluation.py's: a key, so dropout is on; and, as jab scores, the same weights
    # in the builder's model without dropout
    quiet = paper.transformer.make_transformer_encoder(
        output_size=task.output_size, return_all_outputs=True, dropout_prob=0.0
    )
    quiet = hk.transform(paper.utils.make_model_with_empty_targets(quiet, task, 0, single_output))

    def accuracies(apply) -> dict[int, float]:
        rng_seq = hk.PRNGSequence(1)
        random.seed(1)
        np.random.seed(1)

        def accuracy(length: int) -> float:
            apply.clear_cache()
            parts = []
            for first in range(0, samples, 16):  # sub-batches, as its evaluation has
                batch = task.sample_batch(next(rng_seq), min(16, samples - first), length)
                outputs = apply(trained, next(rng_seq), batch["input"])
                parts.append(float(np.mean(accuracy_fn(outputs, batch["output"]))))
            return float(np.mean(parts))

        return {n: accuracy(n) for n in TRAIN_LENGTHS + long}

    tic_eval = time.perf_counter()
    scores = accuracies(jax.jit(model.apply))
    eval_s = time.perf_counter() - tic_eval
    return {
        **trained_for,
        "eval_s": eval_s,
        "per_length": scores,
        "per_length_no_dropout": accuracies(jax.jit(quiet.apply)),
    }


def train_jab(
    name: str, seed: int, steps: int, samples: int, long: list[int], scored: bool = True
) -> dict:
    """jab's paper form (configs/paper_transformer.yaml), then (`scored`) scored as
    `jab eval --force-length` scores (`forced_symbol_acc`) at each length."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jabcli.core import runtime
    from jabcli.evaluation import layout
    from jabcli.evaluation.decode import decode_rows
    from jabcli.evaluation.evaluate import score
    from jabcli.inspection import inspection
    from jabcli.runs.runs import Run
    from jabcli.tasks import sampling
    from jabcli.training import session

    runtime.configure()
    once = {"train.eval_every": steps, "train.eval_samples": 64, "train.target_seq_acc": 1.0}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run"
        # configs/paper_transformer.yaml; held-out evaluation once, at the end
        experiment = jab_experiment(name, once, steps=steps, seed=seed)
        tic = time.perf_counter()
        outcome = session.start(experiment, out)
        seconds = time.perf_counter() - tic
        if outcome.step != steps:
            raise SystemExit(f"jab stopped at step {outcome.step} of {steps}")
        records = Run.open(outcome.path).read_metrics()
        chunks = [r for r in records if "steps_per_sec" in r]
        start = WARM if steps > 2 * WARM else 0
        rate, late = (
            speed(chunks, after)
            for after in (start, chunks[len(chunks) // 2]["step"] if chunks else 0)
        )
        loaded = inspection.load(outcome.path, "latest")
    trained_for = {"steps_per_sec": rate, "steps_per_sec_second_half": late, "train_s": seconds}
    if not scored:
        return trained_for

    def accuracies(lengths: list[int], key) -> dict[int, float]:
        sample_key, positions_key = jax.random.split(key)  # as evaluate.evaluate splits
        drawn = jnp.repeat(jnp.asarray(lengths), samples)
        batch = sampling.sample_lengths(loaded.experiment.task, sample_key, drawn, max(lengths))
        src, tgt_out = np.asarray(batch.src), np.asarray(batch.tgt_out)
        forced = decode_rows(
            loaded.experiment,
            loaded.params,
            positions_key,
            src,
            tgt_out.shape[1],
            layout.answer_lengths(tgt_out),
        )
        end_scored = loaded.experiment.task.end_scored
        found = score(loaded.experiment.tokenizer, src, forced, tgt_out, end_scored=end_scored)
        return {n: figures["symbol_acc"] for n, figures in found["per_length"].items()}

    tic_eval = time.perf_counter()
    scores = accuracies(TRAIN_LENGTHS, jax.random.PRNGKey(1))
    scores |= accuracies(long, jax.random.PRNGKey(2))
    return {
        **trained_for,
        "eval_s": time.perf_counter() - tic_eval,
        "per_length": scores,
    }


def speed(chunks: list[dict], after: int) -> float | None:
    """Steps per second of the chunks of training logged after step `after` (each
    record is a chunk: its steps since the record before, at its own rate)."""
    done = [
        (b["step"] - a["step"], b["steps_per_sec"])
        for a, b in itertools.pairwise(chunks)
        if a["step"] >= after
    ]
    return sum(n for n, _ in done) / sum(n / s for n, s in done) if done else None


def one_run(
    paper_path: Path, spec: str, steps: int, samples: int, long: list[int], scored: bool
) -> None:
    """A child process: one task, one side, one seed; its record as JSON on stdout."""
    name, side, seed = spec.split(":")
    if side == "paper":
        found = train_paper(paper_path, name, int(seed), steps, samples, long, scored)
    else:
        found = train_jab(name, int(seed), steps, samples, long, scored)
    for figures in ("per_length", "per_length_no_dropout"):
        if figures in found:
            found[figures] = {str(n): acc for n, acc in found[figures].items()}
    # jab's side trains the paper's form (configs/paper_transformer.yaml); records before it
    # have no `form`: jab's own encoder form
    form = {"form": "paper"} if side == "jab" else {}
    record = {"task": name, "side": side, "seed": int(seed), "steps": steps, **form, **found}
    print(json.dumps(record))


# The table ---------------------------------------------------------------------------


def mean_over(record: dict, lengths: list[int], figures: str = "per_length") -> float:
    """The paper's score over `lengths`: each length's accuracy weighs the same (a task
    that draws only odd lengths, modular_arithmetic on jab's side, has fewer)."""
    found = [record[figures][str(n)] for n in lengths if str(n) in record[figures]]
    return sum(found) / len(found)


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def rate(value: float | None) -> str:
    """Steps per second; none when a run was too short to leave its first chunk out."""
    return "-" if value is None else f"{value:.2f}"


def table(records: list[dict], tasks: list[str]) -> str:
    from jabcli.api.formatting import spread

    near = [n for n in LONG_LENGTHS if n <= 100]
    far = [n for n in LONG_LENGTHS if n > 100]
    lines = [
        "| task | side | seeds | steps | steps/s | training s | 1-40 | 41-500 | 41-100 / 101-500 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = (
        ("paper", "own", "paper's code", "per_length"),
        ("paper", "own", "paper's code, scored without dropout", "per_length_no_dropout"),
        ("jab", "own", "jab encoder", "per_length"),
        ("jab", "paper", "jab, configs/paper_transformer.yaml", "per_length"),
    )
    for name, (side, form, label, figures), budget in itertools.product(
        tasks, rows, sorted({r["steps"] for r in records})
    ):
        # a row per task, side and budget
        runs = [
            r
            for r in records
            if (r["task"], r["side"], r.get("form", "own"), r["steps"])
            == (name, side, form, budget)
            and figures in r
        ]
        if not runs:
            continue
        steps = sorted({r["steps"] for r in runs})
        speeds = [r["steps_per_sec"] for r in runs if r["steps_per_sec"] is not None]
        per_second = spread(speeds, rate) if speeds else rate(None)
        within = spread([mean_over(r, TRAIN_LENGTHS, figures) for r in runs], percent)
        beyond = spread([mean_over(r, LONG_LENGTHS, figures) for r in runs], percent)
        split = (
            f"{spread([mean_over(r, near, figures) for r in runs], percent)} / "
            f"{spread([mean_over(r, far, figures) for r in runs], percent)}"
        )
        seconds = spread([r["train_s"] for r in runs], lambda v: f"{v:.0f}")
        lines.append(
            f"| {name} | {label} | {len(runs)} | {'/'.join(map(str, steps))} | {per_second} "
            f"| {seconds} | {within} | {beyond} | {split} |"
        )
    return "\n".join(lines)


def child(
    args: argparse.Namespace, spec: str, options: list[str], env: dict[str, str] | None = None
) -> dict:
    """One run (`one_run`) in a fresh process, its record; `env`: its environment."""
    one = [str(args.paper_code), "--one", spec, "--steps", str(args.steps), *options]
    done = subprocess.run(
        [sys.executable, __file__, *one], stdout=subprocess.PIPE, text=True, check=True, env=env
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def speed_only(args: argparse.Namespace, tasks: list[str]) -> None:
    """`--speed-only`: each task trained `--steps` steps by each side, `--repeats` times,
    the sides taking turns (their order turned round each repeat, so that a change in the
    machine's load falls on all of them); nothing scored. Prints `speed_table`. With
    `--resume`, the runs already in `--out` are kept."""
    sides = ["paper", "jab"] + (["before"] if args.before else [])
    env = {
        # The paper's code compiles a program per length, each kept in JAX's cache: a
        # length it first meets after step WARM costs a load, not a compilation, once
        # the task's first run has compiled it. That cold run is the slowest of the task's
        # repeats, which their median passes over given three.
        "paper": dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(PAPER_CACHE))
        | {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"},
        "jab": dict(os.environ, PYTHONPATH=str(HERE.parent)),  # the jabcli beside this file
        "before": dict(os.environ, PYTHONPATH=str(args.before)),
    }
    found = json.loads(args.out.read_text()) if args.resume and args.out.exists() else {}
    found["commands"] = [*found.get("commands", []), command()]
    records = found.setdefault("speed", [])
    for name, repeat in itertools.product(tasks, range(args.repeats)):
        for side in sides if repeat % 2 == 0 else sides[::-1]:
            key = (name, side, repeat, args.steps)
            if any((r["task"], r["side"], r["repeat"], r["steps"]) == key for r in records):
                continue
            spec = f"{name}:{'paper' if side == 'paper' else 'jab'}:0"
            record = {**child(args, spec, ["--speed-only"], env[side]), "side": side}
            records.append({**record, "repeat": repeat})
            print(f"  {name}, {side}: {rate(record['steps_per_sec'])} steps/s", flush=True)
            args.out.write_text(json.dumps(found, indent=1) + "\n")
    done = [r for r in records if r["steps"] == args.steps]
    print(
        f"\nSteps/s over steps {WARM}-{args.steps} of each run (its first {WARM} left out), "
        f"one seed, median [min-max] over repeats\n\n{speed_table(done, sides, tasks)}"
    )


def speed_table(records: list[dict], sides: list[str], tasks: list[str]) -> str:
    """Steps/s of each side (median [min-max] over repeats), and each jab side's over the
    paper's code's: the median of the repeats' ratios, each repeat's sides run in turn."""
    from jabcli.api import formatting

    def spread(values: list[float], show) -> str:
        return formatting.spread(values, show) if values else "-"

    labels = {"paper": "paper's code", "jab": "jab", "before": "jab before"}
    head = [labels[side] for side in sides]
    head += [f"{labels[side]} / paper" for side in sides[1:]]
    lines = ["| task | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for name in tasks:
        runs = {(r["side"], r["repeat"]): r["steps_per_sec"] for r in records if r["task"] == name}
        cells = [spread([v for (s, _), v in runs.items() if s == side], rate) for side in sides]
        for side in sides[1:]:
            ratios = [
                v / runs["paper", k]
                for (s, k), v in runs.items()
                if s == side and ("paper", k) in runs
            ]
            cells.append(spread(ratios, lambda v: f"{v:.2f}×"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def command() -> str:
    return " ".join(["python", *sys.argv])


def lengths_of(text: str) -> list[int]:
    """`1-40,41-491/50`: ranges, each with an optional step."""
    found = []
    for part in text.split(","):
        span, _, step = part.partition("/")
        low, _, high = span.partition("-")
        found += range(int(low), int(high or low) + 1, int(step or 1))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:3]),  # how to get the paper's code
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parser.add_argument(
        "paper_code",
        type=Path,
        help="a clone of github.com/google-deepmind/neural_networks_chomsky_hierarchy",
    )
    parser.add_argument(
        "--tasks",
        default="even_pairs,bucket_sort,cycle_navigation,reverse",
        help="tasks to train, jab's names (default: %(default)s)",
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--steps", type=int, default=1000, help="updates each (default 1000)")
    parser.add_argument(
        "--samples", type=int, default=32, help="scored inputs per length (default 32)"
    )
    parser.add_argument(
        "--check-lengths", default="1-40,41-491/50", help="sampler check (%(default)s)"
    )
    parser.add_argument(
        "--check-samples", type=int, default=32, help="inputs per length (default 32)"
    )
    parser.add_argument(
        "--sides", default="paper,jab", help="which sides train (default: %(default)s)"
    )
    parser.add_argument(
        "--long-lengths",
        default="41-491/10",
        help="lengths scored beyond training, within 41-491/10 (default %(default)s; "
        "41-491/50 scores 10 of them, a fifth of the compilations on the paper's side)",
    )
    parser.add_argument("--skip-check", action="store_true", help="train only")
    parser.add_argument(
        "--skip-same-weights", action="store_true", help="no one-model, two-codes comparison"
    )
    parser.add_argument("--skip-train", action="store_true", help="check the samplers only")
    parser.add_argument(
        "--speed-only",
        action="store_true",
        help="train only, score nothing: steps/s of each side, the sides taking turns",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="--speed-only: runs of each side (default 3)"
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="--speed-only: a folder holding another jabcli (`git archive REV jabcli | tar "
        "-x -C FOLDER`), trained as a third side",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="default benchmarks/side_by_side.json, or side_by_side_speed.json with --speed-only",
    )
    parser.add_argument("--resume", action="store_true", help="keep the runs in --out")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # TASK:SIDE:SEED, a child's run
    args = parser.parse_args()
    long = lengths_of(args.long_lengths)
    if not set(long) <= set(LONG_LENGTHS):
        raise SystemExit(f"--long-lengths must lie within 41-491/10, not {args.long_lengths}")
    if args.one:
        one_run(args.paper_code, args.one, args.steps, args.samples, long, not args.speed_only)
        return
    tasks = args.tasks.split(",")
    if set(args.sides.split(",")) - {"paper", "jab"}:
        raise SystemExit(f"--sides takes paper, jab or both, not {args.sides}")
    unknown = sorted(set(tasks) - set(PAPER_NAMES))
    if unknown:
        raise SystemExit(f"not tasks of the protocol: {', '.join(unknown)}")
    paper_modules(args.paper_code)  # a wrong path fails now, not in a child
    if args.speed_only:
        args.out = args.out or HERE / "side_by_side_speed.json"
        speed_only(args, tasks)
        return
    args.out = args.out or HERE / "side_by_side.json"
    found = json.loads(args.out.read_text()) if args.resume and args.out.exists() else {}
    found.setdefault("records", [])
    # a table of the runs alone writes nothing
    if not (args.skip_check and args.skip_train and args.skip_same_weights):
        found.setdefault("commands", []).append(command())
    started = time.perf_counter()

    if not args.skip_same_weights:
        print("One set of weights in the paper's Transformer and in jab's paper form", flush=True)
        lengths = [1, 2, 5, 17, 40, 41, 100]
        rows = []
        for name in PAPER_NAMES:
            rows.append(same_weights(args.paper_code, name, lengths, 8))
            print(f"  {rows[-1]}", flush=True)
        found["same_weights"] = rows
        args.out.write_text(json.dumps(found, indent=1) + "\n")
        print(same_weights_table(rows), flush=True)

    if not args.skip_check:
        lengths = lengths_of(args.check_lengths)
        print(f"Checking the paper's samplers on {describe(lengths)}", flush=True)
        paper = paper_modules(args.paper_code)
        rows = check_samplers(paper, list(PAPER_NAMES), lengths, args.check_samples, seed=0)
        found["samplers"] = {"lengths": lengths, "samples": args.check_samples, "rows": rows}
        args.out.write_text(json.dumps(found, indent=1) + "\n")
        print(sampler_table(rows, lengths, args.check_samples), flush=True)

    if not args.skip_train:
        for name in tasks:
            for seed in range(args.seeds):
                for side in args.sides.split(","):
                    form = "paper" if side == "jab" else "own"
                    done = [
                        r
                        for r in found["records"]
                        if (r["task"], r["side"], r["seed"], r["steps"], r.get("form", "own"))
                        == (name, side, seed, args.steps, form)
                    ]
                    if done:
                        continue
                    print(f"Training {name}, {side}, seed {seed}", flush=True)
                    sizes = ["--samples", str(args.samples), "--long-lengths", args.long_lengths]
                    record = child(args, f"{name}:{side}:{seed}", sizes)
                    found["records"].append(record)
                    args.out.write_text(json.dumps(found, indent=1) + "\n")
                    print(
                        f"  {rate(record['steps_per_sec'])} steps/s, trained in "
                        f"{record['train_s']:.0f} s, scored in {record['eval_s']:.0f} s; "
                        f"1-40 {percent(mean_over(record, TRAIN_LENGTHS))}, "
                        f"41-491 {percent(mean_over(record, LONG_LENGTHS))}",
                        flush=True,
                    )
    if any(r["task"] in tasks for r in found["records"]):
        print(
            f"\nThe paper's score (per-symbol accuracy at the answer's true length, each "
            f"length weighing the same), {args.samples} inputs per length on 1-40 and on "
            f"{describe(long)}; steps/s after the first {WARM} steps; training s: the whole "
            f"training call, compilations included; median [min-max] over seeds\n",
            flush=True,
        )
        print(table(found["records"], tasks))
    if not (args.skip_check and args.skip_train and args.skip_same_weights):
        found.setdefault("seconds", []).append(round(time.perf_counter() - started))
        args.out.write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    main()
