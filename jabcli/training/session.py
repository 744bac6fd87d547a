"""`jab train` as a library call: a Trainer wired to a run folder, its checkpoints and
the signals that stop it. It reports through an `Observer` and returns an `Outcome`;
it never prints and never exits.

Ctrl-C or SIGTERM stops the loop between two chunks and the current step is saved
(`Outcome.interrupted_by` says which signal); a second one stops at once and raises
`Interrupted`, which says what was kept. The same signal again within `SAME_SIGNAL_S` of
the first is that one delivered twice, not a second: `timeout -s INT` signals jab, then
its process group, jab again. A new run that fails before its first checkpoint is
removed, so runs/ never holds a run that cannot be evaluated or resumed; a run killed
before its first checkpoint resumes from step 0. A new run's folders are claimed (locked)
before anything is written in them (`Claim`): a `jab train` refused a folder another
is training into removes nothing of it.
"""

from __future__ import annotations

import contextlib
import signal
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jabcli.core import waiting
from jabcli.core.config import for_seed
from jabcli.core.errors import JabError, Note
from jabcli.core.spread import every_seed
from jabcli.runs import runs
from jabcli.runs.claim import Claim
from jabcli.runs.loggers import Logs
from jabcli.runs.runs import Run
from jabcli.training import checkpoints, manifest
from jabcli.training.trained import Trained

if TYPE_CHECKING:
    from collections.abc import Callable

    from jabcli.evaluation.figures import HeldOutResult
    from jabcli.experiment.experiment import Experiment
    from jabcli.runs.metrics import LogRecord
    from jabcli.training.manifest import CheckpointEntry

# A signal that comes again within this many seconds of the first is the first delivered
# twice (`timeout -s INT` sends it to jab, then to jab's process group, within
# milliseconds), not a second Ctrl-C: a person who reads the first's line and presses
# again takes longer.
SAME_SIGNAL_S = 0.5


class Interrupted(KeyboardInterrupt):
    """A second Ctrl-C stopped training at once; `message` says what was kept, `kept` is
    the run (or group) that a resume goes on with (None: it was removed)."""

    def __init__(self, message: str, kept: Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kept = kept


class Observer:
    """What a training session reports, as it happens; every method may be left out.
    Records and results come as lists with one entry per seed (one for a plain run)."""

    def begin(
        self,
        path: Path,
        experiment: Experiment,
        start_step: int,
        parameters: int,
        flops: float | None = None,
    ) -> None:
        """Training into `path` (a run, or a group of seeds) starts or resumes, with a
        model of `parameters` parameters and `flops` per training step (each seed's;
        None when XLA does not say)."""

    def note(self, message: str) -> None:
        """Something worth telling: resuming, unreadable metrics lines set aside."""

    def warn(self, message: str) -> None:
        """Something done in the user's stead before a resume trains (a damaged checkpoint
        passed over, a manifest rebuilt): a `Note` warning, as loading a run for `jab
        eval` gives, which the command line prints as one line on stderr."""
        warnings.warn(message, Note, stacklevel=2)

    def resuming(self, path: Path, step: int, fresh: bool) -> None:
        """Training of `path` goes on from `step`; `fresh`: it has no checkpoint yet, so
        from step 0."""
        fresh_note = "; it has no checkpoint yet" if fresh else ""
        self.note(f"Resuming {path} from step {step}{fresh_note}")

    def stopping(self, signum: int) -> None:
        """A first SIGINT or SIGTERM arrived: training stops once the chunk of steps under
        way ends, with a checkpoint there; a second one (not the same one delivered twice,
        see `SAME_SIGNAL_S`) stops at once. Said within milliseconds of the signal while a
        chunk runs (on a slow model, minutes before it ends), from the training thread;
        during an evaluation, once it ends."""
        self.note(stopping_line(signum))

    def log(self, records: list[LogRecord]) -> None:
        """Each seed's metrics.jsonl record, once per chunk of steps."""

    def evaluated(self, results: list[HeldOutResult]) -> None:
        """Each seed's held-out evaluation, with the step it was made at."""

    def end(self) -> None:
        """Training stopped, for whatever reason."""


@dataclass
class Outcome(Trained):
    """How a training session ended: what the Trainer did (`Trained`, whose word on the
    target is read here, never worked out again), and where and why it stopped."""

    path: Path  # the run, or the group of seeds
    runs: list[Run]  # one per seed
    target_seq_acc: float
    interrupted_by: int | None = None  # SIGINT or SIGTERM, when one stopped training


def stopping_line(signum: int, *, cells: bool = False) -> str:
    """What a first SIGINT or SIGTERM does to training (to a study's running `cells`), in
    one line."""
    when = "each running cell when its" if cells else "when the"
    line = f"stopping {when} steps under way end, with a checkpoint there"
    if signum != signal.SIGINT:
        return f"{signal.Signals(signum).name}: {line}"
    them, their = ("them ", "their last checkpoints") if cells else ("", "the last checkpoint")
    return f"{line.capitalize()}; Ctrl-C again stops {them}at once, keeping only {their}"


class StopRequest:
    """Turns SIGINT/SIGTERM into a flag the training loop polls (a second signal stops at
    once; the first one again within `SAME_SIGNAL_S` is that one, delivered twice). The
    first poll that finds it set tells `on_first`: from the polling thread, since a
    signal handler that prints could wait forever on a lock its own thread holds (Rich's,
    mid-line)."""

    def __init__(self, on_first: Callable[[int], None] | None = None) -> None:
        self.signum: int | None = None
        self.first_at = 0.0  # time.monotonic() when the first signal was handled
        self.on_first = on_first
        self.told = False

    def __enter__(self) -> StopRequest:
        self._previous = {
            s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)
        }
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _handle(self, signum: int, frame: object) -> None:
        now = time.monotonic()
        if self.signum is None:
            self.signum, self.first_at = signum, now
        elif signum != self.signum or now - self.first_at >= SAME_SIGNAL_S:
            raise KeyboardInterrupt  # a second Ctrl-C: stop at once

    def __call__(self) -> bool:
        if self.signum is not None and not self.told:
            self.told = True
            if self.on_first is not None:
                with contextlib.suppress(Exception):  # saying so must never stop training
                    self.on_first(self.signum)
        return self.signum is not None


