"""jab from Python, for notebooks and scripts: the calls the command line itself makes
(session, inspection), returning values that render themselves in Jupyter.

    import jabcli as jab
    run = jab.train("reverse", steps=600, overrides={"model.d_model": 64})
    run = jab.load("runs/reverse-20261130-101500")    # a run, or a group of seeds
    result = run.evaluate(lengths=(1, 32), samples=200)  # accuracy, per_length, mistakes
    run.predict(["12345"])                               # answers, right or wrong
    attn = run.attention("12345", kind="cross", layer=-1)  # numpy weights, token labels
    run.metrics()                                        # the rows of metrics.jsonl
    run.curve("eval_seq_acc")                            # a picture in Jupyter
    jab.compare([run_a, run_b], lengths=(1, 32))         # exact match by length, side by side
    jab.curves([run_a, run_b], "loss")                   # several runs' curves overlaid
    study = jab.study("studies/smoke.yaml")              # jab study run: a grid of runs
    study = jab.load_study("runs/smoke")                 # its table and plot in Jupyter

Training shows its progress in place in a notebook; in a script jab prints nothing (a
`view=` of the caller's is told how training or a study goes). Mistakes raise `JabError`
with the message the command line prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from jabcli.api.arguments import (
    amount,
    checkpoint_name,
    input_texts,
    length_range,
    path_of,
    task_reference,
    yes_or_no,
)
from jabcli.api.names import API
from jabcli.api.values import Attention, Comparison, Curves, Predictions, Result, StudyResults
from jabcli.core.config import SAMPLES, SAMPLES_PER_LENGTH
from jabcli.core.errors import JabError, whole
from jabcli.evaluation.evaluate import HeldOut
from jabcli.inspection import attention, inspection
from jabcli.inspection.curves import curve
from jabcli.runs import runs

if TYPE_CHECKING:
    from jabcli.studies.study_run import StudyObserver
    from jabcli.training.session import Observer

__all__ = list(API)  # the one list, which jabcli/__init__.py hands on lazily


def paths_of(runs_given: Any, what: str) -> list[Path]:
    """Runs given as paths or `Run`s; a single one (a string, a path, a Run) is a list of
    one, as the command line takes `jab curves RUN`."""
    if isinstance(runs_given, (str, Path, Run)):
        runs_given = [runs_given]
    try:
        items = list(runs_given)
    except TypeError:
        raise JabError(f"{what} takes run folders or Runs, got {runs_given!r}") from None
    found = []
    for item in items:
        if isinstance(item, Run):
            found.append(item.path)
        elif isinstance(item, (str, Path)):
            found.append(Path(item))
        else:
            raise JabError(f"{what} takes run folders or Runs, got {item!r}")
    return found


def train(
    task: str | type | object,
    steps: int | None = None,
    seed: int | None = None,
    seeds: int | None = None,
    overrides: dict[str, Any] | None = None,
    out: str | Path | None = None,
    *,
    view: Observer | None = None,
) -> Run:
    """`jab train --task TASK [--steps] [--seed] [--seeds] [--set KEY=VALUE]... [--out]`;
    returns the trained run. `view` is told how training goes (a `session.Observer`); by
    default, a progress bar in a notebook and nothing at all in a script."""
    from jabcli.api import notebook
    from jabcli.core import runtime
    from jabcli.experiment.resolve import resolve
    from jabcli.training import session

    task, own = task_reference(task)
    if overrides is not None and not (
        isinstance(overrides, dict) and all(isinstance(key, str) for key in overrides)
    ):
        raise JabError(
            f"overrides takes a dict of config keys and values, like {{'model.d_model': 64}}, "
            f"got {overrides!r}"
        )
    overrides = {**own, **(overrides or {})} or None  # an instance's options, then the caller's
    for value, name, least in ((steps, "steps", 1), (seed, "seed", 0), (seeds, "seeds", 1)):
        if value is not None:  # named as here, not as the command line's --steps
            whole(value, name, least)
    out = path_of(out, "out")
    runtime.configure()
    experiment = resolve(str(task), None, None, steps, seed, seeds, overrides, "overrides")
    if view is None:
        view = notebook.NotebookView() if notebook.in_notebook() else session.Observer()
    outcome = session.start(experiment, out, view, out_name="out")
    if outcome.interrupted_by is not None:  # a script must not carry on as if trained
        raise KeyboardInterrupt(
            f"training interrupted at step {outcome.step}; checkpoint saved in "
            f"{outcome.path}; resume with: jab resume {outcome.path}"
        )
    return Run(outcome.path)


def load(path: str | Path | None = None) -> Run:
    """A saved run or group of seeds (default: the newest under runs/)."""
    return Run(runs.open_runs(path_of(path, "load"))[0])


@dataclass
class Run:
    """A run folder, or a group of seeds, and what can be asked of it."""

    path: Path

    def __post_init__(self) -> None:
        if not isinstance(self.path, (str, Path)):
            raise JabError(f"Run takes a run folder (a string or a Path), got {self.path!r}")
        self.path = Path(self.path)
        runs.open_runs(self.path)  # a clear error now if it is not a run

    def evaluate(
        self,
        lengths: tuple[int | None, int | None] | None = None,
        *,
        samples: int | None = None,
        each_length: bool | None = None,
        checkpoint: str = "latest",
        seed: int = 1,
        force_length: bool = False,
    ) -> Result:
        """Held-out accuracy, as `jab eval`: over the training lengths, or `samples`
        (200 by default) at every length in `lengths`; with `each_length=False`, `samples`
        (1000 by default) drawn over `lengths`. A group's figures are median [min-max].
        `force_length` adds `forced_seq_acc`: exact match with each answer's true length
        imposed on decoding."""
        from jabcli.core import runtime

        runtime.configure()
        each_length = lengths is not None if each_length is None else each_length
        if samples is None:
            samples = SAMPLES_PER_LENGTH if each_length else SAMPLES
        whole(samples, "samples", 1)
        whole(seed, "seed", 0)
        yes_or_no(each_length, "each_length")
        yes_or_no(force_length, "force_length")
        low, high = length_range(lengths) if lengths is not None else (None, None)
        path, loaded = inspection.load_runs(self.path, checkpoint_name(checkpoint))
        held_out = HeldOut(samples, low, high, each_length=each_length, force_length=force_length)
        return Result(inspection.evaluate_runs(path, loaded, held_out, seed=seed))

    def predict(
        self, texts: str | list[str], *, checkpoint: str = "latest", skip_bad: bool = False
    ) -> Predictions:
        """Answers to `texts` (one input, or a list), each marked against the task's
        reference, as `jab predict`. An input the run cannot take raises `JabError`; with
        `skip_bad`, it is left out of the rows and named in `skipped` ({its index in
        `texts`: why})."""
        from jabcli.core import runtime

        texts = input_texts(texts)
        yes_or_no(skip_bad, "skip_bad")
        runtime.configure()
        loaded = inspection.load(self.path, checkpoint_name(checkpoint))
        skipped = inspection.input_errors(loaded, texts) if skip_bad else {}
        good = [text for i, text in enumerate(texts) if i not in skipped]
        return Predictions(inspection.predict(loaded, good) if good else [], skipped)

    def attention(
        self,
        text: str | None = None,
        kind: str | None = None,
        layer: int = -1,
        checkpoint="latest",
    ) -> Attention:
        """One layer's attention while answering `text` (default: a random held-out
        input), as `jab show-attention`; `kind` None is cross-attention, or a
        model.arch=encoder run's only one, "encoder" (model.arch=decoder: "decoder");
        `layer` -1 is the last. A model.arch=stack_rnn or tape_rnn run's is its memory,
        "stack" or "tape": each cell's size after each token it read, one layer of one
        head."""
        from jabcli.core import runtime

        if text is not None and not isinstance(text, str):
            raise JabError(f"attention takes one input string, like '12345', got {text!r}")
        if type(layer) is not int:
            raise JabError(f"layer must be a whole number (-1 for the last), got {layer!r}")
        runtime.configure()
        loaded = inspection.load(self.path, checkpoint_name(checkpoint))
        layers = loaded.experiment.form.drawn_layers(loaded.experiment.config.model)
        if not -layers <= layer < layers:
            raise JabError(
                f"layer must be between 0 and {layers - 1} (or -1 for the last), got {layer}"
            )
        picture = attention.attention(loaded, text, kind)
        return Attention(
            picture.kind,
            picture.input,
            picture.answer,
            picture.expected,
            layer % layers,
            np.asarray(picture.weights[layer]),
            picture.rows,
            picture.cols,
            picture.memory,
        )

    def metrics(self) -> list[dict[str, Any]]:
        """The records of metrics.jsonl (of a group: its first seed's)."""
        return runs.open_runs(self.path)[1][0].read_metrics()

    def curve(self, metric: str = "loss") -> Curves:
        """A metric by step (a group: median, min and max), as `jab curves` draws it."""
        return curves([self.path], metric)


def curves(paths: Sequence[str | Path | Run] | str | Path | Run, metric: str = "loss") -> Curves:
    """`jab curves`: a metric by step for each run (a group: median, min and max),
    drawn as one picture in Jupyter."""
    found = paths_of(paths, "curves")
    if not found:
        raise JabError("curves takes one or more run folders")
    return Curves([curve(p, metric) for p in found])


def compare(
    paths: Sequence[str | Path | Run],
    lengths: tuple[int, int] | None = None,
    samples: int = SAMPLES_PER_LENGTH,
    checkpoint: str = "latest",
    seed: int = 1,
) -> Comparison:
    """`jab compare`: several runs' (or groups') exact match at every length in
    `lengths` (default: from the shortest training length to twice the longest), on the
    same held-out inputs."""
    from jabcli.core import runtime

    runtime.configure()
    found = paths_of(paths, "compare")
    if len(found) < 2:
        raise JabError("compare takes two or more run folders")
    whole(samples, "samples", 1)
    loaded = [inspection.load_runs(p, checkpoint_name(checkpoint)) for p in found]
    bounds: tuple[int | None, int | None]
    if lengths is not None:
        bounds = length_range(lengths)
    else:
        bounds = inspection.default_lengths([one for _, seeds in loaded for one in seeds])
    held_out = HeldOut(samples, *bounds, each_length=True)
    return Comparison(
        Result(inspection.evaluate_runs(path, seeds, held_out, seed=seed)) for path, seeds in loaded
    )


def study(
    file: str | Path,
    out: str | Path | None = None,
    workers: int | None = None,
    ray: str | None = None,
    cpus_per_cell: float = 1.0,
    gpus_per_cell: float = 0.0,
    *,
    view: StudyObserver | None = None,
) -> StudyResults:
    """`jab study run FILE [--out DIR] [--workers N] [--ray ADDRESS --cpus-per-cell C
    --gpus-per-cell G]`: train and measure every cell not measured yet; returns the
    results. `view` is told how the cells go (a `study_run.StudyObserver`); by default
    nothing is shown. A cell that fails raises `JabError`, an interrupted study
    `KeyboardInterrupt` (run it again to resume)."""
    from jabcli.core import runtime
    from jabcli.studies import study_run
    from jabcli.studies.run_options import check_backend, default_folder
    from jabcli.studies.study_file import read

    study_file, folder = path_of(file, "study"), path_of(out, "out")
    if study_file is None:
        raise JabError("study takes a study file, like 'studies/smoke.yaml'")
    if workers is not None:
        whole(workers, "workers", 1)
    if ray is not None and not isinstance(ray, str):  # Typer's to check on the command line
        raise JabError(f"ray takes an address (host:port), 'auto' or 'local', got {ray!r}")
    check_backend(workers, ray, cpus_per_cell, gpus_per_cell)
    if ray is not None and not (
        amount(cpus_per_cell) and cpus_per_cell > 0 and amount(gpus_per_cell)
    ):
        raise JabError(
            "cpus_per_cell must be a positive number and gpus_per_cell zero or more, "
            f"got {cpus_per_cell!r} and {gpus_per_cell!r}"
        )
    runtime.configure()
    found = read(study_file)
    folder = folder if folder is not None else default_folder(found)
    summary = study_run.run(found, folder, workers, view, ray, cpus_per_cell, gpus_per_cell)
    if summary.interrupted_by is not None:
        raise KeyboardInterrupt(f"study {folder} interrupted; run it again to resume")
    if summary.failed:
        names = ", ".join(repr(name) for name in summary.failed)
        raise JabError(f"cells {names} of {folder} failed (logs in {folder}/logs)")
    return load_study(folder)


def load_study(path: str | Path) -> StudyResults:
    """A study folder's results: what `jab study show --json` prints."""
    from jabcli.studies.study_results import table

    found = path_of(path, "load_study")
    if found is None:
        raise JabError("load_study takes a study folder, like 'runs/smoke'")
    return StudyResults(table(found))
