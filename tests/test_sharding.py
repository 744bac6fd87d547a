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
losses = {}
for seeds in map(int, sys.argv[1:]):  # 1: one model, its batch split; 4: the seeds axis split
    experiment = resolve("copy", sets=["task.max_len=6", "model.d_model=32", "model.d_ff=64",
                                       "model.num_layers=1",
                                       "train.batch_size=16", "train.log_every=10"],
                         seeds=seeds)
    trainer = Trainer(experiment)
    losses[seeds] = []
    for _ in range(4):  # the sharded train chunks that Trainer.run feeds, without evaluation
        trainer.state, metrics = trainer.chunk(trainer.state, jnp.asarray(10, jnp.int32))
        losses[seeds].append(jnp.ravel(metrics["loss"]).tolist())
print(json.dumps({"devices": jax.device_count(), "losses": losses}))
"""


def start(devices: int, *seeds: int) -> subprocess.Popen:
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    env = {**os.environ, "XLA_FLAGS": flags}
    return subprocess.Popen(
        [sys.executable, "-c", LOSSES, *map(str, seeds)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def losses(proc: subprocess.Popen, devices: int) -> dict[str, list]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["devices"] == devices
    return result["losses"]


def test_splitting_the_batch_over_2_or_4_devices_or_4_seeds_over_2_gives_the_losses_of_one():
    procs = {1: start(1, 1, 4), 2: start(2, 1, 4), 4: start(4, 1)}  # compile side by side
    one, two, four = (losses(procs[d], d) for d in (1, 2, 4))
    assert np.asarray(one["4"]).shape == (4, 4)  # 4 chunks, 4 seeds
    assert len({tuple(column) for column in np.asarray(one["4"]).T}) == 4  # the seeds differ
    for seeds in ("1", "4"):
        assert np.ravel(two[seeds]) == pytest.approx(np.ravel(one[seeds]), rel=1e-4)
    assert np.ravel(four["1"]) == pytest.approx(np.ravel(one["1"]), rel=1e-4)


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