def start(
    experiment: Experiment,
    out: Path | None,
    observer: Observer | None = None,
    out_name: str = "--out",
) -> Outcome:
    """Train a new run (or group of seeds) into `out` (default: a fresh folder under runs/);
    errors name it `out_name`, as the caller does."""
    if out is not None and out.exists() and not out.is_dir():
        raise JabError(f"{out} is a file; choose another {out_name} (a new or empty folder)")
    if out is not None and out.exists() and any(out.iterdir()):
        raise JabError(
            f"{out} already exists and is not an empty folder; choose another {out_name}"
        )
    from jabcli.training.training import check

    check(experiment)
    observer = observer or Observer()
    # A Ctrl-C while the folder is made stops training at step 0.
    with StopRequest(getattr(observer, "stopping", None)) as stop, Claim() as claim:
        path, created = create(experiment, out, claim)
        return _train(path, created, experiment, None, observer, stop, claim)


def resume(path: Path | None, steps: int | None, observer: Observer | None = None) -> Outcome:
    """Continue a run or group from its newest valid checkpoint; `steps` extends it, and
    is saved in the run so that a later plain resume aims for the same step. A run killed
    before its first checkpoint (of every seed) starts again from step 0."""
    path, seeds = runs.open_runs(path)
    for run in seeds:  # before anything is said about its checkpoints
        run.check_not_running()
    cfg, tokenizer, saved_steps = runs.group_config(path, seeds)
    cfg.train.steps = max(saved_steps) if steps is None else steps
    from jabcli.experiment.experiment import Experiment

    experiment = Experiment.create(cfg, tokenizer)
    observer = observer or Observer()
    from jabcli.training.training import check

    step, arrays = checkpoints.newest_common(seeds, warn=observer.warn)
    if arrays is None:  # from step 0, which _train says
        states = None
    else:
        states = [
            checkpoints.state_of(experiment, one, f"checkpoint at step {step} in {run.path}")
            for run, one in zip(seeds, arrays)
        ]
        if step >= cfg.train.steps:
            reached = f"{path} already reached step {step} of {cfg.train.steps}"
            if steps is not None and step > steps:
                reached = f"{path} is already at step {step}, and --steps {steps} is not beyond it"
            raise JabError(f"{reached}; pass a larger --steps to continue")
        # Training stopped there with the target reached: a plain resume would only stop.
        if steps is None and every_seed([run.at_target(step) for run in seeds]):
            raise JabError(
                f"{path} stopped at step {step}, where its held-out exact match reached "
                f"its target ({100 * cfg.train.target_seq_acc:g}%): nothing to resume"
            )
    check(experiment)
    with StopRequest(getattr(observer, "stopping", None)) as stop, contextlib.ExitStack() as locks:
        for run in seeds:
            locks.enter_context(run.lock())
        for run, saved in zip(seeds, saved_steps):
            if saved != cfg.train.steps:
                run.set_steps(cfg.train.steps)
        return _train(path, seeds, experiment, (step, states), observer, stop)


def trained_enough(run: Run, steps: int) -> bool:
    """Whether `run` needs no more training towards `steps`: its newest checkpoint is at
    `steps` or past it, or training stopped there with the target reached."""
    listed = manifest.entries(run)
    step = listed[-1]["step"] if listed else 0
    return step >= steps or (bool(listed) and run.at_target(step))


