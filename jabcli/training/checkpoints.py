"""Checkpoints: the training states a run saves, and how one is found and loaded again.

    <run>/checkpoints/
        step-00001200.npz  one training state as named arrays (no pickle)
        manifest.json      the checkpoints kept (manifest.py)

One naming scheme for a state's arrays: `step`, `rng`, and every leaf of the parameters
and of the optimizer state as its tree's name followed by its path, as
`jax.tree_util.keystr` writes it: `params['decoder/~/layer_0/mha/query']['w']`. Saving
names the leaves of the state; loading walks the same paths of the state the model's
init gives, so no name is ever parsed back, and an array missing or of another shape is
a checkpoint that does not fit its config.

A file is written whole before the manifest lists it. One is loaded only if its checksum,
its step and the fingerprint of its run's config (`runs.fingerprint`) agree: an edited
config is refused, a damaged file is a reason to fall back to an earlier checkpoint
(`newest_common` for a resume, `chosen` for the commands that look at a run).
"""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jabcli.core import runtime
from jabcli.core.errors import JabError
from jabcli.core.runtime import Lazy
from jabcli.runs.runs import Mismatch, Run, atomic_write, sha256
from jabcli.training.manifest import (
    MANIFEST,
    CheckpointEntry,
    Manifest,
    best_file,
    entry,
    file_name,
    manifest,
    repaired,
    write_manifest,
)

if TYPE_CHECKING:
    import numpy as np

    from jabcli.experiment.experiment import Experiment
    from jabcli.training.training import TrainingState
else:
    np = Lazy("numpy")  # `jab runs` reads manifests without importing numpy
TREES = ("params", "opt_state")  # the state's trees of arrays, in the order saved


def save(
    run: Run,
    arrays: dict[str, np.ndarray],
    step: int,
    eval_seq_acc: float | None,
    keep: int,
    flops_per_step: float | None = None,
) -> None:
    """Write a checkpoint, then list it; keep the newest `keep` and the best."""
    buffer = io.BytesIO()
    # numpy's stubs read a name in **arrays as its allow_pickle; no array is named so
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    data = buffer.getvalue()
    name = file_name(step)
    found = manifest(run)  # read first: a manifest is missing only if it was lost
    atomic_write(run.checkpoints / name, data)
    listed = [e for e in found["checkpoints"] if e["step"] != step]
    listed.append(
        {
            "file": name,
            "step": step,
            "sha256": sha256(data),
            "eval_seq_acc": eval_seq_acc,
            "config": run.fingerprint,
            "flops_per_step": flops_per_step,
        }
    )
    listed.sort(key=lambda e: e["step"])
    best = best_file(listed)
    kept = [e for e in listed if e in listed[-keep:] or e["file"] == best]
    write_manifest(run, found, kept)
    for e in listed:
        if e not in kept:
            with contextlib.suppress(OSError):
                (run.checkpoints / e["file"]).unlink()


def forget_after(run: Run, step: int) -> None:
    """Drop checkpoints newer than `step` (a resume that fell back past broken ones)."""
    found = manifest(run)
    newer = [e for e in found["checkpoints"] if e["step"] > step]
    if not newer:
        return
    write_manifest(run, found, [e for e in found["checkpoints"] if e["step"] <= step])
    for e in newer:
        with contextlib.suppress(OSError):
            (run.checkpoints / e["file"]).unlink()


def check_config(run: Run, listed: CheckpointEntry) -> None:
    """Refuse a checkpoint whose run config was edited by hand since it was saved."""
    if run.fingerprint is None:
        run.load_config()
    if listed.get("config", run.fingerprint) != run.fingerprint:
        raise Mismatch(
            f"{run.path}/config.yaml was edited after checkpoint {listed['file']} was "
            "saved (only train.steps may change, with jab resume --steps); restore it "
            "or train a new run"
        )


