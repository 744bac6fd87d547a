"""Run folders: config, metrics, the lock and groups of seeds, written so that no run is
ever lost (the checkpoints/ folder is `checkpoints.py`'s; `jab runs` is `listing.py`; a
new folder is claimed by claim.py's `Claim`; metrics.jsonl is read back by metrics.py).

    runs/<task>-<timestamp>/
        config.yaml          the resolved config, with the vocabulary and format version
        metrics.jsonl        one JSON object per log step
        metrics.rejected.jsonl  unreadable metrics lines, set aside by a resume
        checkpoints/         training states and their manifest (checkpoints.py)
        .lock                held (flock) by the process writing the run; holds its pid

A group of seeds (`jab train --seeds N`) is a folder of complete runs, one per seed:
`runs/<task>-<timestamp>/seed-0/`, `seed-1/`, ... each laid out as above, each with
train.seed its own and train.seeds 1, so that every command takes a seed on its own,
and a group.json listing the seeds, written once every seed's folder is complete.

Every file is written to a temporary name and renamed into place, so a kill at any
moment leaves the previous one whole. A run's `fingerprint` (of its config as stored)
is what its checkpoints must be loaded with: a hand-edited config.yaml (its task, model,
training settings or vocabulary; only train.steps may change) is refused.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import fcntl
import hashlib
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

import yaml

from jabcli.core.config import from_dict
from jabcli.core.errors import JabError
from jabcli.core.settings import FILE_PREFIX, Config, data_path, short_name
from jabcli.core.tokenizer import Tokenizer
from jabcli.runs.code_copies import changed_since, in_code, keep_code, kept
from jabcli.runs.files import atomic_write, describe
from jabcli.runs.metrics import LogRecord, metrics_lines

FORMAT = 1
RUNS_DIR = Path("runs")
DATA_FILE = "task-data"  # a file:PATH task's pairs, copied into the run folder
REJECTED_METRICS = "metrics.rejected.jsonl"  # unreadable metrics lines, set aside on resume
SEED_PREFIX = "seed-"  # the runs of a group of seeds are its folders seed-<seed>
GROUP_FILE = "group.json"  # a group's seeds; written last, so only a complete group has it
STUDY_FILE = "study.json"  # in a study folder: its cells, as last run


def data_copy(source: str) -> str:
    """The name a run folder gives its copy of the data file `source`."""
    return DATA_FILE + Path(source).suffix.lower()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(config: dict[str, Any], tokenizer: Tokenizer, leave_out=("steps", "log_to")) -> str:
    """What a checkpoint must be loaded with: the config as stored in config.yaml, but for
    the train keys in `leave_out` (train.steps, which `jab resume --steps` extends, and
    train.log_to, which an edit may turn on for a resume), and the vocabulary in its
    order. Stored, not as this version of jab would rebuild it, so that a key added to jab
    later changes no run's fingerprint."""
    train = config.get("train")
    train = train if isinstance(train, dict) else {}
    fixed = {**config, "train": {k: v for k, v in train.items() if k not in leave_out}}
    return sha256(json.dumps([fixed, tokenizer.tokens], sort_keys=True, default=str).encode())


class Mismatch(JabError):
    """A run's files disagree with each other (an edited config, a manifest whose step is
    not its checkpoint's): refused, never a reason to fall back to another checkpoint."""


def new_run_dir(task: str) -> Path:
    """Make a fresh runs/<task>-<timestamp> folder (two runs started together get two)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    data = data_path(task)
    if data is not None:
        task = "file-" + Path(data).stem
    task = short_name(task).lower()
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


def runs_in(path: Path) -> list[Run]:
    """The runs a folder is: a group's seeds, the run itself, or none."""
    return seed_runs(path) or ([Run(path)] if (path / "config.yaml").is_file() else [])


def study_runs(path: Path) -> list[Run] | None:
    """The runs of a study folder's cells (a cell of several seeds: each seed's), in the
    order of their folders, as `jab runs DIR` lists them; None if it is not a study."""
    path = Path(path)
    if not (path / STUDY_FILE).is_file():
        return None
    return [
        run for cell in sorted(p for p in path.iterdir() if p.is_dir()) for run in runs_in(cell)
    ]


def write_group(path: Path, seeds: list[int]) -> None:
    """Mark `path` as a complete group of the runs seed-<seed> (written once all exist)."""
    atomic_write(path / GROUP_FILE, json.dumps({"format": FORMAT, "seeds": seeds}).encode())


