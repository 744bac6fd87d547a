"""Data-parallel training over several devices gives the losses of one device."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

LOSSES = """
import json, sys, jax, jax.numpy as jnp
from jabcli import runtime
runtime.configure()
from jabcli.experiment import resolve
from jabcli.training import Trainer
experiment = resolve("copy", sets=["task.max_len=6", "model.d_model=32", "model.d_ff=64",
                                   "model.num_layers=1",
                                   "train.batch_size=16", "train.log_every=10"],
                     seeds=int(sys.argv[1]))
trainer = Trainer(experiment)
losses = []
for _ in range(4):  # the sharded train chunks that Trainer.run feeds, without its evaluation
    trainer.state, metrics = trainer.chunk(trainer.state, jnp.asarray(10, jnp.int32))
    losses.append(jnp.ravel(metrics["loss"]).tolist())
print(json.dumps({"devices": jax.device_count(), "losses": losses}))
"""


def start(devices: int, seeds: int = 1) -> subprocess.Popen:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    return subprocess.Popen(
        [sys.executable, "-c", LOSSES, str(seeds)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def losses(proc: subprocess.Popen, devices: int) -> list[float]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["devices"] == devices
    return result["losses"]


def test_splitting_the_batch_over_2_or_4_devices_gives_the_losses_of_one():
    procs = {devices: start(devices) for devices in (1, 2, 4)}  # compile side by side
    one, two, four = (np.ravel(losses(procs[d], d)) for d in (1, 2, 4))
    assert two == pytest.approx(one, rel=1e-4)
    assert four == pytest.approx(one, rel=1e-4)


def test_splitting_4_seeds_over_2_devices_gives_the_losses_of_one_device():
    procs = {devices: start(devices, seeds=4) for devices in (1, 2)}
    one, two = (np.asarray(losses(procs[d], d)) for d in (1, 2))
    assert one.shape == (4, 4)  # 4 chunks, 4 seeds
    assert len({tuple(column) for column in one.T}) == 4  # the seeds differ
    assert two == pytest.approx(one, rel=1e-4)


def test_a_batch_that_does_not_divide_over_the_devices_is_a_clear_error(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=3", "NO_COLOR": "1"}
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