def load(run: Run, listed: CheckpointEntry) -> dict[str, np.ndarray]:
    """A checkpoint's arrays, checked against its checksum, step and run config."""
    check_config(run, listed)
    path = run.checkpoints / listed["file"]
    try:
        data = path.read_bytes()
    except OSError:
        raise JabError(f"checkpoint {path} is missing") from None
    if sha256(data) != listed["sha256"]:
        raise JabError(f"checkpoint {path} is corrupted (checksum mismatch)")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        # Junk with a matching checksum: unreadable all the same (a resume falls back).
        raise JabError(f"checkpoint {path} is corrupted (not a checkpoint file)") from None
    if "step" in arrays and int(arrays["step"]) != listed["step"]:
        raise Mismatch(
            f"{run.checkpoints}/{MANIFEST} says {listed['file']} is at step "
            f"{listed['step']}, but it holds step {int(arrays['step'])}"
        )
    return arrays


def chosen(
    run: Run, found: Manifest, which: str, note: Callable[[str], None]
) -> tuple[CheckpointEntry, dict[str, np.ndarray]]:
    """The checkpoint `which` (latest, best or a step number) of `run`, as its manifest
    `found` lists it, and its arrays. A latest or best one whose file is damaged gives
    way to the newest (or best) valid one, and `note` says so; a step asked for by number
    must be valid itself, or the error names the steps that are. An edited config is
    refused, as everywhere (`check_config`)."""
    wanted = entry(run, which, found)
    try:
        return wanted, load(run, wanted)
    except Mismatch:
        raise
    except JabError as err:
        damage = str(err)
    others = [e for e in found["checkpoints"] if e is not wanted]  # oldest first
    if which == "best":
        others.sort(key=lambda e: (e.get("eval_seq_acc") is not None, e.get("eval_seq_acc") or 0))
    if not which.isdigit():  # the one to fall back to first
        others.reverse()
    valid = []
    for other in others:
        try:
            arrays = load(run, other)
        except Mismatch:
            raise
        except JabError:
            continue
        valid.append(other["step"])
        if not which.isdigit():
            kind = "best" if which == "best" else "newest"
            note(f"{damage}; using step {other['step']}, the {kind} valid checkpoint")
            return other, arrays
    if not valid:
        raise JabError(f"{damage}, and {run.path} has no other valid checkpoint")
    steps = ", ".join(map(str, valid))
    raise JabError(
        f"{damage}; valid checkpoints of {run.path}: step(s) {steps} "
        f"(--checkpoint {valid[-1]} for the newest)"
    )


def newest_common(
    runs: list[Run], warn: Callable[[str], None]
) -> tuple[int, list[dict[str, np.ndarray]] | None]:
    """The newest step at which every run (every seed of a group) has a checkpoint that
    passes its checksum, and their arrays; warns about each step skipped, and about a
    manifest rebuilt (`repaired`). (0, None) when no run has a checkpoint yet: a kill
    came before the first one."""
    listed = [repaired(run, warn)["checkpoints"] for run in runs]
    for run, mine in zip(runs, listed):
        for one in mine:
            check_config(run, one)  # an edited config is no reason to fall back
    if not any(listed):
        return 0, None
    common = set.intersection(*({e["step"] for e in mine} for mine in listed))
    where = runs[0].path if len(runs) == 1 else runs[0].path.parent
    if not common:
        steps = "; ".join(
            f"{run.path.name}: {', '.join(str(e['step']) for e in mine) or 'none'}"
            for run, mine in zip(runs, listed)
        )
        raise JabError(
            f"the seeds of {where} share no checkpoint step ({steps}); resume each seed on "
            f"its own (jab resume {runs[0].path}) or train the group again"
        )
    for step in sorted(common, reverse=True):
        try:
            arrays = [
                load(run, next(e for e in mine if e["step"] == step))
                for run, mine in zip(runs, listed)
            ]
        except Mismatch:
            raise
        except JabError as err:
            warn(f"{err}; falling back to an earlier checkpoint")
            continue
        for run, mine in zip(runs, listed):
            newer = [str(e["step"]) for e in mine if e["step"] > step]
            if newer and len(runs) > 1:
                warn(
                    f"resuming from step {step}, the newest step at which every seed has a "
                    f"checkpoint; {run.path}'s checkpoints at step(s) {', '.join(newer)} "
                    "are dropped"
                )
        return step, arrays
    raise JabError(f"{where} has no valid checkpoint left")


