"""`jab train`: a Trainer wired to a run folder, the live view and the signals.

Ctrl-C or SIGTERM stops the loop between two chunks; the current step is saved and
the process exits with 130 or 143 after printing the command that resumes it.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from jabcli import runs
from jabcli.config import Config
from jabcli.errors import JabError
from jabcli.runs import Run
from jabcli.tokenizer import Tokenizer


class StopRequest:
    """Turns SIGINT/SIGTERM into a flag the training loop polls."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __enter__(self) -> "StopRequest":
        self._previous = {
            s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)
        }
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _handle(self, signum, frame) -> None:
        if self.signum is not None:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        self.signum = signum

    def __call__(self) -> bool:
        return self.signum is not None


def start(cfg: Config, out: Path | None, no_cache: bool) -> None:
    path = out or runs.new_run_dir(cfg.task.name)
    if path.exists() and any(path.iterdir()):
        raise JabError(
            f"{path} already exists and is not empty; choose another --out or --resume it"
        )
    _train(cfg, Tokenizer(), path, None, no_cache)


def resume(path: Path | None, steps: int | None, no_cache: bool) -> None:
    run = Run.open(path)
    cfg, tokenizer = run.load_config()
    if steps is not None:
        if steps <= 0:
            raise JabError(f"--steps must be positive, got {steps}")
        cfg.train.steps = steps
    _train(cfg, tokenizer, run.path, run, no_cache)


def _train(
    cfg: Config, tokenizer: Tokenizer, path: Path, existing: Run | None, no_cache: bool
) -> None:
    from jabcli import runtime

    runtime.configure(no_cache)
    import jax

    from jabcli.display import TrainView, console, summary
    from jabcli.train import Setup, Trainer, check_devices, state_from_arrays, state_to_arrays

    check_devices(cfg)
    setup = Setup.create(cfg, tokenizer)
    state = None
    run = existing or Run.create(path, cfg, tokenizer)
    with run.lock():
        if existing is not None:
            entry, arrays = run.newest_valid_checkpoint(
                warn=lambda m: console.print(f"[yellow]{m}[/]")
            )
            state = state_from_arrays(setup, arrays)
            run.truncate_metrics(entry["step"])
            if entry["step"] >= cfg.train.steps:
                raise JabError(
                    f"{run.path} already reached step {entry['step']} of {cfg.train.steps}; "
                    "pass a larger --steps to continue"
                )
            console.print(f"Resuming {run.path} from step {entry['step']}")
        trainer = Trainer(setup, state)
        console.print(
            f"Training [bold]{cfg.task.name}[/] (lengths {cfg.task.min_len}-{cfg.task.max_len}) "
            f"into {run.path} on {jax.device_count()} {jax.default_backend()} device(s)"
        )

        saved = {"step": -1}

        def save(step_eval: float | None = None) -> None:
            state = trainer.state
            run.save_checkpoint(
                state_to_arrays(state), int(state.step), step_eval, keep=cfg.train.keep_checkpoints
            )
            saved["step"] = int(state.step)

        def on_eval(result: dict) -> None:
            view.on_eval(result)
            save(result["seq_acc"])

        with (
            StopRequest() as stop,
            TrainView(cfg.train.steps, int(trainer.state.step), cfg.task.name) as view,
        ):
            try:
                outcome = trainer.run(
                    on_log=lambda r: (run.append_metrics(r), view.on_log(r)),
                    on_eval=on_eval,
                    should_stop=stop,
                )
            except FloatingPointError as err:
                raise JabError(
                    f"{err}; stopped, the last good checkpoint is kept. "
                    "Try a smaller train.learning_rate (for example --set train.learning_rate=3e-4)"
                ) from None
        if stop.signum is not None:
            save()
            step = int(trainer.state.step)
            console.print(f"Interrupted at step {step}; checkpoint saved in {run.path}")
            console.print(f"Resume with: jab train --resume {run.path}")
            sys.exit(128 + stop.signum)
        if saved["step"] != outcome["step"]:
            save()
    console.print()
    console.print(summary(str(run.path), outcome, cfg.train.target_seq_acc))
    console.print(f"Next: jab eval --run {run.path}   |   jab show-attention --run {run.path}")
