"""Checkpoints: the training states a run saves, and how one is found and loaded again.

    <run>/checkpoints/
        step-00001200.npz  one training state as named arrays (no pickle)
        manifest.json      the checkpoints kept: each one's file, step, sha256, held-out
                           exact match, the fingerprint of the config it was trained with
                           and the FLOPs of a step; "best": the file with the best score

One naming scheme for a state's arrays: `step`, `rng`, and every leaf of the parameters
and of the optimizer state as its tree's name followed by its path, as
`jax.tree_util.keystr` writes it: `params['decoder/~/layer_0/mha/query']['w']`. Saving
names the leaves of the state; loading walks the same paths of the state the model's
init gives, so no name is ever parsed back, and an array missing or of another shape is
a checkpoint that does not fit its config.

A checkpoint is listed in the manifest only once its file is complete, so a kill at any
moment leaves the previous one valid. One is loaded only if its checksum, its step and the
fingerprint of its run's config (`runs.fingerprint`) agree: an edited config is refused,
a damaged file is a reason to fall back to an earlier checkpoint (`newest_common` for a
resume, `chosen` for the commands that look at a run). A manifest that is lost or damaged
is rebuilt from the checkpoint files themselves (`rebuild`): an .npz is a zip archive
holding a CRC-32 of each array, so each file can be checked without it. A manifest that
reads but is not one of these files (another format or shape, a file it lists missing)
is damaged as well.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
import zipfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

from typing_extensions import NotRequired  # typing has it from Python 3.11

from jabcli.core import runtime
from jabcli.core.errors import JabError
from jabcli.core.runtime import Lazy
from jabcli.runs.runs import FORMAT, Mismatch, Run, atomic_write, describe, sha256

if TYPE_CHECKING:
    from pathlib import Path

    from jabcli.experiment.experiment import Experiment
    from jabcli.training.training import TrainingState

np = Lazy("numpy")  # `jab runs` reads manifests without importing numpy
MANIFEST = "manifest.json"
FILE_NAME = re.compile(r"step-(\d+)\.npz")
TREES = ("params", "opt_state")  # the state's trees of arrays, in the order saved


def file_name(step: int) -> str:
    return f"step-{step:08d}.npz"


# the manifest


class CheckpointEntry(TypedDict):
    """One checkpoint as the manifest lists it. A manifest written before a key existed
    (or rebuilt from the files) may lack the last three, or hold None there."""

    file: str  # step-NNNNNNNN.npz
    step: int
    sha256: str  # of the file
    eval_seq_acc: NotRequired[float | None]  # held-out exact match when it was saved
    config: NotRequired[str | None]  # the fingerprint of its run's config (runs.fingerprint)
    flops_per_step: NotRequired[float | None]  # as XLA counted a training step


class Manifest(TypedDict):
    """checkpoints/manifest.json: the checkpoints kept, oldest first, and the best one's
    file (None: none scored)."""

    format: int
    checkpoints: list[CheckpointEntry]
    best: NotRequired[str | None]


class ManifestDamaged(JabError):
    """A manifest that is missing beside checkpoint files, cannot be read, or disagrees
    with the files beside it: `repaired` rebuilds it from those files."""


def manifest(run: Run) -> Manifest:
    """The run's manifest; an empty one for a run with no checkpoint yet. One that is not
    jab's manifest of these files (another format, another shape, a file it lists
    missing) is damaged, as one that does not read."""
    path = run.checkpoints / MANIFEST
    if not path.exists():
        if any(run.checkpoints.glob("step-*.npz")):  # lost, not new: never train over these
            raise ManifestDamaged(f"{path} is missing, though {run.checkpoints} holds checkpoints")
        return {"format": FORMAT, "checkpoints": []}
    try:
        found = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ManifestDamaged(f"{path} is corrupted (not valid JSON)") from None
    except OSError as err:
        raise JabError(f"could not read {path}: {describe(err)}") from None
    if not isinstance(found, dict) or found.get("format") != FORMAT:
        what = found.get("format") if isinstance(found, dict) else None
        raise ManifestDamaged(f"{path} is corrupted (format {what!r}, not {FORMAT})")
    entries = found.get("checkpoints")
    if not isinstance(entries, list) or not all(map(_is_entry, entries)):
        raise ManifestDamaged(f"{path} is corrupted (unexpected contents)")
    if not isinstance(found.get("best"), (str, type(None))):
        raise ManifestDamaged(f"{path} is corrupted (unexpected contents)")
    missing = [e["file"] for e in entries if not (run.checkpoints / e["file"]).is_file()]
    if missing:
        are = "is" if len(missing) == 1 else "are"
        raise ManifestDamaged(f"{path} lists {', '.join(missing)}, which {are} missing")
    return found


def _is_entry(entry: object) -> bool:
    """Whether `entry` is shaped as a `CheckpointEntry`."""

    def number(value: object) -> bool:
        return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))

    return (
        isinstance(entry, dict)
        and isinstance(entry.get("file"), str)
        and FILE_NAME.fullmatch(entry["file"]) is not None
        and type(entry.get("step")) is int
        and isinstance(entry.get("sha256"), str)
        and number(entry.get("eval_seq_acc"))
        and isinstance(entry.get("config"), (str, type(None)))
        and number(entry.get("flops_per_step"))
    )


def repaired(run: Run, note: Callable[[str], None]) -> Manifest:
    """The run's manifest; one that is missing or damaged is rebuilt first (`rebuild`),
    and `note` told what was done."""
    try:
        return manifest(run)
    except ManifestDamaged as err:
        note(rebuild(run, str(err)))
    return manifest(run)


def rebuild(run: Run, damage: str) -> str:
    """Write a manifest listing every checkpoint file of `run` that passes its own checks
    (`verified`), for one that is missing or damaged (`damage` says how); returns what
    was done, in a line. A file's held-out score comes from metrics.jsonl, its config is
    the run's as it is now (loading still checks the arrays' shapes against it). Nothing
    is deleted: the damaged manifest is kept beside the new one, and a file that fails
    its checks stays where it is, unlisted."""
    run.check_not_running()  # its trainer writes the manifest: not two writers
    if run.fingerprint is None:
        run.load_config()
    scores = {r["step"]: r.get("eval_seq_acc") for r in run.read_metrics()}
    listed, failed = [], []
    for path in sorted(run.checkpoints.glob("step-*.npz")):
        data = verified(path)
        if data is None:
            failed.append(path.name)
            continue
        step = int(FILE_NAME.fullmatch(path.name)[1])
        listed.append(
            {
                "file": path.name,
                "step": step,
                "sha256": sha256(data),
                "eval_seq_acc": scores.get(step),
                "config": run.fingerprint,
                "flops_per_step": None,
            }
        )
    if failed and not listed:  # an empty manifest would let a resume train over them
        raise JabError(
            f"{damage}, and no checkpoint file beside it passes its checks "
            f"({', '.join(failed)}); move {run.checkpoints} away to train anew"
        )
    aside = _keep(run.checkpoints / MANIFEST)
    listed.sort(key=lambda e: e["step"])
    _write_manifest(run, {"format": FORMAT}, listed)
    steps = ", ".join(str(e["step"]) for e in listed)
    done = f"{damage}; rebuilt it from the checkpoint files that pass their checks (steps {steps})"
    if not listed:
        done = f"{damage}; rebuilt it empty, as there is no checkpoint file beside it"
    if failed:
        verb = "fails them and is" if len(failed) == 1 else "fail them and are"
        done += f"; {', '.join(failed)} {verb} left unlisted, not deleted"
    return done + (f"; the damaged manifest is kept as {aside.name}" if aside else "")


def verified(path: Path) -> bytes | None:
    """The bytes of the checkpoint file `path` if it passes the checks it carries itself:
    every array's CRC-32 (an .npz is a zip archive), and a `step` array holding the step
    in its name; else None."""
    name = FILE_NAME.fullmatch(path.name)
    if name is None:
        return None
    try:
        data = path.read_bytes()
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if archive.testzip() is not None:
                return None
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            fits = "rng" in npz.files and int(npz["step"]) == int(name[1])
    except Exception:  # damaged bytes fail in too many ways to list: each fails the check
        return None
    return data if fits else None


def _keep(path: Path) -> Path | None:
    """A copy of the damaged file `path` under a name of its own (None: no file)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    for n in itertools.count(1):
        aside = path.with_name(f"{path.name}.damaged" + (f"-{n}" if n > 1 else ""))
        if not aside.exists():
            atomic_write(aside, data)
            return aside


