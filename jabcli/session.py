"""`jab train` as a library call: a Trainer wired to a run folder, its checkpoints and
the signals that stop it. It reports through an `Observer` and returns an `Outcome`;
it never prints and never exits.

Ctrl-C or SIGTERM stops the loop between two chunks and the current step is saved
(`Outcome.interrupted_by` says which signal); a second one stops at once and raises
`Interrupted`, which says what was kept. A new run that fails before its first
checkpoint is removed, so runs/ never holds a run that cannot be evaluated or resumed;
a run killed before its first checkpoint resumes from step 0.
"""

from __future__ import annotations

import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jabcli import runs
from jabcli.errors import JabError
from jabcli.experiment import Experiment
from jabcli.runs import Run


class Interrupted(KeyboardInterrupt):
    """A second Ctrl-C stopped training at once; `message` says what was kept."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Observer:
    """What a training session reports, as it happens; every method may be left out."""

    def begin(self, run: Run, experiment: Experiment, start_step: int) -> None:
        """Training into `run` starts (or resumes) at `start_step`."""

    def note(self, message: str) -> None:
        """Something worth telling: resuming, a broken checkpoint skipped."""

    def log(self, record: dict[str, Any]) -> None:
        """One metrics.jsonl record, once per chunk of steps."""

    def evaluated(self, result: dict[str, Any]) -> None:
        """A held-out evaluation, with the step it was made at."""

    def end(self) -> None:
        """Training stopped, for whatever reason."""


@dataclass
class Outcome:
    run: Run
    step: int
    start_step: int
    elapsed_s: float
    last_eval: dict[str, Any]
    target_seq_acc: float
    interrupted_by: int | None = None  # SIGINT or SIGTERM, when one stopped training

    @property
    def reached_target(self) -> bool:
        return bool(self.last_eval) and self.last_eval["seq_acc"] >= self.target_seq_acc


class StopRequest:
    """Turns SIGINT/SIGTERM into a flag the training loop polls."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __enter__(self) -> StopRequest:
        self._previous = {
            s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)
        }
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _handle(self, signum: int, frame: object) -> None:
        if self.signum is not None:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        self.signum = signum

    def __call__(self) -> bool:
        return self.signum is not None


def start(experiment: Experiment, out: Path | None, observer: Observer | None = None) -> Outcome:
    """Train a new run into `out` (default: a fresh folder under runs/)."""
    if out is not None and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise JabError(f"{out} already exists and is not an empty folder; choose another --out")
    from jabcli.train import check_devices

    check_devices(experiment.config.train)
    with StopRequest() as stop:  # a Ctrl-C while the folder is made stops at step 0
        run = _create(experiment, out)
        return _train(run, experiment, None, observer or Observer(), stop)


def resume(path: Path | None, steps: int | None, observer: Observer | None = None) -> Outcome:
    """Continue a run from its newest valid checkpoint; `steps` extends it, and is saved
    in the run so that a later plain resume aims for the same step. A run killed before
    its first checkpoint starts again from step 0."""
    run = Run.open(path)
    cfg, tokenizer = run.load_config()
    saved_steps = cfg.train.steps
    if steps is not None:
        cfg.train.steps = steps
    experiment = Experiment.create(cfg, tokenizer)
    observer = observer or Observer()
    from jabcli.train import check_devices, state_from_arrays

    if not run.manifest()["checkpoints"]:
        step, state = 0, None
        observer.note(f"{run.path} has no checkpoint yet; training it from the start")
    else:
        entry, arrays = run.newest_valid_checkpoint(warn=observer.note)
        source = f"checkpoint {entry['file']} in {run.path}"
        step, state = entry["step"], state_from_arrays(experiment, arrays, source)
        if step >= cfg.train.steps:
            raise JabError(
                f"{run.path} already reached step {step} of {cfg.train.steps}; "
                "pass a larger --steps to continue"
            )
    check_devices(cfg.train)
    with StopRequest() as stop:
        if cfg.train.steps != saved_steps:
            with run.lock():
                run.save_config(cfg, tokenizer)
        return _train(run, experiment, (step, state), observer, stop)


