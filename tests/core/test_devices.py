"""jab on a GPU as on a CPU: its memory checks read the GPU's memory, its matmuls are float32,
a study's processes share the GPU, and a Ray cell gets the part of a GPU it asked for. The
suite needs no GPU: a GPU is stood in for where the code asks JAX or Ray about one."""

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import jax
import pytest
from jabrun import TINY_SETS, jab_here

from jabcli.core import devices, memory
from jabcli.core.errors import JabError

GiB = 2**30


class StandInGpu:
    """What JAX says of a GPU's device: its platform and its allocator's statistics."""

    platform = "gpu"

    def __init__(self, stats: dict | None) -> None:
        self.stats = stats

    def memory_stats(self) -> dict | None:
        return self.stats


def test_a_config_too_large_for_the_gpus_free_memory_is_refused_though_the_host_has_room(
    monkeypatch,
):
    """On a GPU the figure is what its allocator may still hand out (its limit, less what is
    in use), not the host's memory: the refusal names the GPU's."""
    gpu = StandInGpu({"bytes_limit": 2 * GiB, "bytes_in_use": GiB // 2})
    monkeypatch.setattr(jax, "devices", lambda *backend: [gpu])
    monkeypatch.setattr("builtins.open", None)  # the host's /proc/meminfo is never read
    assert memory.available_bytes() == 3 * GiB // 2
    memory.check(GiB, "a training step", "train.batch_size")  # fits in 1.5 GiB x HEADROOM
    with pytest.raises(JabError) as refused:
        memory.check(2 * GiB, "a training step", "train.batch_size")
    assert str(refused.value) == (
        "a training step needs about 2.0 GiB of GPU memory, but only 1.5 GiB is available; "
        "lower train.batch_size"
    )


@pytest.mark.parametrize("stats", [None, {"bytes_in_use": 0}], ids=["no stats", "no limit"])
def test_a_device_that_does_not_say_its_memory_refuses_nothing(monkeypatch, stats):
    monkeypatch.setattr(jax, "devices", lambda *backend: [StandInGpu(stats)])
    assert memory.available_bytes() is None
    memory.check(2**60, "a training step", "train.batch_size")


def test_the_figure_is_the_default_devices_own():
    """On the machine the suite runs on: the host's available memory on a CPU, what the
    GPU's allocator may still hand out on a GPU (benchmarks/device_check.sh runs this file
    on one)."""
    device = jax.devices()[0]
    if device.platform == "cpu":
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        total = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1])
        assert 0 < memory.available_bytes() <= total * 1024
    else:
        assert 0 < memory.available_bytes() <= device.memory_stats()["bytes_limit"]


def test_every_matmul_of_a_training_step_is_float32_on_every_device():
    """jab's choice, on a GPU too, where JAX's default would round a float32 matmul's
    inputs to TensorFloat-32: every dot of the lowered step (what a GPU compiles) says so."""
    from jabcli.experiment.resolve import resolve
    from jabcli.training.training import Schedule, state_shapes, update

    assert jax.config.jax_default_matmul_precision == devices.MATMUL_PRECISION == "float32"
    experiment = resolve("copy", sets=TINY_SETS)
    schedule = Schedule.of(experiment.config.train)
    step = jax.jit(lambda state: update(experiment, state, schedule))
    text = step.lower(state_shapes(experiment)).as_text()
    dots = [line for line in text.splitlines() if "stablehlo.dot_general" in line]
    assert dots and all("precision = [HIGHEST, HIGHEST]" in line for line in dots)


