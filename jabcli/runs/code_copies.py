"""A run's copies of the user's own code (its task's, positional schemes' and form's files,
tasks/user_code.py): made when the run is created, named in its config.yaml relative to
the run, loaded from the run wherever it is looked at from, with where each came from and
its digest (`code.json`), and a note when an original has changed since."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from jabcli.core.errors import JabError, Note
from jabcli.core.settings import Config, is_code
from jabcli.runs.files import atomic_write, describe
from jabcli.tasks.user_code import KEPT

CODE_RECORD = "code.json"  # where each of a run's copies of the user's code came from


def code_file(value: str) -> str | None:
    """The Python file a config value in the user's code names (PATH.py:Class), or None."""
    where = value.rpartition(":")[0] if is_code(value) else ""
    return where if where.endswith(".py") else None


def in_code(cfg: Config) -> dict[str, str]:
    """The config keys of `cfg` whose values name a class in a file of the user's own
    (user_code.KEPT: the task, the positional schemes), with each value."""
    values = {key: getattr(getattr(cfg, key.split(".")[0]), key.split(".")[1]) for key in KEPT}
    return {key: value for key, value in values.items() if code_file(value) is not None}


def keep_code(path: Path, found: dict[str, str]) -> None:
    """Copy the files of the user's code that `found` names (config key: value, as
    `in_code` gives them) into the run folder `path`, with where each came from and its
    digest (CODE_RECORD), and trust them: the user trained with them."""
    from jabcli.tasks import user_code

    record = {}
    for key, value in found.items():
        source = code_file(value)
        assert source is not None  # `in_code` keeps the values that name a file
        try:
            data = Path(source).read_bytes()
        except OSError as err:
            raise JabError(f"could not read {source}: {describe(err)}") from None
        atomic_write(path / KEPT[key], data)
        record[key] = {"source": str(Path(source).resolve()), "sha256": user_code.digest(data)}
        user_code.trust(data)
    atomic_write(path / CODE_RECORD, json.dumps(record, indent=1).encode())


def kept(key: str, value: str, folder: Path | str = "") -> str:
    """A config value naming the user's code, as the run's copy of it in `folder`."""
    return f"{Path(folder) / KEPT[key]}:{value.rpartition(':')[2]}"


told_changed: set[str] = set()  # the copies whose changed original was said, once a process


def changed_since(path: Path) -> None:
    """Say once, as a note, that a file a run's code was copied from has changed since (the
    run goes on using its copy)."""
    from jabcli.tasks import user_code

    try:
        record = json.loads((path / CODE_RECORD).read_text())
    except (OSError, ValueError):
        return
    for key, copied in record.items() if isinstance(record, dict) else []:
        try:
            now = user_code.digest(Path(copied["source"]).read_bytes())
        except (OSError, KeyError, TypeError):
            continue  # the original is gone (or the record is): the copy is all there is
        told = f"{path}/{key}"
        if now != copied["sha256"] and told not in told_changed:
            told_changed.add(told)
            warnings.warn(
                f"{copied['source']} has changed since {path} was trained; the run uses "
                f"its own copy, {path / KEPT[key]}",
                Note,
                stacklevel=2,
            )
