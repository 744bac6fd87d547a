"""Run folders: config, metrics, checkpoints, written so that no run is ever lost.

    runs/<task>-<timestamp>/
        config.yaml          the resolved config, with the vocabulary and format version
        metrics.jsonl        one JSON object per log step
        metrics.rejected.jsonl  unreadable metrics lines, set aside by a resume
        checkpoints/
            step-00001200.npz  params, optimizer state, step, rng (no pickle)
            manifest.json      each checkpoint's step, sha256, held-out accuracy and the
                               fingerprint of the config it was trained with
        .lock                held (flock) by the process writing the run; holds its pid

A group of seeds (`jab train --seeds N`) is a folder of complete runs, one per seed:
`runs/<task>-<timestamp>/seed-0/`, `seed-1/`, ... each laid out as above, each with
train.seed its own and train.seeds 1, so that every command takes a seed on its own,
and a group.json listing the seeds, written once every seed's folder is complete.

Every file is written to a temporary name and renamed into place, and a checkpoint
is listed in the manifest only once it is complete, so a kill at any moment leaves
the previous checkpoint valid. A checkpoint is loaded only with the config it was
trained with: a hand-edited config.yaml (its task, model, training settings or
vocabulary; only train.steps may change) or manifest step is refused.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import hashlib
import io
import json
import os
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

import yaml

from jabcli.config import FILE_PREFIX, Config, data_path, from_dict
from jabcli.errors import JabError
from jabcli.runtime import Lazy
from jabcli.tokenizer import Tokenizer

np = Lazy("numpy")  # for checkpoints only: `jab tasks` need not import it

FORMAT = 1
RUNS_DIR = Path("runs")
DATA_FILE = "task-data"  # a file:PATH task's pairs, copied into the run folder
REJECTED_METRICS = "metrics.rejected.jsonl"  # unreadable metrics lines, set aside on resume
SEED_PREFIX = "seed-"  # the runs of a group of seeds are its folders seed-<seed>
GROUP_FILE = "group.json"  # a group's seeds; written last, so only a complete group has it


def data_copy(source: str) -> str:
    """The name a run folder gives its copy of the data file `source`."""
    return DATA_FILE + Path(source).suffix.lower()


def checkpoint_array(
    arrays: dict[str, np.ndarray], name: str, shape: tuple[int, ...], source: str
) -> np.ndarray:
    """The array `name` of a checkpoint's `arrays`, which must hold it with this shape;
    else an error naming `source`, the checkpoint."""
    if name not in arrays or arrays[name].shape != tuple(shape):
        raise JabError(f"{source} does not fit its config ({name})")
    return arrays[name]


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:  # also a second Ctrl-C: never leave the temporary behind
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(err, OSError):
            raise JabError(f"could not write {path}: {describe(err)}") from None
        raise


def describe(err: OSError) -> str:
    if err.errno == errno.ENOSPC:
        return "the disk is full"
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "permission denied"
    return err.strerror or str(err)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(config: dict[str, Any], tokenizer: Tokenizer, leave_out=("steps",)) -> str:
    """What a checkpoint must be loaded with: the config as stored in config.yaml, but for
    the train keys in `leave_out` (train.steps, which `jab resume --steps` extends), and the
    vocabulary in its order. Stored, not as this version of jab would rebuild it, so that a
    key added to jab later changes no run's fingerprint."""
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    fixed = {**config, "train": {k: v for k, v in train.items() if k not in leave_out}}
    return sha256(json.dumps([fixed, tokenizer.tokens], sort_keys=True, default=str).encode())


class Mismatch(JabError):
    """A run's files disagree with each other (an edited config, a manifest whose step is
    not its checkpoint's): refused, never a reason to fall back to another checkpoint."""