def test_a_matmul_precision_the_user_chose_is_kept():
    chosen = subprocess.run(
        [
            sys.executable,
            "-c",
            "import jax; from jabcli.core import runtime; runtime.configure(no_cache=True); "
            "print(jax.config.jax_default_matmul_precision)",
        ],
        env={**os.environ, "JAX_DEFAULT_MATMUL_PRECISION": "tensorfloat32"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.strip() == "tensorfloat32"


def test_decoding_runs_chunks_side_by_side_on_a_cpu_only(monkeypatch):
    """On a CPU a small program keeps one core busy, so chunks go side by side; a GPU runs
    each chunk on all of itself, and would only get smaller chunks."""
    assert 1 <= devices.programs_side_by_side() <= 4
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert devices.programs_side_by_side() == 1


def test_a_study_driver_never_takes_the_gpus_memory_up_front(tmp_path, monkeypatch):
    """JAX's client would take three quarters of a GPU when the driver's checks start it,
    leaving its cells the rest; the driver takes memory as it needs it, as its workers do,
    unless the user said otherwise."""
    name = "XLA_PYTHON_CLIENT_PREALLOCATE"
    study = tmp_path / "s.yaml"
    study.write_text("base: {task: copy, steps: 10}\nrows: [{name: a, set: {model.nope: 1}}]\n")
    for before, after in ((None, "false"), ("true", "true")):
        monkeypatch.setenv(name, "set by the test")  # (restored at the test's end)
        if before is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, before)
        refused = jab_here("study", "run", study, "--out", "out", cwd=tmp_path, check=False)
        assert refused.returncode == 2 and "model.nope" in refused.stderr  # after the setting
        assert os.environ[name] == after


@pytest.mark.parametrize(
    ("gpus", "set_before", "added"),
    [
        (0.25, {}, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.1875"}),
        (0.5, {}, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.375"}),
        (1, {}, {}),
        (2, {}, {}),
        (0, {}, {"JAX_PLATFORMS": "cpu"}),
        (0.5, {"XLA_CLIENT_MEM_FRACTION": "0.2"}, {}),
        (0, {"JAX_PLATFORMS": "cuda"}, {}),
    ],
)
def test_a_ray_cell_worker_gets_its_part_of_a_gpu_or_the_cpu_when_it_asked_for_none(
    monkeypatch, gpus, set_before, added
):
    """A part of a GPU: that part of what JAX takes of a whole one (0.75), so that the cells
    sharing it fit side by side. Whole GPUs: nothing added (Ray's CUDA_VISIBLE_DEVICES says
    which). None: the CPU, not a GPU Ray gave to another cell. The user's own setting stays."""
    for name in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION", "JAX_PLATFORMS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in set_before.items():
        monkeypatch.setenv(name, value)
    assert devices.cell_environment(gpus) == added


class Call:
    """A Ray actor's method or a remote function: `.remote(...)` gives `answer`."""

    def __init__(self, answer) -> None:
        self.answer = answer

    def remote(self, *args):
        return self.answer


class StandInRay:
    """The few calls of Ray's that RayCells and a cell's task make, on a cluster of one node
    with 4 CPUs and 1 GPU, recording what a task asks for; `gpus`: what Ray assigned it."""

    def __init__(self, gpus: float = 0.0) -> None:
        self.asked: list[dict] = []
        self.assigned = {"CPU": 1.0, **({"GPU": gpus} if gpus else {})}

    def is_initialized(self) -> bool:
        return True  # a cluster joined already: nothing to connect or shut down

    def nodes(self) -> list[dict]:
        return [{"Alive": True, "Resources": {"CPU": 4.0, "GPU": 1.0}}]

    def remote(self, **resources):
        self.asked.append(resources)
        return Call

    def get(self, value):
        return value

    def get_runtime_context(self):
        return type("Context", (), {"get_assigned_resources": lambda _: self.assigned})()


def test_a_ray_cell_asks_ray_for_the_gpus_per_cell(tmp_path, monkeypatch):
    from jabcli.studies.ray_backend import RayCells

    ray = StandInRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    cells = RayCells("auto", 2.0, 0.25)
    assert cells.describe() == "as Ray tasks on auto (2 CPU, 0.25 GPU each)"
    with cells.open(tmp_path):
        pass
    assert ray.asked[-1] == {"num_cpus": 2.0, "num_gpus": 0.25, "max_retries": 0}
    with pytest.raises(JabError) as refused, RayCells("auto", 1.0, 2.0).open(tmp_path):
        pass
    assert str(refused.value) == (
        "--gpus-per-cell 2, but no node of the Ray cluster at auto has more than 1 GPU"
    )


def test_a_ray_cells_worker_starts_with_the_part_of_the_gpu_ray_assigned(tmp_path, monkeypatch):
    """The task passes what Ray assigned it on to the worker process it starts, on top of the
    node's environment (where Ray set CUDA_VISIBLE_DEVICES)."""
    from jabcli.studies import ray_backend

    monkeypatch.setitem(sys.modules, "ray", StandInRay(gpus=0.5))
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    monkeypatch.delenv("XLA_CLIENT_MEM_FRACTION", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # as Ray sets it for the task
    started = {}

    class Popen:  # the worker: what it was started with, and an exit at once
        def __init__(self, command, env, **_):
            started.update(command=command, env=env)
            self.returncode, self.stdout = 0, io.BytesIO(b"")

        def poll(self):
            return self.returncode

    monkeypatch.setattr(subprocess, "Popen", Popen)
    coordinator = type("Coordinator", (), {"begin": Call(True), "stopping": Call([])})
    cell = tmp_path / "cell"
    (cell / "seed-0").mkdir(parents=True)
    code, _, data, _ = ray_backend.ray_cell(b"{}", "cell", ray_backend.archive(cell), coordinator)
    assert code == 0 and started["command"][-1] == "cell"
    assert started["env"]["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.375"
    assert started["env"]["CUDA_VISIBLE_DEVICES"] == "3"  # Ray's, left as it set it
    assert started["env"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    with tarfile.open(fileobj=io.BytesIO(data)) as back:  # the cell's folder comes back
        assert "cell/seed-0" in back.getnames()
