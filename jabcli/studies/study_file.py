"""Study files: reading one and checking its shape, every mistake one line naming where
it is.

A study file (YAML) names a base, the cells, the seeds and the evaluation:

    name: classic                  # optional; default: the file's name
    base:
      task: reverse                # as jab train --task: NAME, FILE.yaml or file:PATH
      steps: 2000                  # as jab train --steps
      set:                         # as jab train --set KEY=VALUE, one mapping
        task.max_len: 16
    seeds: 3                       # models per cell, trained together (jab train --seeds)
    seed: 0                        # the first seed
    parameters:                    # a grid, as a W&B sweep writes it: every combination
      task.name: {values: [reverse, copy, sort]}  # is a cell (task.name: that preset)
      model.pos_encoding: {values: [sinusoidal, rope]}
    rows:                          # and/or cells named one by one
      - name: sort none/randomized
        task: sort
        steps: 3000
        set: {model.src_pos_encoding: none, model.tgt_pos_encoding: randomized}
    evaluate:                      # as jab eval --lengths --samples --force-length --seed
      lengths: 1-64
      samples: 20                  # held-out inputs per length
      force_length: false
      seed: 1
      bins: [1-16, 17-32, 33-64]   # the table's columns

`read` turns the file into a `Study` (studies.py) of `Cell`s: a grid's every combination
and the rows, each with its task and config keys; their configs are checked when the
cells are built (`specs.check`).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from jabcli.core import config as configuration
from jabcli.core import settings
from jabcli.core.errors import JabError, suggest, whole
from jabcli.core.lengths import length_range
from jabcli.studies.studies import Cell, Evaluation, Study, check_bins, slug

SECTIONS = ("name", "base", "seeds", "seed", "parameters", "rows", "evaluate")
BASE_KEYS = ("task", "steps", "set")
ROW_KEYS = ("name", "task", "steps", "set")
EVALUATE_KEYS = ("lengths", "samples", "force_length", "seed", "bins")
MAX_CELLS = 1000


def read(path: Path) -> Study:
    """A study file, parsed and checked for its shape (not yet for its configs: `check`)."""
    if not path.is_file():
        raise JabError(f"study file {str(path)!r} does not exist")
    data = configuration.read_yaml(path)
    where = str(path)
    if not data:
        raise JabError(f"{where} is empty; a study names its cells (see jab study run --help)")
    unknown(data, SECTIONS, where, "section")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise JabError(f"{where}: name must be a text, got {name!r}")
    base = mapping(data.get("base", {}), f"{where}: base")
    unknown(base, BASE_KEYS, f"{where}: base", "key")
    seeds = count(data.get("seeds", 1), f"{where}: seeds", 1)
    seed = count(data.get("seed", 0), f"{where}: seed", 0)
    base_values = keys(base.get("set", {}), f"{where}: base.set")
    if "steps" in base:
        base_values["train.steps"] = count(base["steps"], f"{where}: base.steps", 1)
    base_task = base.get("task", base_values.pop("task.name", None))
    cells = grid_cells(data.get("parameters"), base_task, base_values, seed, seeds, where)
    cells += row_cells(data.get("rows"), base_task, base_values, seed, seeds, where)
    if not cells:
        raise JabError(f"{where} has no cells: give parameters (a grid) or rows, or both")
    if len(cells) > MAX_CELLS:
        raise JabError(f"{where} has {len(cells)} cells; a study takes at most {MAX_CELLS}")
    for cell in cells:
        cell.written = str(cell.task)
        cell.task = relative_task(cell.task, path.parent, where, cell.name)
        for key in CODE_KEYS:  # the user's scheme or form, found next to the study file
            if isinstance(cell.values.get(key), str):
                cell.values[key] = relative_code(cell.values[key], path.parent)
    seen: dict[str, str] = {}
    for cell in cells:
        if cell.folder in seen:
            raise JabError(
                f"{where}: cells {seen[cell.folder]!r} and {cell.name!r} would share the "
                f"folder {cell.folder!r}; give them different names"
            )
        seen[cell.folder] = cell.name
    evaluation = read_evaluation(data.get("evaluate", {}), where)
    return Study(name.strip(), path, cells, evaluation, path.read_text())


def grid_cells(parameters, task, base, seed, seeds, where) -> list[Cell]:
    """Every combination of the grid's values, as W&B's `parameters: {key: {values: [...]}}`
    (a plain list, or `{value: x}` for one value, is taken too)."""
    if parameters is None:
        return []
    parameters = mapping(parameters, f"{where}: parameters")
    axes = []
    for key, spec in parameters.items():
        what = f"{where}: parameters.{key}"
        if isinstance(spec, dict):
            unknown(spec, ("values", "value"), what, "key")
            spec = spec["values"] if "values" in spec else [spec.get("value")]
        if not isinstance(spec, list) or not spec:
            raise JabError(f"{what} must list its values: {{values: [a, b]}}, got {spec!r}")
        if len(set(map(repr, spec))) != len(spec):
            raise JabError(f"{what} lists a value twice: {spec!r}")
        axes.append([(str(key), value) for value in spec])
    cells = []
    for combination in itertools.product(*axes):
        values = dict(base)
        cell_task = task
        for key, value in combination:
            if key == "task.name":
                cell_task = value
            else:
                values[key] = value
        name = " ".join(str(value) for _, value in combination)
        cells.append(Cell(name, slug(name), cell_task, values, seed, seeds))
    return cells


def row_cells(rows, task, base, seed, seeds, where) -> list[Cell]:
    """The cells named one by one: a name, and a task, steps and keys of their own."""
    if rows is None:
        return []
    if not isinstance(rows, list):
        raise JabError(f"{where}: rows must be a list of cells, each with a name")
    cells = []
    for n, row in enumerate(rows):
        what = f"{where}: rows[{n}]"
        row = mapping(row, what)
        unknown(row, ROW_KEYS, what, "key")
        name = row.get("name")
        if not isinstance(name, str) or not name.strip():
            raise JabError(f"{what} needs a name")
        values = {**base, **keys(row.get("set", {}), f"{what}.set")}
        if "steps" in row:
            values["train.steps"] = count(row["steps"], f"{what}.steps", 1)
        cell_task = row.get("task", values.pop("task.name", task))
        cells.append(Cell(name.strip(), slug(name), cell_task, values, seed, seeds))
    return cells


def read_evaluation(data, where: str) -> Evaluation:
    data = mapping(data, f"{where}: evaluate")
    unknown(data, EVALUATE_KEYS, f"{where}: evaluate", "key")
    lengths = length_range(data.get("lengths", "1-64"), f"{where}: evaluate.lengths")
    samples = count(data.get("samples", 20), f"{where}: evaluate.samples", 1)
    force = data.get("force_length", False)
    if not isinstance(force, bool):
        raise JabError(f"{where}: evaluate.force_length must be true or false, got {force!r}")
    seed = count(data.get("seed", 1), f"{where}: evaluate.seed", 0)
    bins = data.get("bins", [f"{lengths[0]}-{lengths[1]}"])
    if not isinstance(bins, list) or not bins:
        raise JabError(f"{where}: evaluate.bins must list ranges of lengths, like [1-16, 17-32]")
    ranges = tuple(length_range(b, f"{where}: evaluate.bins") for b in bins)
    check_bins(ranges, lengths, f"{where}: evaluate.bins")
    return Evaluation(lengths, samples, force, seed, ranges)


def relative_task(task: Any, folder: Path, where: str, cell: str) -> str:
    """A cell's task as `jab train --task` takes it; a file it names is found next to the
    study file."""
    if task is None:
        raise JabError(f"{where}: cell {cell!r} has no task (set base.task, or task.name)")
    if not isinstance(task, str):
        raise JabError(f"{where}: cell {cell!r} has task {task!r}; a task is a name")
    path = settings.data_path(task)
    if path is not None:
        return settings.FILE_PREFIX + str(folder / path)
    if task.endswith((".yaml", ".yml")):
        return str(folder / task)
    where_code, _, name = task.rpartition(":")
    if configuration.is_code(task) and where_code.endswith(".py"):  # the user's own file
        return f"{folder / where_code}:{name}"
    return task


CODE_KEYS = ("model.pos_encoding", "model.src_pos_encoding", "model.tgt_pos_encoding", "model.arch")


def relative_code(value: str, folder: Path) -> str:
    """A value naming a class in a file of the user's own (PATH.py:Class), its file
    found next to the study file; any other value as it is."""
    where, _, name = value.rpartition(":")
    if configuration.is_code(value) and where.endswith(".py"):
        return f"{folder / where}:{name}"
    return value


def mapping(value, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise JabError(f"{what} must be a mapping, got {value!r}")
    return value


def keys(value, what: str) -> dict[str, Any]:
    """`{model.d_model: 128}` (or nested `{model: {d_model: 128}}`) as dotted keys."""
    flat = {}
    for key, item in mapping(value, what).items():
        if isinstance(item, dict):
            flat.update({f"{key}.{k}": v for k, v in keys(item, what).items()})
        else:
            flat[str(key)] = item
    return flat


def unknown(data: dict, known: tuple[str, ...], where: str, kind: str) -> None:
    for key in data:
        if key not in known:
            raise JabError(
                f"{where}: unknown {kind} {key!r}{suggest(str(key), known)}; "
                f"known: {', '.join(known)}"
            )


def count(value, what: str, least: int) -> int:
    return whole(value, what, least, 2**31)