def new_run_dir(task: str) -> Path:
    """Claim a fresh runs/<task>-<timestamp> folder (two runs started together get two)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if data_path(task) is not None:
        task = "file-" + Path(data_path(task)).stem
    for n in range(1, 1000):
        path = RUNS_DIR / (f"{task}-{stamp}" if n == 1 else f"{task}-{stamp}-{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
        except OSError as err:
            raise JabError(f"could not create run folder {path}: {describe(err)}") from None
    raise JabError(f"could not find a free run folder name under {RUNS_DIR}")


def latest_run(root: Path = RUNS_DIR) -> Path:
    """The most recently started run or group under `root`, preferring ones that have a
    checkpoint."""
    configs = list(root.glob("*/config.yaml")) + [
        config
        for group in root.glob(f"*/{GROUP_FILE}")
        for config in group.parent.glob(f"{SEED_PREFIX}*/config.yaml")
    ]
    if not configs:
        raise JabError(f"no runs found under {root}/; train one with: jab train --task reverse")
    with_checkpoint = [p for p in configs if (p.parent / "checkpoints/manifest.json").exists()]
    newest = max(with_checkpoint or configs, key=lambda p: p.stat().st_mtime).parent
    return newest.parent if newest.name.startswith(SEED_PREFIX) else newest


def seed_folder(group: Path, seed: int) -> Path:
    return group / f"{SEED_PREFIX}{seed}"


def seed_runs(path: Path) -> list[Run] | None:
    """The runs of a group folder in the order of their seeds; None if it is not one."""
    try:
        text = (Path(path) / GROUP_FILE).read_bytes()
    except OSError:
        return None
    try:
        group = json.loads(text)
    except ValueError:
        raise JabError(f"{path}/{GROUP_FILE} is corrupted (not valid JSON)") from None
    seeds = group.get("seeds") if isinstance(group, dict) else None
    if not isinstance(seeds, list) or not all(type(s) is int for s in seeds) or not seeds:
        raise JabError(f"{path}/{GROUP_FILE} is corrupted (unexpected contents)")
    runs = [Run(seed_folder(Path(path), seed)) for seed in seeds]
    for run in runs:
        if not (run.path / "config.yaml").is_file():
            raise JabError(
                f"{run.path} is missing or has no config.yaml, though {path}/{GROUP_FILE} "
                "lists its seed"
            )
    return runs


def write_group(path: Path, seeds: list[int]) -> None:
    """Mark `path` as a complete group of the runs seed-<seed> (written once all exist)."""
    atomic_write(path / GROUP_FILE, json.dumps({"format": FORMAT, "seeds": seeds}).encode())


def open_runs(path: Path | None) -> tuple[Path, list[Run]]:
    """A run (one seed) or a group of seeds: its folder and its runs, checked to be jab's;
    the newest under runs/ when `path` is None."""
    path = latest_run() if path is None else Path(path)
    group = seed_runs(path) if not (path / "config.yaml").exists() else None
    return (path, group) if group is not None else (path, [Run.open(path)])


def newest_common_checkpoint(
    runs: list[Run], warn: Callable[[str], None]
) -> tuple[int, list[dict[str, np.ndarray]] | None]:
    """The newest step at which every run (every seed of a group) has a checkpoint that
    passes its checksum, and their arrays; warns about each step skipped. (0, None) when
    no run has a checkpoint yet: a kill came before the first one."""
    entries = [run.manifest()["checkpoints"] for run in runs]
    for run, listed in zip(runs, entries):
        for entry in listed:
            run.check_config(entry)  # an edited config is no reason to fall back
    if not any(entries):
        return 0, None
    common = set.intersection(*({e["step"] for e in listed} for listed in entries))
    where = runs[0].path if len(runs) == 1 else runs[0].path.parent
    if not common:
        steps = "; ".join(
            f"{run.path.name}: {', '.join(str(e['step']) for e in listed) or 'none'}"
            for run, listed in zip(runs, entries)
        )
        raise JabError(
            f"the seeds of {where} share no checkpoint step ({steps}); resume each seed on "
            f"its own (jab resume {runs[0].path}) or train the group again"
        )
    for step in sorted(common, reverse=True):
        try:
            arrays = [
                run.load_checkpoint(next(e for e in listed if e["step"] == step))
                for run, listed in zip(runs, entries)
            ]
        except Mismatch:
            raise
        except JabError as err:
            warn(f"{err}; falling back to an earlier checkpoint")
            continue
        for run, listed in zip(runs, entries):
            newer = [str(e["step"]) for e in listed if e["step"] > step]
            if newer and len(runs) > 1:
                steps = ", ".join(newer)
                warn(
                    f"resuming from step {step}, the newest step at which every seed has a "
                    f"checkpoint; {run.path}'s checkpoints at step(s) {steps} are dropped"
                )
        return step, arrays
    raise JabError(f"{where} has no valid checkpoint left")


class Run:
    """One run folder."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.checkpoints = self.path / "checkpoints"
        self.fingerprint: str | None = None  # of the config saved or loaded
        self.shared: str | None = None  # the same, but for train.seed: what a group shares
        self.created: str | None = None  # when, as config.yaml says (local ISO 8601 time)

    @classmethod
    def create(cls, path: Path, cfg: Config, tokenizer: Tokenizer) -> Run:
        """A new run folder holding its config (the folder may exist, empty)."""
        run = cls(path)
        try:
            run.checkpoints.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise JabError(f"could not create run folder {path}: {describe(err)}") from None
        source = data_path(cfg.task.name)
        if source is not None:
            # The run keeps its own copy of the data, so it still evaluates if the file moves.
            copy = data_copy(source)
            try:
                atomic_write(run.path / copy, Path(source).read_bytes())
            except OSError as err:
                raise JabError(f"could not copy {source} into {path}: {describe(err)}") from None
        run.save_config(cfg, tokenizer)
        return run

    def save_config(self, cfg: Config, tokenizer: Tokenizer) -> None:
        """Write config.yaml: the config, the vocabulary and the format version."""
        saved = cfg.to_dict()
        source = data_path(cfg.task.name)
        if source is not None:
            saved["task"]["name"] = FILE_PREFIX + data_copy(source)
        self.created = time.strftime("%Y-%m-%dT%H:%M:%S")
        data = {"format": FORMAT, "created": self.created, **saved, "vocab": tokenizer.tokens}
        atomic_write(self.path / "config.yaml", yaml.safe_dump(data, sort_keys=False).encode())
        self.fingerprint = fingerprint(saved, tokenizer)
        self.shared = fingerprint(saved, tokenizer, ("steps", "seed"))

    def set_steps(self, steps: int) -> None:
        """Set train.steps in config.yaml, leaving every other line as it is."""
        path = self.path / "config.yaml"
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            raise JabError(f"could not read {path}") from None
        data.setdefault("train", {})["steps"] = steps
        atomic_write(path, yaml.safe_dump(data, sort_keys=False).encode())

    @classmethod
    def open(cls, path: Path | None) -> "Run":
        """An existing run, checked to be one; the newest under runs/ when `path` is None."""
        path = latest_run() if path is None else Path(path)
        if not path.is_dir():
            raise JabError(f"run folder {str(path)!r} does not exist")
        if not (path / "config.yaml").is_file():
            group = seed_runs(path)
            if group is not None:
                raise JabError(
                    f"{path} is a group of {len(group)} seeds; name one of them, "
                    f"for example {group[0].path}"
                )
            if any(path.glob(f"{SEED_PREFIX}*/config.yaml")):
                raise JabError(
                    f"{path} holds seed folders but no {GROUP_FILE}: it was stopped while "
                    "being created; remove it and train again"
                )
            raise JabError(f"{path} is not a jab run (it has no config.yaml)")
        return cls(path)

    def load_config(self) -> tuple[Config, Tokenizer]:
        try:
            data = yaml.safe_load((self.path / "config.yaml").read_text())
        except (yaml.YAMLError, UnicodeDecodeError):
            raise JabError(f"{self.path}/config.yaml is not valid YAML") from None
        except OSError as err:
            raise JabError(f"could not read {self.path}/config.yaml: {describe(err)}") from None
        if not isinstance(data, dict):
            raise JabError(f"{self.path}/config.yaml is not a jab run config")
        if data.pop("format", None) != FORMAT:
            raise JabError(
                f"{self.path} was written by an incompatible version of jab "
                f"(format {FORMAT} expected)"
            )
        created = data.pop("created", None)
        self.created = str(created) if created is not None else None
        vocab = data.pop("vocab", None)
        if not isinstance(vocab, list):
            raise JabError(f"{self.path}/config.yaml has no vocabulary")
        try:
            tokenizer = Tokenizer(vocab)
        except JabError as err:
            raise JabError(f"{self.path}/config.yaml: {err}") from None
        self.fingerprint = fingerprint(data, tokenizer)
        self.shared = fingerprint(data, tokenizer, ("steps", "seed"))
        cfg = from_dict(copy.deepcopy(data), f"{self.path}/config.yaml")
        source = data_path(cfg.task.name)
        if source is not None:  # the run's own copy, wherever the run is looked at from
            cfg.task.name = FILE_PREFIX + str(self.path / source)
        return cfg, tokenizer

    def summary(self) -> dict[str, Any]:
        """What `jab runs` shows of this run, read from its files alone (no JAX)."""
        cfg, _ = self.load_config()
        records = self.read_metrics()
        entries = self.manifest()["checkpoints"]
        scores = [r["eval_seq_acc"] for r in records if r.get("eval_seq_acc") is not None]
        step = entries[-1]["step"] if entries else 0
        reached = bool(scores) and scores[-1] >= cfg.train.target_seq_acc
        if self.is_running():
            state = "running"
        elif not entries:
            state = "no checkpoint"
        elif reached:
            state = "target reached"
        elif step >= cfg.train.steps:
            state = "finished"
        else:
            state = "interrupted"
        return {
            "run": str(self.path),
            "task": cfg.task.name,
            "pos_encoding": cfg.model.positions,
            "parameters": self.parameters(entries[-1]) if entries else None,
            "flops_per_step": entries[-1].get("flops_per_step") if entries else None,
            "seeds": 1,
            "step": step,
            "steps": cfg.train.steps,
            "best_eval_seq_acc": max(scores) if scores else None,
            "train_s": training_seconds(records),
            "state": state,
            "created": self.created,
        }

    def parameters(self, entry: dict[str, Any]) -> int | None:
        """The model's parameter count, from the headers of a checkpoint's arrays."""
        try:
            with np.load(self.checkpoints / entry["file"], allow_pickle=False) as npz:
                return sum(
                    int(np.prod(shape))
                    for name in npz.files
                    if name.startswith("params")
                    for shape in [npy_shape(npz.zip.open(name + ".npy"))]
                )
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            return None  # the listing shows no count rather than fail

    def check_not_running(self) -> None:
        """Refuse a run another process is training into right now."""
        if self.is_running():
            try:
                holder = (self.path / ".lock").read_text().strip() or "?"
            except OSError:
                holder = "?"
            raise JabError(f"{self.path} is being written by another jab process (pid {holder})")

    def is_running(self) -> bool:
        """Whether a process holds the run's lock (is training into it) right now."""
        try:
            fd = os.open(self.path / ".lock", os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    # metrics

    def append_metrics(self, record: dict[str, Any]) -> None:
        try:
            with open(self.path / "metrics.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as err:
            raise JabError(f"could not write {self.path}/metrics.jsonl: {describe(err)}") from None

    def read_metrics(self) -> list[dict[str, Any]]:
        """The readable records; a line that is not one is left out."""
        return metrics_lines(self.path / "metrics.jsonl")[0]

    def truncate_metrics(self, step: int) -> int:
        """Keep only the records up to `step` (used when resuming from a checkpoint).

        A torn last line (cut short by a kill) is dropped; any other unreadable line is
        appended to metrics.rejected.jsonl rather than lost. Returns how many were set aside.
        """
        records, rejected = metrics_lines(self.path / "metrics.jsonl")
        if rejected:
            try:
                with open(self.path / REJECTED_METRICS, "ab") as f:
                    f.write(b"".join(line + b"\n" for line in rejected))
            except OSError as err:
                raise JabError(
                    f"could not write {self.path}/{REJECTED_METRICS}: {describe(err)}"
                ) from None
        kept = [r for r in records if r["step"] <= step]
        atomic_write(
            self.path / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in kept).encode()
        )
        return len(rejected)

    # checkpoints

    def manifest(self) -> dict[str, Any]:
        path = self.checkpoints / "manifest.json"
        if not path.exists():
            saved = sorted(p.name for p in self.checkpoints.glob("step-*.npz"))
            if saved:  # lost, not new: never train over (and overwrite) these
                raise JabError(
                    f"{path} is missing, but {self.checkpoints} holds {', '.join(saved)}; "
                    "restore the manifest, or move the checkpoints away to train anew"
                )
            return {"format": FORMAT, "checkpoints": []}
        try:
            manifest = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise JabError(f"{path} is corrupted (not valid JSON)") from None
        except OSError as err:
            raise JabError(f"could not read {path}: {describe(err)}") from None
        entries = manifest.get("checkpoints") if isinstance(manifest, dict) else None
        if not isinstance(entries, list) or not all(
            isinstance(e, dict) and {"file", "step", "sha256"} <= e.keys() for e in entries
        ):
            raise JabError(f"{path} is corrupted (unexpected contents)")
        return manifest

    def save_checkpoint(
        self,
        arrays: dict[str, np.ndarray],
        step: int,
        eval_seq_acc: float | None,
        keep: int,
        flops_per_step: float | None = None,
    ) -> None:
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        data = buffer.getvalue()
        name = f"step-{step:08d}.npz"
        manifest = self.manifest()  # read first: a manifest is missing only if it was lost
        atomic_write(self.checkpoints / name, data)
        entries = [e for e in manifest["checkpoints"] if e["step"] != step]
        entries.append(
            {
                "file": name,
                "step": step,
                "sha256": sha256(data),
                "eval_seq_acc": eval_seq_acc,
                "config": self.fingerprint,
                "flops_per_step": flops_per_step,
            }
        )
        entries.sort(key=lambda e: e["step"])
        best = best_file(entries)
        kept = [e for e in entries if e in entries[-keep:] or e["file"] == best]
        self._write_manifest(manifest, kept)
        for e in entries:
            if e not in kept:
                with contextlib.suppress(OSError):
                    (self.checkpoints / e["file"]).unlink()

    def checkpoint_entry(self, which: str = "latest") -> dict[str, Any]:
        entries = self.manifest()["checkpoints"]
        if not entries:
            raise JabError(f"{self.path} has no checkpoint yet")
        if which == "latest":
            return entries[-1]
        if which == "best":
            best = self.manifest().get("best")
            return next((e for e in entries if e["file"] == best), entries[-1])
        if which.isdigit():
            for e in entries:
                if e["step"] == int(which):
                    return e
            steps = ", ".join(str(e["step"]) for e in entries)
            raise JabError(f"{self.path} has no checkpoint at step {which}; it has: {steps}")
        raise JabError(f"--checkpoint takes best, latest or a step number, got {which!r}")

    def _write_manifest(self, manifest: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        manifest.update(checkpoints=entries, best=best_file(entries))
        atomic_write(self.checkpoints / "manifest.json", json.dumps(manifest, indent=1).encode())

    def forget_after(self, step: int) -> None:
        """Drop checkpoints newer than `step` (a resume that fell back past broken ones)."""
        manifest = self.manifest()
        newer = [e for e in manifest["checkpoints"] if e["step"] > step]
        if not newer:
            return
        self._write_manifest(manifest, [e for e in manifest["checkpoints"] if e["step"] <= step])
        for e in newer:
            with contextlib.suppress(OSError):
                (self.checkpoints / e["file"]).unlink()

    def check_config(self, entry: dict[str, Any]) -> None:
        """Refuse a checkpoint whose run config was edited by hand since it was saved."""
        if self.fingerprint is None:
            self.load_config()
        if entry.get("config", self.fingerprint) != self.fingerprint:
            raise Mismatch(
                f"{self.path}/config.yaml was edited after checkpoint {entry['file']} was "
                "saved (only train.steps may change, with jab resume --steps); restore it "
                "or train a new run"
            )

    def load_checkpoint(self, entry: dict[str, Any]) -> dict[str, np.ndarray]:
        """A checkpoint's arrays, checked against its checksum, step and run config."""
        self.check_config(entry)
        path = self.checkpoints / entry["file"]
        try:
            data = path.read_bytes()
        except OSError:
            raise JabError(f"checkpoint {path} is missing") from None
        if sha256(data) != entry["sha256"]:
            raise JabError(f"checkpoint {path} is corrupted (checksum mismatch)")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile):
            # Junk with a matching checksum: unreadable all the same (a resume falls back).
            raise JabError(f"checkpoint {path} is corrupted (not a checkpoint file)") from None
        if "step" in arrays and int(arrays["step"]) != entry["step"]:
            raise Mismatch(
                f"{self.checkpoints}/manifest.json says {entry['file']} is at step "
                f"{entry['step']}, but it holds step {int(arrays['step'])}"
            )
        return arrays

    # lock

    @contextlib.contextmanager
    def lock(self):
        """Refuse a second writer. The lock is an flock on .lock, so the kernel releases
        it when its process dies, however it dies: a left-over file never blocks."""
        path = self.path / ".lock"
        while True:
            fd = os.open(path, os.O_CREAT | os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise JabError(
                    f"{self.path} is being written by another jab process (pid {holder})"
                ) from None
            try:
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    break  # not the file of a writer that has just finished and removed it
            except FileNotFoundError:
                pass
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)


def npy_shape(file) -> tuple[int, ...]:
    """The shape in a .npy file's header, without reading its data."""
    major, _ = np.lib.format.read_magic(file)
    read = (
        np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    )
    return read(file)[0]


def training_seconds(records: list[dict[str, Any]]) -> float:
    """Time spent training, over every session of a run: `elapsed_s` counts from the start
    of its session, so each session adds its last value."""
    total, last = 0.0, 0.0
    for record in records:
        elapsed = float(record.get("elapsed_s", 0.0))
        if elapsed < last:  # a new session (a resume) began
            total += last
        last = elapsed
    return total + last


def listing(root: Path = RUNS_DIR) -> list[dict[str, Any]]:
    """One summary per run, and per group of seeds (its seeds folded into one row, see
    `fold`), under `root`, newest first; a folder that is neither is skipped, as is a run
    whose files cannot be read."""
    rows = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        path = root / path.name  # as the user typed the root
        if not path.is_dir():
            continue
        try:
            seeds = seed_runs(path)
            found = seeds or ([Run(path)] if (path / "config.yaml").is_file() else [])
            summaries = [run.summary() for run in found]
        except JabError as err:  # shown, not hidden: the user should know it is there
            rows.append(damaged(path, str(err)))
            continue
        if summaries:
            rows.append(fold(str(path), summaries) if seeds else summaries[0])
    return sorted(rows, key=lambda r: r["created"] or "", reverse=True)


def damaged(path: Path, reason: str) -> dict[str, Any]:
    """A `jab runs` row for a folder jab made but cannot read, with why."""
    try:
        created = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(path.stat().st_mtime))
    except OSError:
        created = None
    return {
        "run": str(path),
        "task": None,
        "pos_encoding": None,
        "parameters": None,
        "flops_per_step": None,
        "seeds": None,
        "step": None,
        "steps": None,
        "best_eval_seq_acc": None,
        "train_s": None,
        "state": f"damaged: {reason}",
        "created": created,
    }


