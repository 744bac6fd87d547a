"""The config (jabcli/core/config.py, settings.py): every declared bound and choice is the
check, a mistake is named in one line before anything is written."""

import re

import pytest

from jabcli.core.errors import JabError
from jabcli.experiment.resolve import resolve

CONFIG_CASES = {
    "zero size": ("copy", ["model.d_model=0"], "model.d_model must be positive"),
    "no pass through the layers": ("copy", ["model.loops=0"], "model.loops must be positive"),
    "heads do not divide d_model": ("copy", ["model.num_heads=5"], "divisible"),
    "min_len above max_len": ("copy", ["task.min_len=9", "task.max_len=3"], "must not exceed"),
    "lengths the model cannot take": ("copy", ["task.max_len=5000"], "the model takes at most"),
    "unknown positional encoding": (
        "copy",
        ["model.pos_encoding=rotary"],
        "must be one of sinusoidal, learned, rope, alibi, randomized",
    ),
    "rope with an odd head size": (
        "copy",
        ["model.pos_encoding=rope", "model.d_model=40", "model.num_heads=8"],
        "must be even",
    ),
    "a modulus with no residues to add": ("modular_arithmetic", ["task.modulus=1"], "2 to 10"),
    "a modulus past one digit a residue": ("solve_equation", ["task.modulus=11"], "2 to 10"),
    "equations too short for x, = and a value": (
        "solve_equation",
        ["task.min_len=2"],
        "needs task.min_len >= 3",
    ),
    "addition given another alphabet": (
        "addition",
        ["task.alphabet=0123"],
        "always uses the alphabet",
    ),
    "a built-in task over characters jab's vocabulary lacks": (
        "copy",
        ["task.alphabet=AB"],
        "task.alphabet has characters the tokenizer lacks: 'AB'",
    ),
    "missing data file": ("file:nothere.tsv", [], "does not exist"),
    "data file with a bad line": ("file:bad.tsv", [], "bad.tsv line 2"),
    "a number too big for a float, named as typed": (
        "copy",
        ["train.learning_rate=1e309"],
        "train.learning_rate must be a finite number, got '1e309'",
    ),
    "too many positions": ("copy", ["model.max_positions=100000"], "at most 4096"),
    "a held-out share that leaves nothing to train on": (
        "copy",
        ["task.held_out=1"],
        "task.held_out must be between 0 and 1, got 1.0",
    ),
    "a shift past a million places": (
        "shift",
        ["task.shift=2000000"],
        "task.shift must be at most 1000000, got 2000000",
    ),
    "a final learning rate above the peak": (
        "copy",
        ["train.final_lr_fraction=2"],
        "train.final_lr_fraction must be in [0, 1], got 2.0",
    ),
    "an Adam decay of 1, which never forgets": (
        "copy",
        ["train.adam_b2=1"],
        "train.adam_b2 must be in [0, 1), got 1.0",
    ),
    "index hints on a task whose answer is not made of its input's symbols": (
        "sort",
        ["task.index_hints=true"],
        "(copy, reverse, duplicate, shift, odds_first); sort is not one",
    ),
    "index hints with coupled positions": (
        "copy",
        ["task.index_hints=true", "model.pos_encoding=coupled"],
        "cannot be combined",
    ),
    "index hints for more symbols than there are hints": (
        "copy",
        ["task.index_hints=true", "task.max_len=200"],
        "longer than the 128 symbols that task.index_hints can number",
    ),
}


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_a_config_mistake_is_named_before_anything_is_written(case, tmp_path, monkeypatch):
    """The checks behind `jab train` (the same one-line path as the CASES above)."""
    task, sets, expected = CONFIG_CASES[case]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.tsv").write_text("12\t21\n123 321\n")
    with pytest.raises(JabError, match=re.escape(expected)):
        resolve(task, sets=sets)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tsv"]


def test_every_declared_bound_refuses_the_values_past_it_and_keeps_its_own_if_closed():
    """The bounds of jabcli/core/settings.py are the checks: a value past one is refused
    in a line naming the key, the bound itself only where the range is open there."""
    from jabcli.core.config import check
    from jabcli.core.settings import Config, keys

    defaults, bounded = Config().to_dict(), 0
    for key, setting in keys().items():
        section, _, name = key.partition(".")
        kind = type(defaults[section][name])
        step = 0.5 if kind is float else 1
        for bound, closed, past in (
            (setting.above, False, -step),
            (setting.at_least, True, -step),
            (setting.below, False, step),
            (setting.at_most, True, step),
        ):
            if bound is None:
                continue
            bounded += 1
            with pytest.raises(JabError, match=rf"^{re.escape(key)} must be "):
                check(key, kind(bound + past), setting)
            if closed:
                check(key, kind(bound), setting)
            else:
                with pytest.raises(JabError, match=rf"^{re.escape(key)} must be "):
                    check(key, kind(bound), setting)
    assert bounded >= 30


def test_a_class_in_the_users_code_passes_the_choices_only_of_a_key_that_takes_one():
    """task.name, model.arch and the positional encodings are to take a class in the
    user's code (PATH.py:Class, package.module:Class): the config's check of a key's
    choices lets such a value through to whoever resolves it, and only for those keys."""
    from jabcli.core.config import check
    from jabcli.core.settings import Setting, keys

    takes_code = Setting(choices=("post", "pre"), code=True)
    for value in ("my_norms.py:RMSNorm", "my_package.norms:RMSNorm"):
        check("model.norm", value, takes_code)
        with pytest.raises(JabError, match=r"^model.norm must be one of post, pre, got 'my"):
            check("model.norm", value, keys()["model.norm"])
    with pytest.raises(JabError, match=r"^model.norm must be one of post, pre, got 'mid'$"):
        check("model.norm", "mid", takes_code)
    assert [key for key, setting in keys().items() if setting.code] == [
        "task.name", "model.pos_encoding", "model.src_pos_encoding", "model.tgt_pos_encoding",
        "model.arch",
    ]  # fmt: skip


def test_a_task_file_may_write_out_options_at_their_defaults(tmp_path):
    """Only an option set away from its default is refused for a task that does not
    take it; `1e-1` is YAML's string for the default 0.1, read as the config reads it."""
    task = tmp_path / "copy.yaml"
    task.write_text("task:\n  name: copy\n  modulus: 5\n  held_out: 1e-1\n")
    assert resolve(str(task)).config.task.held_out == 0.1
