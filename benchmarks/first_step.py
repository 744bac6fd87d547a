"""Time to the first training step in a fresh process (a helper of benchmarks/run.py).

    python benchmarks/first_step.py [--task reverse]

Imports jab, turns on the persistent compilation cache the way `jab train` does
(`jabcli.core.runtime.configure()`, so JAB_NO_CACHE=1 and XDG_CACHE_HOME apply), builds the
task preset's Experiment, and runs the jitted `train_chunk` for one step. It prints one JSON
line, seconds since this script's first line, as soon as that step's result is ready;
the parent process measures the interpreter start on top of that.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reverse")
    args = parser.parse_args()

    from jabcli.core import runtime

    runtime.configure()
    import jax
    import jax.numpy as jnp

    from jabcli.experiment.resolve import resolve
    from jabcli.training.training import Trainer

    imported = time.perf_counter()
    trainer = Trainer(resolve(args.task))
    jax.block_until_ready(trainer.state)
    initialised = time.perf_counter()
    state, metrics = trainer.chunk(trainer.state, jnp.asarray(1, jnp.int32))
    jax.block_until_ready((state, metrics))
    done = time.perf_counter()

    print(
        json.dumps(
            {
                "since_script_start_s": done - START,
                "import_s": imported - START,
                "init_s": initialised - imported,
                "first_step_s": done - initialised,
                "cache_dir": jax.config.jax_compilation_cache_dir,
            }
        ),
        flush=True,
    )  # the parent stops its clock on this line, not on interpreter exit


if __name__ == "__main__":
    main()
