"""What is kept on disk beside the compilation cache: a model's facts (jabcli/core/runtime.py,
`remembered`) and its compiled programs (jabcli/core/program_store.py): a second process
loads what the first compiled and computes the same, a damaged or failing entry is only a
miss, and the store keeps within its disk budget."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from jabrun import TINY, compiling, env

from jabcli.core.errors import JabError

ROOT = Path(__file__).resolve().parents[2]


def test_a_model_traced_once_is_not_traced_again_and_a_broken_cache_entry_is_only_a_miss(
    trained, monkeypatch, tmp_path
):
    """The parameters' names and shapes, which loading a checkpoint checks against, are
    kept beside the compilation cache: a second `jab predict` reads them, a run of
    another config gets its own, and a damaged entry is found again, never trusted."""
    from jabcli.core import runtime
    from jabcli.inspection import inspection
    from jabcli.runs.runs import Run
    from jabcli.training import checkpoints, manifest, training

    monkeypatch.setattr(runtime, "caching", True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # not the cache other tests share
    traced = []
    shapes = training.state_shapes
    monkeypatch.setattr(
        training, "state_shapes", lambda e: traced.append(e.config.model.d_model) or shapes(e)
    )
    first = inspection.load(trained / "runs/tiny")
    again = inspection.load(trained / "runs/tiny")
    assert traced == [16]  # the second load read the shapes from disk
    assert first.params.keys() == again.params.keys()
    for module in first.params:
        for name, value in first.params[module].items():
            np.testing.assert_array_equal(value, again.params[module][name])

    experiment = first.experiment
    wider = type(experiment).create(
        dataclasses.replace(
            experiment.config,
            model=dataclasses.replace(experiment.config.model, d_model=32),
        )
    )
    assert runtime.remembered(wider, "parameter layout", lambda: "computed") == "computed"

    facts = runtime.cache_dir().parent / "facts"
    for entry in facts.glob("*.pkl"):
        entry.write_bytes(b"not a pickle")
    inspection.load(trained / "runs/tiny")
    assert traced == [16, 16]

    run = Run.open(trained / "runs/tiny")
    arrays = checkpoints.load(run, manifest.entry(run, "latest"))
    arrays.pop(next(name for name in arrays if name.startswith("params")))
    with pytest.raises(JabError, match=r"checkpoint x does not fit its config \(params\["):
        checkpoints.params_of(experiment, arrays, "checkpoint x")


def test_a_second_predict_loads_its_compiled_program_and_a_damaged_one_is_only_a_miss(
    trained, tmp_path
):
    """A warm `jab predict` neither traces nor compiles its decoding program: the first
    one kept it whole on disk. A stored program that does not read is compiled again
    and stored again, though the compilation cache holds it (that copy would not run)."""

    def predict() -> tuple[str, str]:
        result = subprocess.run(
            [sys.executable, "-m", "jabcli", "predict", "--run", trained / "runs/tiny", "1230"],
            env={**env(), "XDG_CACHE_HOME": str(tmp_path), "JAX_LOG_COMPILES": "1"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout, result.stderr

    first, log = predict()
    assert compiling("answer", log)
    stored = list((tmp_path / "jab/programs").glob("*.bin"))
    assert len(stored) == 1
    again, log = predict()
    assert again == first
    assert "jit(answer)" not in log and "tracing answer" not in log
    stored[0].write_bytes(b"not a program")
    damaged, log = predict()
    assert damaged == first
    assert compiling("answer", log)
    # The compilation cache held it: it was compiled again without it, to be stored.
    assert stored[0].read_bytes() != b"not a program"
    again, log = predict()
    assert again == first
    assert "jit(answer)" not in log


def test_a_second_training_process_loads_its_compiled_programs_and_trains_the_same(tmp_path):
    """The first `jab train` of a config keeps its training and initialisation programs
    whole on disk; the next process that trains it traces and compiles neither, and its
    run is the same to the bit. Another version of jab (its code changed where these
    programs do not) training a config that differs only where no program does (its
    step count, its seed) compiles and stores nothing new."""

    def train(out: str, *more: str, code: Path | None = None) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "jabcli", "train", *TINY, "--steps", "60", *more, "--out", out],
            cwd=tmp_path,
            env={
                **env(),
                "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "JAX_LOG_COMPILES": "1",
                **({"PYTHONPATH": str(code)} if code else {}),
            },
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        return result.stderr

    log = train("first")
    assert compiling("train_chunk", log) and compiling("init_state", log)
    assert "Finished XLA compilation of jit(train_chunk)" in log
    stored = set((tmp_path / "cache/jab/programs").glob("*.bin"))
    assert len(stored) >= 2
    log = train("second")
    assert not compiling("train_chunk", log) and not compiling("init_state", log)
    assert "jit(train_chunk)" not in log and "jit(init_state)" not in log
    another = tmp_path / "another-jab"  # its code and presets, one of its files changed
    for folder in ("jabcli", "tasks"):
        shutil.copytree(ROOT / folder, another / folder)
    with open(another / "jabcli" / "cli" / "cli.py", "a") as changed:
        changed.write("\n# another version of jab\n")
    names = set((tmp_path / "cache/jab/programs").glob("*.key"))
    # Another version of jab, training another step count with another seed: the same
    # programs, found by what they compute.
    log = train("another", "--steps", "40", "--seed", "1", code=another)
    for program in ("train_chunk", "init_state"):
        assert f"Finished XLA compilation of jit({program})" not in log
    assert set((tmp_path / "cache/jab/programs").glob("*.bin")) == stored
    assert set((tmp_path / "cache/jab/programs").glob("*.key")) > names  # its own names
    first, second = (tmp_path / name / "metrics.jsonl" for name in ("first", "second"))
    losses = [
        [r.get("loss") for r in map(json.loads, m.read_text().splitlines())]
        for m in (first, second)
    ]
    assert losses[0] == losses[1] and any(losses[0])


def test_stored_programs_past_their_disk_budget_lose_the_ones_used_longest_ago(tmp_path):

    from jabcli.core import program_store

    for age, name in enumerate(["new", "middle", "old"]):
        (tmp_path / f"{name}.bin").write_bytes(b"x" * 100)
        os.utime(tmp_path / f"{name}.bin", (1e9 - age, 1e9 - age))
        (tmp_path / f"{name}.key").write_text(f"{name}.bin")  # a config naming it
        os.utime(tmp_path / f"{name}.key", (1e9 - age, 1e9 - age))
    (tmp_path / "empty.key").write_text("")  # a name cut short: names nothing
    program_store.trim(tmp_path, 250)
    assert sorted(p.stem for p in tmp_path.glob("*.bin")) == ["middle", "new"]
    assert sorted(p.stem for p in tmp_path.glob("*.key")) == ["middle", "new"]
    program_store.trim(tmp_path, 250, names=1)  # more names than kept: the oldest go
    assert len(list(tmp_path.glob("*.bin"))) == 2
    assert [p.stem for p in tmp_path.glob("*.key")] == ["new"]


def test_a_stored_program_that_fails_its_first_run_is_removed_and_compiled_again(tmp_path):
    """jaxlib 0.10 on the CPU may give back a stored program that loads, then fails to
    run ("Function ... not found"): the answer still comes, from a program compiled here,
    and a training state handed to the failed run is still whole for it."""
    import jax
    import jax.numpy as jnp

    from jabcli.core import program_store

    def broken(x, y):
        x.delete()  # as a program that takes over its argument's buffer may have
        raise jax.errors.JaxRuntimeError("NOT_FOUND: Function broadcast_compare_fusion not found")

    stored = tmp_path / "program.bin"
    stored.write_bytes(b"a stored program")
    lower = jax.jit(lambda x, y: x * 2 + y, donate_argnums=0).lower(jnp.arange(3), 1)
    program = program_store.StoredProgram(broken, stored, lower.compile, donated=(0,))
    state = jnp.arange(3)
    np.testing.assert_array_equal(program(state, 1), [1, 3, 5])  # state was still whole
    assert not stored.exists()
    np.testing.assert_array_equal(program(jnp.arange(3) + 1, 1), [3, 5, 7])


def test_programs_that_read_different_arguments_are_stored_apart(tmp_path, monkeypatch):
    """Two programs whose text is the same once their unused argument is dropped (x*2+y
    and x*2+z) are two programs: the second config does not load the first's."""
    from types import SimpleNamespace

    import jax

    from jabcli.core import program_store, runtime

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(runtime, "caching", True)
    experiment = SimpleNamespace(  # what runtime.Keyed reads of an experiment
        keyed_settings="{}",
        tokenizer=SimpleNamespace(tokens=[]),
        code_digest="",
        storable=True,
    )
    reads_y = jax.jit(lambda x, y, z: x * 2 + y).lower(1.0, 2.0, 100.0)
    reads_z = jax.jit(lambda x, y, z: x * 2 + z).lower(1.0, 2.0, 100.0)
    first = program_store.stored_program(experiment, "reads y", lambda: reads_y)
    second = program_store.stored_program(experiment, "reads z", lambda: reads_z)
    assert float(first(1.0, 2.0, 100.0)) == 4.0
    assert float(second(1.0, 2.0, 100.0)) == 102.0
    assert len(list((tmp_path / "jab/programs").glob("*.bin"))) == 2


def test_a_users_task_file_in_another_folder_finds_the_programs_compiled_for_it(tmp_path):
    """A user's file is told apart by what it holds, not where it lies: the same file in
    another folder (a study cell's temporary one on Ray, a moved project) is the same
    experiment and keeps its programs and facts under the same name; an edited one not."""
    import re

    from jabcli.core import runtime
    from jabcli.experiment.resolve import resolve

    code = re.search(r"```python\n(.*?)```", (ROOT / "docs/own-task.md").read_text(), re.S)
    edited = code.group(1) + "\n# edited\n"
    for folder, text in (("here", code.group(1)), ("there", code.group(1)), ("edit", edited)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "ends.py").write_text(text)
    here, there, edit = (
        resolve(f"{tmp_path / folder}/ends.py:Ends", sets=["task.max_len=6"])
        for folder in ("here", "there", "edit")
    )
    assert here.config.task.name != there.config.task.name  # each names its own file
    assert here == there and hash(here) == hash(there)
    kept = [runtime.kept_path(e, "programs", "train_chunk", ".key") for e in (here, there, edit)]
    assert kept[0] == kept[1]
    assert here != edit and kept[2] != kept[0]