def open_runs(path: Path | None) -> tuple[Path, list[Run]]:
    """A run (one seed) or a group of seeds: its folder and its runs, checked to be jab's;
    the newest under runs/ when `path` is None."""
    path = latest_run() if path is None else Path(path)
    group = seed_runs(path) if not (path / "config.yaml").exists() else None
    return (path, group) if group is not None else (path, [Run.open(path)])


def group_config(path: Path, seeds: list[Run]) -> tuple[Config, Tokenizer, list[int]]:
    """The config that trains every seed of `seeds` together (theirs, with train.seeds
    set), and each seed's saved train.steps. Their configs as stored must differ in
    train.seed and train.steps alone, and their seeds must follow on."""
    loaded = [run.load_config() for run in seeds]
    cfg, tokenizer = loaded[0]
    first = cfg.train.seed
    for n, (run, (other, _)) in enumerate(zip(seeds, loaded)):
        if other.train.seed != first + n:
            raise JabError(
                f"{path} is not a group jab trained: its seeds do not follow on "
                f"({run.path} has train.seed {other.train.seed})"
            )
        if run.shared != seeds[0].shared:
            raise JabError(
                f"{run.path}/config.yaml differs from {seeds[0].path}/config.yaml in more "
                "than train.seed and train.steps; the seeds of a group are trained and "
                f"evaluated together (name {run.path} alone instead)"
            )
    group = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, seeds=len(seeds)))
    return group, tokenizer, [other.train.steps for other, _ in loaded]


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
        copies = in_code(cfg)
        if copies:  # the run's own copies of the user's code, as of its data
            keep_code(run.path, copies)
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
        for key, value in in_code(cfg).items():
            section, _, name = key.partition(".")
            saved[section][name] = kept(key, value)
        self.created = time.strftime("%Y-%m-%dT%H:%M:%S")
        data = {"format": FORMAT, "created": self.created, **saved, "vocab": tokenizer.tokens}
        atomic_write(self.path / "config.yaml", yaml.safe_dump(data, sort_keys=False).encode())
        self.fingerprint = fingerprint(saved, tokenizer)
        self.shared = fingerprint(saved, tokenizer, ("steps", "log_to", "seed"))

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
    def open(cls, path: Path | None) -> Run:
        """An existing run, checked to be one; the newest under runs/ when `path` is None."""
        path = latest_run() if path is None else Path(path)
        if not path.is_dir():
            raise JabError(f"run folder {str(path)!r} does not exist")
        if not (path / "config.yaml").is_file():
            if (path / STUDY_FILE).is_file():  # first: its cells may be named seed-N
                raise JabError(
                    f"{path} is a study, not a run: see it with jab study show "
                    f"{shlex.quote(str(path))}, or name one of its cells' folders"
                )
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
        self.shared = fingerprint(data, tokenizer, ("steps", "log_to", "seed"))
        cfg = from_dict(copy.deepcopy(data), f"{self.path}/config.yaml")
        source = data_path(cfg.task.name)
        if source is not None:  # the run's own copy, wherever the run is looked at from
            cfg.task.name = FILE_PREFIX + str(self.path / source)
        copies = in_code(cfg)
        for key, value in copies.items():  # its copies of the user's code, likewise
            section, _, name = key.partition(".")
            setattr(getattr(cfg, section), name, kept(key, value, self.path))
        if copies:
            changed_since(self.path)
        return cfg, tokenizer

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

    def at_target(self, step: int | None = None) -> bool:
        """Whether the run's held-out exact match at `step` (None: its newest evaluation)
        reached train.target_seq_acc, as the Trainer decided when it made it: where
        training stops, and where a resume or a study's cell has nothing left to train."""
        from jabcli.core.config import at_target

        cfg, _ = self.load_config()
        scores = [
            r["eval_seq_acc"]
            for r in self.read_metrics()
            if r.get("eval_seq_acc") is not None and (step is None or r["step"] == step)
        ]
        return bool(scores) and at_target(scores[-1], cfg.train.target_seq_acc)

    def append_metrics(self, record: LogRecord) -> None:
        try:
            with open(self.path / "metrics.jsonl", "a") as f:
                f.write(json.dumps(record.to_json()) + "\n")
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

    # lock

    @contextlib.contextmanager
    def lock(self):
        """Refuse a second writer. The lock is an flock on .lock, so the kernel releases
        it when its process dies, however it dies: a left-over file never blocks."""
        path = self.path / ".lock"
        while True:
            try:
                fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o666)  # less the umask, as any file
            except OSError as err:
                raise JabError(f"could not write {self.path}: {describe(err)}") from None
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
