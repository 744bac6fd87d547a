"""`jab tasks --new NAME`: a task file of the user's own to start from, which trains as it
is (docs/own-task.md walks through it)."""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from jabcli.core.errors import JabError

TEMPLATE = '''\
"""{name}: a task of my own. Train it with

    jab train --task {file}:{cls} --set task.max_len=8

It starts as "the input, last symbol first" (3141 -> 1314); change `solve` and `targets`
to ask your own question (docs: "Your own task")."""

import jax.numpy as jnp

from jabcli import Task


class {cls}(Task):
    name = "{name}"  # how messages name it; headings and run folders name it by its class
    description = "The input, its last symbol first: 3141 -> 1314"  # ends in an example
    default_alphabet = "0123456789"  # the symbols inputs are drawn from

    def solve(self, text):
        """The answer to one input, in plain Python: what every answer is checked against
        (jab compares it with `targets` on a sample batch before it trains)."""
        return text[-1] + text[:-1]

    def targets(self, tokens, lengths):
        """The answers to a batch, as array code that runs inside the training step:
        token ids [batch, max_len] (padded after each input) and lengths [batch] ->
        answer ids [batch, width] and their lengths [batch]."""
        columns = jnp.arange(tokens.shape[1])[None, :]
        last = jnp.take_along_axis(tokens, lengths[:, None] - 1, axis=1)
        shifted = jnp.concatenate([last, tokens[:, :-1]], axis=1)  # last, then the rest
        return jnp.where(columns < lengths[:, None], shifted, tokens), lengths  # padded as given

    # Where your task needs it (see `help(jabcli.Task)`):
    # def output_length(self, length):  # the longest answer, when longer than the input
    #     return 2 * length
'''


def class_name(name: str) -> str:
    """`last_first` -> `LastFirst`."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def write_template(name: str, folder: Path = Path(".")) -> Path:
    """Write NAME.py, the template task called `name`, into `folder`; never over a file."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise JabError(
            f"--new takes a task name of lowercase letters, digits and _ (like last_first), "
            f"got {name!r}"
        )
    path = folder / f"{name}.py"
    if path.exists():
        raise JabError(f"{path} already exists; choose another name or move it")
    text = TEMPLATE.format(name=name, cls=class_name(name), file=path.name)
    try:
        with open(path, "x") as f:
            f.write(text)
    except OSError as err:
        raise JabError(f"could not write {path}: {err.strerror}") from None
    return path