def entries(run: Run) -> list[CheckpointEntry]:
    """The manifest's checkpoints, oldest first."""
    return manifest(run)["checkpoints"]


def entry(run: Run, which: str = "latest", found: Manifest | None = None) -> CheckpointEntry:
    """The checkpoint `which` (latest, best or a step number) of `run`, as its manifest
    (`found`, or read now) lists it."""
    found = manifest(run) if found is None else found
    listed = found["checkpoints"]
    if not listed:
        raise JabError(f"{run.path} has no checkpoint yet")
    if which == "latest":
        return listed[-1]
    if which == "best":
        return next((e for e in listed if e["file"] == found.get("best")), listed[-1])
    if which.isdigit():
        for e in listed:
            if e["step"] == int(which):
                return e
        steps = ", ".join(str(e["step"]) for e in listed)
        raise JabError(f"{run.path} has no checkpoint at step {which}; it has: {steps}")
    raise JabError(f"--checkpoint takes best, latest or a step number, got {which!r}")


def best_file(listed: list[CheckpointEntry]) -> str | None:
    """The checkpoint with the highest held-out exact match (the newest among equals)."""
    scored = [e for e in listed if e.get("eval_seq_acc") is not None]
    return max(scored, key=lambda e: (e["eval_seq_acc"], e["step"]))["file"] if scored else None


def _write_manifest(run: Run, found: Manifest, listed: list[CheckpointEntry]) -> None:
    found.update(checkpoints=listed, best=best_file(listed))
    atomic_write(run.checkpoints / MANIFEST, json.dumps(found, indent=1).encode())


# saving and dropping


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
    np.savez(buffer, **arrays)
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
    _write_manifest(run, found, kept)
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
    _write_manifest(run, found, [e for e in found["checkpoints"] if e["step"] <= step])
    for e in newer:
        with contextlib.suppress(OSError):
            (run.checkpoints / e["file"]).unlink()


# loading


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


# a training state as arrays, and back


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
