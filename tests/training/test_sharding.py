"""Data-parallel training over several devices gives the losses of one device."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


def chunk_losses(seeds: int) -> list[list[float]]:
    """The losses of 4 train chunks of 10 steps on a small copy model, `seeds` at once:
    the sharded chunks that Trainer.run feeds, without evaluation."""
    import jax.numpy as jnp

    from jabcli.experiment.resolve import resolve
    from jabcli.training.training import Trainer

    sets = ["task.max_len=6", "model.d_model=32", "model.d_ff=64", "model.num_layers=1",
            "train.batch_size=16", "train.log_every=10"]  # fmt: skip
    trainer = Trainer(resolve("copy", sets=sets, seeds=seeds))
    losses = []
    for _ in range(4):
        trainer.state, metrics = trainer.chunk(trainer.state, jnp.asarray(10, jnp.int32))
        losses.append(jnp.ravel(metrics["loss"]).tolist())
    return losses


# The same chunks, one seed then 4, in a process that sees `devices` CPU devices.
ON_CPU_DEVICES = """
import json, sys, jax
sys.path.insert(0, sys.argv[1])
from jabcli.core import runtime
runtime.configure()
from test_sharding import chunk_losses
print(json.dumps({"devices": jax.device_count(), "losses": [chunk_losses(1), chunk_losses(4)]}))
"""


def on_cpu_devices(devices: int) -> subprocess.Popen:
    """A process running ON_CPU_DEVICES on `devices` CPU devices, on any machine (one
    with a GPU too: the CPU's devices are the ones that can be split here)."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    return subprocess.Popen(
        [sys.executable, "-c", ON_CPU_DEVICES, str(Path(__file__).parent)],
        env={**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def losses_of(process: subprocess.Popen) -> tuple[int, list]:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    return result["devices"], result["losses"]


def test_splitting_the_batch_or_the_seeds_over_4_devices_gives_the_losses_of_one():
    import jax

    four_devices = on_cpu_devices(4)  # it compiles while this process, on one device, does
    if jax.default_backend() == "cpu":
        four_seeds = np.asarray(chunk_losses(4))
    else:  # on a GPU: one CPU device, as the four are (the figures of a GPU differ a little)
        four_seeds = np.asarray(losses_of(on_cpu_devices(1))[1][1])
    assert four_seeds.shape == (4, 4)  # 4 chunks, 4 seeds
    assert len({tuple(column) for column in four_seeds.T}) == 4  # the seeds differ
    devices, losses = losses_of(four_devices)
    assert devices == 4
    batch_split, seeds_split = map(np.asarray, losses)
    # One seed, its batch split over the devices: seed 0's losses (a group's first seed
    # trains as the run of that seed alone does).
    assert np.ravel(batch_split) == pytest.approx(four_seeds[:, 0], rel=1e-4)
    # Four seeds, one on each device.
    assert np.ravel(seeds_split) == pytest.approx(np.ravel(four_seeds), rel=1e-4)


def test_a_batch_that_does_not_divide_over_the_devices_is_a_clear_error(tmp_path):
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=3"
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu", "NO_COLOR": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jabcli",
            "train",
            "--task",
            "copy",
            "--set",
            "train.batch_size=16",
            "--out",
            "never",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "must divide evenly over the 3 devices" in result.stderr
    assert not (tmp_path / "never").exists()
