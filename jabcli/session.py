"""`jab train`: a Trainer wired to a run folder, the live view and the signals.

Ctrl-C or SIGTERM stops the loop between two chunks; the current step is saved and
the process exits with 130 or 143 after printing the command that resumes it. A new
run that fails before its first checkpoint is removed, so runs/ never holds a run
that cannot be evaluated or resumed.
"""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from jabcli import runs
from jabcli.config import Config
from jabcli.errors import JabError
from jabcli.runs import Run
from jabcli.tokenizer import Tokenizer


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


def start(cfg: Config, out: Path | None, no_cache: bool) -> None:
    if out is not None and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise JabError(f"{out} already exists and is not an empty folder; choose another --out")
    with StopRequest() as stop:
        _train(cfg, Tokenizer(), out, None, no_cache, stop)


def resume(path: Path | None, steps: int | None, no_cache: bool) -> None:
    run = Run.open(path)
    cfg, tokenizer = run.load_config()
    if steps is not None:
        if steps <= 0:
            raise JabError(f"--steps must be positive, got {steps}")
        cfg.train.steps = steps
    with StopRequest() as stop:
        _train(cfg, tokenizer, run.path, run, no_cache, stop)


def _train(
    cfg: Config,
    tokenizer: Tokenizer,
    out: Path | None,
    existing: Run | None,
    no_cache: bool,
    stop: StopRequest,
) -> None:
    from jabcli import runtime

    runtime.configure(no_cache)
    from jabcli.display import console, summary
    from jabcli.train import Setup, check_devices

    check_devices(cfg)
    setup = Setup.create(cfg, tokenizer)
    run = existing or _create(cfg, tokenizer, out)
    try:
        with run.lock():
            outcome = _loop(run, setup, existing is not None, stop)
    except BaseException:
        if existing is None and not run.manifest()["checkpoints"]:
            shutil.rmtree(run.path, ignore_errors=True)  # nothing worth keeping yet
        raise
    if stop.signum is not None:
        console.print(f"Interrupted at step {outcome['step']}; checkpoint saved in {run.path}")
        console.print(f"Resume with: jab train --resume {run.path}")
        sys.exit(128 + stop.signum)
    console.print()
    console.print(summary(str(run.path), outcome, cfg.train.target_seq_acc))
    console.print(f"Next: jab eval --run {run.path}   |   jab show-attention --run {run.path}")


def _create(cfg: Config, tokenizer: Tokenizer, out: Path | None) -> Run:
    """A new run folder with its config; on failure, nothing of it is left behind."""
    existed = out is not None and out.is_dir()  # start() allows only an empty one
    path = out or runs.new_run_dir(cfg.task.name)
    try:
        return Run.create(path, cfg, tokenizer)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        if existed:
            path.mkdir()
        raise


def _resume_state(run: Run, setup: Any, console: Any) -> Any:
    """The training state of the newest valid checkpoint; newer broken ones are dropped."""
    from jabcli.train import state_from_arrays

    entry, arrays = run.newest_valid_checkpoint(warn=lambda m: console.print(f"[yellow]{m}[/]"))
    try:
        state = state_from_arrays(setup, arrays)
    except (KeyError, ValueError) as err:
        raise JabError(f"checkpoint {entry['file']} in {run.path} does not fit: {err}") from None
    steps = setup.cfg.train.steps
    if entry["step"] >= steps:
        raise JabError(
            f"{run.path} already reached step {entry['step']} of {steps}; "
            "pass a larger --steps to continue"
        )
    run.forget_after(entry["step"])
    run.truncate_metrics(entry["step"])
    console.print(f"Resuming {run.path} from step {entry['step']}")
    return state


def _loop(run: Run, setup: Any, resuming: bool, stop: StopRequest) -> dict[str, Any]:
    """Train until done, early-stopped or interrupted, checkpointing along the way."""
    import jax

    from jabcli.display import TrainView, console
    from jabcli.train import Trainer, state_to_arrays

    cfg = setup.cfg
    trainer = Trainer(setup, _resume_state(run, setup, console) if resuming else None)
    console.print(
        f"Training [bold]{cfg.task.name}[/] (lengths {cfg.task.min_len}-{cfg.task.max_len}) "
        f"into {run.path} on {jax.device_count()} {jax.default_backend()} device(s)"
    )
    saved_step = -1

    def save(eval_seq_acc: float | None = None) -> None:
        nonlocal saved_step
        step = int(trainer.state.step)
        arrays = state_to_arrays(trainer.state)
        run.save_checkpoint(arrays, step, eval_seq_acc, keep=cfg.train.keep_checkpoints)
        saved_step = step

    def on_eval(result: dict[str, Any]) -> None:
        view.on_eval(result)
        save(result["seq_acc"])

    with TrainView(cfg.train.steps, int(trainer.state.step), cfg.task.name) as view:
        try:
            outcome = trainer.run(
                on_log=lambda r: (run.append_metrics(r), view.on_log(r)),
                on_eval=on_eval,
                should_stop=stop,
            )
        except FloatingPointError as err:
            kept = (
                "the last good checkpoint is kept"
                if saved_step >= 0 or resuming
                else ("no checkpoint had been saved yet")
            )
            raise JabError(
                f"{err}; stopped, {kept}. Try a smaller train.learning_rate "
                "(for example --set train.learning_rate=3e-4)"
            ) from None
    if saved_step != outcome["step"]:
        save()
    return outcome
