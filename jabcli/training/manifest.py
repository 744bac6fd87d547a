"""A run's manifest, `checkpoints/manifest.json`: the checkpoints kept, each one's file,
step, sha256, held-out exact match, the fingerprint of the config it was trained with and
the FLOPs of a step; "best": the file with the best score.

A checkpoint is listed only once its file is complete (checkpoints.py writes the file
first), so a kill at any moment leaves the previous one valid. A manifest that is lost or
damaged is rebuilt from the checkpoint files themselves (`rebuild`): an .npz is a zip
archive holding a CRC-32 of each array, so each file can be checked without it. A
manifest that reads but is not one of these files (another format or shape, a file it
lists missing) is damaged as well.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import zipfile
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict, cast

from typing_extensions import NotRequired  # typing has it from Python 3.11

from jabcli.core.errors import JabError
from jabcli.core.runtime import Lazy
from jabcli.runs.runs import FORMAT, Run, atomic_write, describe, sha256

if TYPE_CHECKING:
    from pathlib import Path

np = Lazy("numpy")  # `jab runs` reads manifests without importing numpy
MANIFEST = "manifest.json"
FILE_NAME = re.compile(r"step-(\d+)\.npz")


def file_name(step: int) -> str:
    return f"step-{step:08d}.npz"


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
    return cast(Manifest, found)  # its shape checked above


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
    listed: list[CheckpointEntry] = []
    failed: list[str] = []
    for path in sorted(run.checkpoints.glob("step-*.npz")):
        name, data = FILE_NAME.fullmatch(path.name), verified(path)
        if name is None or data is None:
            failed.append(path.name)
            continue
        step = int(name[1])
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
    write_manifest(run, {"format": FORMAT, "checkpoints": []}, listed)
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
            break
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


def write_manifest(run: Run, found: Manifest, listed: list[CheckpointEntry]) -> None:
    found["checkpoints"] = listed
    found["best"] = best_file(listed)
    atomic_write(run.checkpoints / MANIFEST, json.dumps(found, indent=1).encode())