def parameter_count(run: Run, listed: CheckpointEntry) -> int | None:
    """The model's parameter count, from the headers of a checkpoint's arrays (no data
    read); None when the file cannot be read (`jab runs` then shows no count)."""
    try:
        with np.load(run.checkpoints / listed["file"], allow_pickle=False) as npz:
            return sum(
                int(np.prod(_npy_shape(npz.zip.open(name + ".npy"))))
                for name in npz.files
                if name.startswith(TREES[0])
            )
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None


def _npy_shape(file) -> tuple[int, ...]:
    major, _ = np.lib.format.read_magic(file)
    read = (
        np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    )
    return read(file)[0]


def _leaves(tree_name: str, tree: Any) -> list[tuple[str, tuple, Any]]:
    """Every leaf of `tree` with its array name and its path."""
    import jax

    return [
        (tree_name + jax.tree_util.keystr(path), path, leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
    ]


def _array(arrays: dict[str, np.ndarray], name: str, shape: tuple, source: str) -> np.ndarray:
    if name not in arrays or arrays[name].shape != tuple(shape):
        raise JabError(f"{source} does not fit its config ({name})")
    return arrays[name]


def arrays_of(state: TrainingState) -> dict[str, np.ndarray]:
    """A training state as named numpy arrays, for a pickle-free .npz checkpoint."""
    arrays = {"step": np.asarray(state.step), "rng": np.asarray(state.rng)}
    for tree_name, tree in zip(TREES, (state.params, state.opt_state)):
        for name, _, leaf in _leaves(tree_name, tree):
            arrays[name] = np.asarray(leaf)
    return arrays


def state_of(experiment: Experiment, arrays: dict[str, np.ndarray], source: str) -> TrainingState:
    """The training state a checkpoint's arrays hold, laid out as the model's init lays
    it out; a checkpoint that does not fit is an error naming `source`."""
    import jax
    import jax.numpy as jnp

    from jabcli.training.training import TrainingState, state_shapes

    template = state_shapes(experiment)
    trees = []
    for tree_name, tree in zip(TREES, (template.params, template.opt_state)):
        values = [
            jnp.asarray(_array(arrays, name, leaf.shape, source), dtype=leaf.dtype)
            for name, _, leaf in _leaves(tree_name, tree)
        ]
        trees.append(jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(tree), values))
    if "rng" not in arrays or "step" not in arrays:
        raise JabError(f"{source} does not fit its config (no rng or step)")
    return TrainingState(
        trees[0], trees[1], jnp.asarray(arrays["rng"]), jnp.asarray(arrays["step"], jnp.int32)
    )


def parameter_layout(experiment: Experiment) -> list[tuple[str, tuple, tuple, str]]:
    """Every parameter's array name, path keys, shape and dtype, as the model's init lays
    them out (traced once, then remembered on disk: commands that only decode need it)."""

    def trace() -> list[tuple[str, tuple, tuple, str]]:
        from jabcli.training.training import state_shapes

        params = state_shapes(experiment).params
        return [  # Haiku's parameters are dicts of dicts: every key of a path is a DictKey
            (name, tuple(k.key for k in path), tuple(leaf.shape), str(leaf.dtype))
            for name, path, leaf in _leaves(TREES[0], params)
        ]

    return runtime.remembered(experiment, "parameter layout", trace)


def params_of(experiment: Experiment, arrays: dict[str, np.ndarray], source: str) -> dict:
    """A checkpoint's parameters alone (not its optimizer state), as Haiku's nested dict
    of numpy arrays; a checkpoint that does not fit is an error naming `source`."""
    params: dict = {}
    for name, keys, shape, dtype in parameter_layout(experiment):
        value = _array(arrays, name, shape, source).astype(dtype)
        inner = params
        for key in keys[:-1]:
            inner = inner.setdefault(key, {})
        inner[keys[-1]] = value
    return params