def create(
    experiment: Experiment, out: Path | None, claim: Claim | None = None
) -> tuple[Path, list[Run]]:
    """A new run folder with its config, or a group folder with one run per seed, not
    trained yet (`resume` trains it from step 0), held by `claim` until it ends (by
    default, until this returns); on failure, nothing this process made is left behind,
    and nothing another process made is touched."""
    if claim is None:
        with Claim() as claim:
            return create(experiment, out, claim)
    cfg = experiment.config
    try:
        if out is None:
            path = claim.folder(runs.new_run_dir(cfg.task.name), made=True)
        else:
            path = claim.folder(out)
        if cfg.train.seeds == 1:
            return path, [Run.create(path, cfg, experiment.tokenizer)]
        seeds = cfg.train.group
        created = [
            Run.create(
                claim.folder(runs.seed_folder(path, seed)),
                for_seed(cfg, seed),
                experiment.tokenizer,
            )
            for seed in seeds
        ]
        runs.write_group(path, seeds)
        return path, created
    except BaseException:
        claim.discard()
        raise


def _train(
    path: Path,
    seeds: list[Run],
    experiment: Experiment,
    resumed: tuple[int, list[Any] | None] | None,
    observer: Observer,
    stop: StopRequest,
    claim: Claim | None = None,
) -> Outcome:
    """Train until done, early-stopped or interrupted, checkpointing along the way, the
    seeds' locks held by the caller; `resumed` is the step and the seeds' states to
    continue from (None: from the seeds), `claim` a new run's (None: a resume's)."""
    try:
        if resumed is not None:
            for run in seeds:
                checkpoints.forget_after(run, resumed[0])
                rejected = run.truncate_metrics(resumed[0])
                if rejected:
                    observer.note(
                        f"{rejected} unreadable line(s) of {run.path}/metrics.jsonl "
                        f"moved to {runs.REJECTED_METRICS}"
                    )
            observer.resuming(path, resumed[0], fresh=resumed[1] is None)
        states = resumed[1] if resumed is not None else None
        return _loop(path, seeds, experiment, states, observer, stop)
    except BaseException as err:
        try:
            saved = [manifest.entries(run) for run in seeds]
        except JabError:
            saved = None  # unreadable: keep the folder, whatever it holds
        removed = claim is not None and saved is not None and not any(saved)
        if claim is not None and removed:
            claim.discard()  # nothing worth keeping yet
        if isinstance(err, KeyboardInterrupt) and not isinstance(err, Interrupted):
            raise Interrupted(_kept(path, saved, removed), None if removed else path) from err
        raise


def _kept(path: Path, saved: list[list[CheckpointEntry]] | None, removed: bool) -> str:
    """What an interrupted session leaves behind, in words."""
    if removed:
        return f"run folder {path} removed: it had no checkpoint yet"
    if saved is not None and all(saved):
        step = min(entries[-1]["step"] for entries in saved)
        return f"run {path} kept; its newest checkpoint is at step {step}"
    if saved is not None:
        return f"run {path} kept; it has no checkpoint yet, so a resume starts from step 0"
    return f"run {path} kept"


def _loop(
    path: Path,
    seeds: list[Run],
    experiment: Experiment,
    states: list[Any] | None,
    observer: Observer,
    stop: StopRequest,
) -> Outcome:
    from jabcli.training.training import Trainer

    tr = experiment.config.train
    with waiting.polling(stop):  # a Ctrl-C while it compiles is answered at once
        trainer = Trainer(experiment, states)
    saved_step = trainer.step if states is not None else -1  # a resumed step is saved

    def save(results: list[HeldOutResult] | None = None) -> None:
        nonlocal saved_step
        step = trainer.step
        for n, (run, state) in enumerate(zip(seeds, trainer.states())):
            accuracy = results[n].scores["seq_acc"] if results else None
            arrays = checkpoints.arrays_of(state)
            checkpoints.save(run, arrays, step, accuracy, tr.keep_checkpoints, trainer.flops)
        saved_step = step

    group = path if path != seeds[0].path else None
    logs = Logs.open(experiment.config, seeds, group, trainer.step, observer.note)

    def on_eval(results: list[HeldOutResult]) -> None:
        observer.evaluated(results)
        logs.evaluated(results)
        save(results)

    def on_log(records: list[LogRecord]) -> None:
        for run, record in zip(seeds, records):
            run.append_metrics(record)
        logs.log(records)
        observer.log(records)

    observer.begin(path, experiment, trainer.step, trainer.parameters, trainer.flops)
    try:
        outcome = trainer.run(on_log=on_log, on_eval=on_eval, should_stop=stop)
    except FloatingPointError as err:
        kept = (
            "the last good checkpoint is kept"
            if saved_step >= 0 or states is not None
            else "no checkpoint had been saved yet"
        )
        raise JabError(
            f"{err}; stopped, {kept}. Try a smaller train.learning_rate (for example 3e-4)"
        ) from None
    finally:
        logs.close()
        observer.end()
    if saved_step != outcome.step:
        save()
    ended = Outcome(
        **vars(outcome),  # the Trainer's `Trained`, as it is
        path=path,
        runs=seeds,
        target_seq_acc=tr.target_seq_acc,
        interrupted_by=stop.signum,
    )
    if ended.reached_target:  # a signal in the chunk that reached it: training is done
        ended.interrupted_by = None
    return ended