def _create(experiment: Experiment, out: Path | None) -> Run:
    """A new run folder with its config; on failure, nothing of it is left behind."""
    existed = out is not None and out.is_dir()  # start() allows only an empty one
    path = out or runs.new_run_dir(experiment.config.task.name)
    try:
        return Run.create(path, experiment.config, experiment.tokenizer)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        if existed:
            path.mkdir()
        raise


def _train(
    run: Run,
    experiment: Experiment,
    resumed: tuple[int, Any] | None,
    observer: Observer,
    stop: StopRequest,
) -> Outcome:
    """Train until done, early-stopped or interrupted, checkpointing along the way;
    `resumed` is the step and state to continue from (state None: from the seed)."""
    try:
        with run.lock():
            if resumed is not None:
                run.forget_after(resumed[0])
                rejected = run.truncate_metrics(resumed[0])
                if rejected:
                    observer.note(
                        f"{rejected} unreadable line(s) of {run.path}/metrics.jsonl "
                        f"moved to {runs.REJECTED_METRICS}"
                    )
                observer.note(f"Resuming {run.path} from step {resumed[0]}")
            return _loop(run, experiment, resumed and resumed[1], observer, stop)
    except BaseException as err:
        try:
            entries = run.manifest()["checkpoints"]
        except JabError:
            entries = None  # unreadable: keep the folder, whatever it holds
        removed = resumed is None and entries == []
        if removed:
            shutil.rmtree(run.path, ignore_errors=True)  # nothing worth keeping yet
        if isinstance(err, KeyboardInterrupt) and not isinstance(err, Interrupted):
            raise Interrupted(_kept(run, entries, removed)) from err
        raise


def _kept(run: Run, entries: list[dict[str, Any]] | None, removed: bool) -> str:
    """What an interrupted session leaves behind, in words."""
    if removed:
        return f"run folder {run.path} removed: it had no checkpoint yet"
    if entries:
        return f"run {run.path} kept; its newest checkpoint is at step {entries[-1]['step']}"
    if entries == []:
        return f"run {run.path} kept; it has no checkpoint yet, so a resume starts from step 0"
    return f"run {run.path} kept"


def _loop(
    run: Run, experiment: Experiment, state: Any, observer: Observer, stop: StopRequest
) -> Outcome:
    from jabcli.train import Trainer, state_to_arrays

    tr = experiment.config.train
    trainer = Trainer(experiment, state)
    saved_step = -1

    def save(eval_seq_acc: float | None = None) -> None:
        nonlocal saved_step
        step = int(trainer.state.step)
        run.save_checkpoint(
            state_to_arrays(trainer.state), step, eval_seq_acc, keep=tr.keep_checkpoints
        )
        saved_step = step

    def on_eval(result: dict[str, Any]) -> None:
        observer.evaluated(result)
        save(result["seq_acc"])

    def on_log(record: dict[str, Any]) -> None:
        run.append_metrics(record)
        observer.log(record)

    observer.begin(run, experiment, int(trainer.state.step))
    try:
        outcome = trainer.run(on_log=on_log, on_eval=on_eval, should_stop=stop)
    except FloatingPointError as err:
        kept = (
            "the last good checkpoint is kept"
            if saved_step >= 0 or state is not None
            else "no checkpoint had been saved yet"
        )
        raise JabError(
            f"{err}; stopped, {kept}. Try a smaller train.learning_rate "
            "(for example --set train.learning_rate=3e-4)"
        ) from None
    finally:
        observer.end()
    if saved_step != outcome["step"]:
        save()
    return Outcome(
        run=run,
        step=outcome["step"],
        start_step=outcome["start_step"],
        elapsed_s=outcome["elapsed_s"],
        last_eval=outcome["last_eval"],
        target_seq_acc=tr.target_seq_acc,
        interrupted_by=stop.signum,
    )
