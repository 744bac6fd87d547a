"""What decides a cell's results, as digests that study.json keeps: `check` builds every
cell's experiment as `jab train` would and gives the cell its `spec` (training and
measurement) and `train_spec` (training, train.steps aside). A config key added since the
first studies were measured is left out while it has its default (`ADDED_LATER`), and a
cell recorded in an older form is upgraded (`same_training`, `upgrade`), so that a study
measured before keeps its cells.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jabcli.core import settings
from jabcli.core.errors import JabError
from jabcli.runs.runs import atomic_write
from jabcli.studies.studies import (
    EVALUATION_FILE,
    Cell,
    CellEntry,
    Evaluation,
    Study,
    TrainedSpec,
)


def check(study: Study) -> list[Any]:
    """Build every cell's experiment as `jab train` would, before any cell starts: a bad
    key or value is one error naming the cell. Sets each cell's resolved config and its
    spec, and returns the experiments."""
    from jabcli.experiment.resolve import resolve
    from jabcli.training.training import check as check_training

    experiments = []
    defaults, declared = settings.Config().to_dict(), settings.keys()
    for cell in study.cells:
        try:
            experiment = resolve(
                cell.task,
                seed=cell.seed,
                seeds=cell.seeds,
                overrides=cell.values,
                source=str(study.source),
            )
            check_training(experiment)
            high, longest = study.evaluation.lengths[1], experiment.longest_input()
            if high > longest:  # measured as asked, never cut short
                raise JabError(
                    f"evaluate.lengths goes up to {high}, but its model takes inputs of at "
                    f"most {longest} symbols (model.max_positions = "
                    f"{experiment.config.model.max_positions}); lower the one or raise the other"
                )
        except JabError as err:
            raise JabError(f"cell {cell.name!r}: {err}") from None
        cell.config = experiment.config
        resolved = experiment.config.to_dict()
        # As the file writes it: the same study run from another folder is the same study.
        config = {**resolved, "task": {**resolved["task"], "name": cell.written}}
        # A key that decides no result (where logs go) is left out: changing it reruns nothing.
        config = {
            section: {k: v for k, v in values.items() if declared[f"{section}.{k}"].results}
            for section, values in config.items()
        }
        for section, key in ADDED_LATER:  # at its default, as the cell was before the key
            if config[section].get(key) == defaults[section][key]:
                config[section] = {k: v for k, v in config[section].items() if k != key}
        cell.trained = {"task": cell.written, "config": config}
        cell.spec = digest({**cell.trained, "evaluate": study.evaluation.measure()})
        cell.train_spec = digest(with_steps(cell.trained, None))
        experiments.append(experiment)
    return experiments


def with_steps(trained: TrainedSpec, steps: int | None) -> TrainedSpec:
    """A cell's task and config with train.steps set to `steps` (None: left out)."""
    train = {k: v for k, v in trained["config"]["train"].items() if k != "steps"}
    if steps is not None:
        train["steps"] = steps
    return {**trained, "config": {**trained["config"], "train": train}}


# The config keys jab had when the first study folders were measured (e14df94). A key
# added since is left out of a cell's spec while it has its default, so a study measured
# before the key existed keeps its cells.
KEYS_WHEN_STUDIES_BEGAN = frozenset({
    "task.name", "task.min_len", "task.max_len", "task.alphabet", "task.shift",
    "task.reverse_answer", "task.index_hints", "task.held_out",
    "model.d_model", "model.num_heads", "model.num_layers", "model.d_ff", "model.dropout",
    "model.norm", "model.activation", "model.pos_encoding", "model.src_pos_encoding",
    "model.tgt_pos_encoding", "model.max_positions",
    "train.batch_size", "train.pack", "train.steps", "train.learning_rate",
    "train.warmup_steps", "train.weight_decay", "train.clip_norm", "train.seed", "train.seeds",
    "train.log_every", "train.eval_every", "train.eval_samples", "train.target_seq_acc",
    "train.keep_checkpoints", "train.log_to",
})  # fmt: skip
ADDED_LATER = tuple(
    tuple(key.split(".")) for key in settings.keys() if key not in KEYS_WHEN_STUDIES_BEGAN
)


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def same_training(cell: Cell, entry: CellEntry, evaluated: Mapping[str, object]) -> bool:
    """Whether a cell of the folder (its study.json entry) was trained as the file trains
    it now, train.steps aside."""
    if "train_spec" in entry:
        return entry["train_spec"] == cell.train_spec
    # Recorded before train_spec: its spec digests its training and the whole evaluation.
    legacy = {**with_steps(cell.trained, entry.get("steps")), "evaluate": evaluated}
    return entry.get("spec") == digest(legacy)


def upgrade(
    out: Path, cell: Cell, entry: CellEntry, evaluated: Mapping[str, object], now: Evaluation
) -> None:
    """A cell measured before specs left out the bins, measured as the file still measures
    it: its evaluation.json is given the spec of today, so that it stays measured (its
    figures by length are the same, whatever the bins). `entry` is updated too."""
    if "train_spec" in entry or entry.get("steps") != cell.steps:
        return
    if {k: v for k, v in evaluated.items() if k != "bins"} != now.measure():
        return
    if not same_training(cell, entry, evaluated):
        return
    path = out / cell.folder / EVALUATION_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict) and data.get("spec") == entry.get("spec"):
        atomic_write(path, json.dumps({**data, "spec": cell.spec}).encode())
    entry["spec"] = cell.spec
    entry["train_spec"] = cell.train_spec
