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

    from jabcli.experiment import resolve
    from jabcli.training import Trainer

    sets = ["task.max_len=6", "model.d_model=32", "model.d_ff=64", "model.num_layers=1",
            "train.batch_size=16", "train.log_every=10"]  # fmt: skip
    trainer = Trainer(resolve("copy", sets=sets, seeds=seeds))
    losses = []
    for _ in range(4):
        trainer.state, metrics = trainer.chunk(trainer.state, jnp.asarray(10, jnp.int32))
        losses.append(jnp.ravel(metrics["loss"]).tolist())
    return losses


# The same chunks in a process that sees `devices` CPU devices.
ON_DEVICES = """
import json, sys, jax
sys.path.insert(0, sys.argv[1])
from jabcli import runtime
runtime.configure()
from test_sharding import chunk_losses
print(json.dumps({"devices": jax.device_count(), "losses": chunk_losses(int(sys.argv[2]))}))
"""


def start(devices: int, seeds: int) -> subprocess.Popen:
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    env = {**os.environ, "XLA_FLAGS": flags}
    return subprocess.Popen(
        [sys.executable, "-c", ON_DEVICES, str(Path(__file__).parent), str(seeds)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def losses(proc: subprocess.Popen, devices: int) -> list:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["devices"] == devices
    return result["losses"]


def test_splitting_the_batch_over_4_devices_or_4_seeds_over_2_gives_the_losses_of_one():
    four_devices, two_devices = start(4, 1), start(2, 4)  # they compile while this one does
    one_seed, four_seeds = chunk_losses(1), chunk_losses(4)  # this process: one device
    assert np.asarray(four_seeds).shape == (4, 4)  # 4 chunks, 4 seeds
    assert len({tuple(column) for column in np.asarray(four_seeds).T}) == 4  # the seeds differ
    assert np.ravel(losses(four_devices, 4)) == pytest.approx(np.ravel(one_seed), rel=1e-4)
    assert np.ravel(losses(two_devices, 2)) == pytest.approx(np.ravel(four_seeds), rel=1e-4)


def test_a_batch_that_does_not_divide_over_the_devices_is_a_clear_error(tmp_path):
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=3"
    env = {**os.environ, "XLA_FLAGS": flags, "NO_COLOR": "1"}
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