STATES = ("running", "interrupted", "no checkpoint", "finished", "target reached")


def fold(path: str, seeds: list[dict[str, Any]]) -> dict[str, Any]:
    """A group's row: the fewest steps any seed has done, each seed's best held-out exact
    match as a list, and the state of the seed furthest from done."""
    best = [s["best_eval_seq_acc"] for s in seeds]
    return {
        **seeds[0],
        "run": path,
        "seeds": len(seeds),
        "step": min(s["step"] for s in seeds),
        "best_eval_seq_acc": best,
        "train_s": max(s["train_s"] for s in seeds),
        "state": min((s["state"] for s in seeds), key=STATES.index),
    }


def metrics_lines(path: Path) -> tuple[list[dict[str, Any]], list[bytes]]:
    """The records of a metrics.jsonl file and its unreadable lines, except a torn last
    one: a kill can cut only the line being appended, which then lacks its newline."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], []
    except OSError as err:
        raise JabError(f"could not read {path}: {describe(err)}") from None
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline, as it should
    records, rejected = [], []
    for line in lines:
        record = metrics_record(line)
        if record is not None:
            records.append(record)
        elif line.strip():
            rejected.append(line)
    last = metrics_record(torn)  # kept when whole: only its newline was lost
    if last is not None:
        records.append(last)
    return records, rejected


def metrics_record(line: bytes) -> dict[str, Any] | None:
    """One metrics record, or None when the line is not one."""
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    is_step = isinstance(record, dict) and type(record.get("step")) is int
    return record if is_step else None


def best_file(entries: list[dict[str, Any]]) -> str | None:
    """The checkpoint with the highest held-out exact match (the newest among equals)."""
    scored = [e for e in entries if e.get("eval_seq_acc") is not None]
    return max(scored, key=lambda e: (e["eval_seq_acc"], e["step"]))["file"] if scored else None
