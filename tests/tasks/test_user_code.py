"""The user's own code: a task (`--task PATH.py:Class`) and a positional scheme
(`--set model.pos_encoding=PATH.py:Class`), the examples of docs/own-task.md and
docs/own-positional-encoding.md trained through the command line and the API, the run's
copy of the code loaded after the original moves, code that arrives in a run imported
only when trusted, and mistakes in the user's code named."""

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from jabrun import TINY, TINY_OVERRIDES, TINY_SETS, jab_here

import jabcli as jab

DOCS = Path(__file__).resolve().parents[2] / "docs"
SETS = [arg for value in TINY_SETS for arg in ("--set", value)]


def example(page: str = "own-task.md") -> str:
    """A page's worked example, as a user would copy it."""
    return re.search(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S).group(1)


@pytest.fixture(scope="module")
def ends_run(tmp_path_factory):
    """The page's task trained for 100 steps from its own file, which is then moved away."""
    folder = tmp_path_factory.mktemp("own")
    (folder / "ends.py").write_text(example())
    trained = jab_here("train", "--task", "ends.py:Ends", *SETS, "--steps", "100",
                       "--out", "run", cwd=folder)  # fmt: skip
    assert "Training Ends" in trained.stdout
    (folder / "ends.py").rename(folder / "moved.py")
    return folder


def test_the_docs_own_task_trains_and_its_run_answers_after_the_file_moves(ends_run):
    assert (ends_run / "run/task-code.py").read_text() == example()
    answered = jab_here("predict", "--run", "run", "0123", "31", cwd=ends_run)
    assert "30" in answered.stdout and "13" in answered.stdout  # the references
    evaluated = jab_here("eval", "run", "--samples", "20", "--json", cwd=ends_run)
    assert json.loads(evaluated.stdout)["task"] == "Ends"


def test_the_api_trains_a_task_named_by_its_file_and_class(ends_run, tmp_path):
    shutil.copy(ends_run / "moved.py", tmp_path / "ends.py")
    run = jab.train(str(tmp_path / "ends.py") + ":Ends", steps=20, overrides=TINY_OVERRIDES,
                    out=tmp_path / "api")  # fmt: skip
    assert run.predict("012")[0]["expected"] == "20"


def test_a_changed_original_is_noted_once_and_the_run_keeps_its_copy(ends_run, tmp_path):
    shutil.copytree(ends_run / "run", tmp_path / "run")
    shutil.copy(ends_run / "moved.py", tmp_path / "ends.py")
    record = (tmp_path / "run/code.json").read_text()
    (tmp_path / "run/code.json").write_text(
        re.sub(r'"source": "[^"]*"', f'"source": "{tmp_path / "ends.py"}"', record)
    )
    (tmp_path / "ends.py").write_text(example() + "\n# changed since\n")
    answered = jab_here("predict", "--run", "run", "0123", cwd=tmp_path)
    assert answered.stderr.count("has changed since") == 1
    assert "uses its own copy" in answered.stderr


def test_code_that_came_with_a_run_is_imported_only_when_the_user_trusts_it(
    ends_run, tmp_path, monkeypatch
):
    shutil.copytree(ends_run / "run", tmp_path / "run")
    ran = tmp_path / "it-ran"
    code = tmp_path / "run/task-code.py"
    code.write_text(code.read_text() + f"\nopen({str(ran)!r}, 'w').close()\n")
    refused = jab_here("predict", "--run", "run", "0123", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and not ran.exists()
    assert "JAB_TRUST_CODE=1" in refused.stderr and refused.stderr.count("\n") == 1
    monkeypatch.setenv("JAB_TRUST_CODE", "1")
    assert jab_here("predict", "--run", "run", "0123", cwd=tmp_path).returncode == 0
    assert ran.exists()
    monkeypatch.delenv("JAB_TRUST_CODE")  # remembered from then on
    assert jab_here("predict", "--run", "run", "0123", cwd=tmp_path).returncode == 0


WRONG = {
    "no such file": ("", "nothere.py:Ends", "could not read nothere.py"),
    "no such class": ("ends", "wrong.py:Endz", "wrong.py has no Endz"),
    "not a task": ("class Ends:\n    pass\n", "wrong.py:Ends", "is not a task: subclass"),
    "members missing": (
        "from jabcli import Task\n\nclass Ends(Task):\n    name = 'ends'\n",
        "wrong.py:Ends",
        "wrong.py:Ends does not define description, solve",
    ),
    "no such module": ("", "nothere_at_all.tasks:Ends", "no module named 'nothere_at_all.tasks'"),
    "solve and targets disagree": (
        "wrong_solve",
        "wrong.py:Ends",
        "task ends: solve and targets disagree on input ",
    ),
}


@pytest.mark.parametrize("case", WRONG)
def test_a_mistake_in_the_users_task_is_named_in_one_line_before_anything_is_written(
    case, tmp_path
):
    code, task, message = WRONG[case]
    if code == "ends":
        code = example()
    elif code == "wrong_solve":
        code = example().replace("text[-1] + text[0]", "text[0] + text[-1]")
    (tmp_path / "wrong.py").write_text(code)
    refused = jab_here("train", "--task", task, *SETS, "--out", "run", cwd=tmp_path, check=False)
    assert refused.returncode == 2, refused.stderr
    assert message in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("where", ["solve", "solve answered on the host", "import"])
def test_an_exception_in_the_users_code_shows_their_traceback_not_jabs(where, tmp_path):
    helper = "\n\ndef helper(text):\n    return text[99]\n"
    code = example().replace("return text[-1] + text[0]", "return helper(text)") + helper
    if where == "solve answered on the host":  # raised inside a JAX callback
        code = re.sub(r"\n    def targets\(.*?\n\n", "\n\n", code, flags=re.S)
        assert "def targets" not in code
    if where == "import":
        code = code + "\nhelper('')\n"
    (tmp_path / "broken.py").write_text(code)
    refused = jab_here("train", "--task", "broken.py:Ends", *SETS, "--out", "run",
                       cwd=tmp_path, check=False)  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.startswith("Traceback (your code):\n"), refused.stderr
    assert "broken.py" in refused.stderr and "return text[99]" in refused.stderr
    assert "jabcli" not in refused.stderr and "jax" not in refused.stderr  # none of theirs
    last = refused.stderr.rstrip().splitlines()[-1]
    assert last.startswith("jab: error: importing broken.py raised IndexError" if where ==
                           "import" else "jab: error: ends's solve(")  # fmt: skip
    assert len(refused.stderr.splitlines()) <= 10  # two frames of theirs, not pages
    assert not (tmp_path / "run").exists()


def test_an_installed_packages_task_is_listed_and_trained_by_its_entry_point_name(
    ends_run, tmp_path, monkeypatch
):
    site = tmp_path / "site"
    (site / "mytasks").mkdir(parents=True)
    (site / "mytasks/__init__.py").write_text("")
    shutil.copy(ends_run / "moved.py", site / "mytasks/ends.py")
    info = site / "mytasks-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mytasks\nVersion: 0.1\n")
    (site / "mytasks/binary.py").write_text(example("own-positional-encoding.md"))
    (site / "mytasks/mine.py").write_text(example("own-model-form.md"))
    (info / "entry_points.txt").write_text(
        "[jab.tasks]\nends = mytasks.ends:Ends\n"
        "[jab.positional_encodings]\nbinary = mytasks.binary:Binary\n"
        "[jab.model_forms]\nmine = mytasks.mine:HaikuEncoder\n"
    )
    monkeypatch.syspath_prepend(str(site))
    listed = jab_here("tasks", cwd=tmp_path).stdout
    assert "Installed task ends: mytasks.ends:Ends from mytasks 0.1" in " ".join(listed.split())
    jab_here("train", "--task", "ends", *SETS, "--steps", "20", "--out", "run", cwd=tmp_path)
    assert not (tmp_path / "run/task-code.py").exists()  # installed code: named, not copied
    assert jab_here("predict", "--run", "run", "31", cwd=tmp_path).returncode == 0
    both = ["--set", "model.pos_encoding=binary", "--set", "model.arch=mine"]
    trained = jab_here("train", *TINY, *both, "--steps", "20", "--out", "mine", cwd=tmp_path)
    assert "Binary" not in trained.stdout and "binary, mine" in trained.stdout


def run_study(folder: Path, cells: str, task: str | None = None) -> None:
    """studies/study.yaml in `folder`, the tiny run's settings and `cells` (its rows or
    parameters), run into `folder`/study by one worker."""
    sets = "\n".join(f"    {k}: {v!r}" for k, v in TINY_OVERRIDES.items())
    base = f"  task: {task}\n" if task else ""
    (folder / "studies/study.yaml").write_text(
        f"name: study\nbase:\n{base}  steps: 20\n  set:\n{sets}\n{cells}\n"
        "evaluate: {lengths: 1-6, samples: 5}\n"
    )
    ran = jab_here("study", "run", "studies/study.yaml", "--out", "study", "--workers", "1",
                   cwd=folder, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr


def test_a_study_mixes_a_users_task_with_a_built_in_one(ends_run, tmp_path):
    (tmp_path / "studies").mkdir()
    shutil.copy(ends_run / "moved.py", tmp_path / "studies/ends.py")  # beside the study file
    run_study(
        tmp_path, "rows:\n  - {name: mine, task: 'ends.py:Ends'}\n  - {name: copy, task: copy}"
    )
    shown = jab_here("study", "show", "study", "--json", cwd=tmp_path).stdout
    assert '"mine"' in shown and '"copy"' in shown


def test_jab_tasks_new_writes_a_template_task_that_trains_as_it_is(tmp_path):
    wrote = jab_here("tasks", "--new", "last_first", cwd=tmp_path)
    assert "jab train --task last_first.py:LastFirst" in wrote.stdout
    trained = jab_here("train", "--task", "last_first.py:LastFirst", *SETS, "--steps", "20",
                       "--out", "run", cwd=tmp_path)  # fmt: skip
    assert "Training LastFirst" in trained.stdout
    assert jab_here("predict", "--run", "run", "3121", cwd=tmp_path).stdout.count("1312") == 1
    again = jab_here("tasks", "--new", "last_first", cwd=tmp_path, check=False)
    assert again.returncode == 2 and "last_first.py already exists" in again.stderr
    bad = jab_here("tasks", "--new", "Last-First", cwd=tmp_path, check=False)
    assert bad.returncode == 2 and "--new takes a task name" in bad.stderr


def test_the_docs_own_positional_scheme_trains_and_its_run_compares_after_the_file_moves(
    trained, tmp_path
):
    (tmp_path / "binary.py").write_text(example("own-positional-encoding.md"))
    jab_here("train", *TINY, "--steps", "20", "--set", "model.pos_encoding=binary.py:Binary",
             "--out", "run", cwd=tmp_path)  # fmt: skip
    (tmp_path / "binary.py").unlink()
    assert (tmp_path / "run/pos_encoding-code.py").is_file()
    compared = jab_here("compare", "run", trained / "runs/tiny", "--lengths", "2-3",
                        "--samples", "5", "--json", cwd=tmp_path)  # fmt: skip
    first, _ = json.loads(compared.stdout)
    assert first["pos_encoding"] == "Binary"


@pytest.mark.parametrize(
    "value, message",
    [
        ("nothere.py:Binary", "could not read nothere.py"),
        ("tests_helpers_absent.mod:Binary", "no module named 'tests_helpers_absent.mod'"),
        ("wrong.py:Plain", "is not a positional scheme: subclass jabcli.PositionalScheme"),
    ],
)
def test_a_mistake_in_the_users_scheme_is_named_in_one_line(value, message, tmp_path):
    (tmp_path / "wrong.py").write_text("class Plain:\n    pass\n")
    refused = jab_here("train", *TINY, "--set", f"model.pos_encoding={value}", "--out", "run",
                       cwd=tmp_path, check=False)  # fmt: skip
    assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    assert refused.stderr.count("\n") == 1 and not (tmp_path / "run").exists()


GREEK = """
import jax.numpy as jnp

from jabcli import Task


class Capitals(Task):
    name = "capitals"
    description = "Greek capitals: αβγ -> ΑΒΓ"
    default_alphabet = "αβγ"
    symbols = "ΑΒΓ"  # what answers write beyond the alphabet

    def solve(self, text):
        return text.upper()

    def targets(self, tokens, lengths):
        table = jnp.arange(len(self.tokenizer))
        table = table.at[jnp.array(self.tokenizer.ids("αβγ"))].set(
            jnp.array(self.tokenizer.ids("ΑΒΓ"))
        )
        return table[tokens], lengths
"""


def test_a_users_task_over_its_own_symbols_trains_and_its_run_keeps_that_vocabulary(tmp_path):
    (tmp_path / "greek.py").write_text(GREEK)
    sets = [arg for value in TINY_SETS if "alphabet" not in value for arg in ("--set", value)]
    jab_here("train", "--task", "greek.py:Capitals", *sets, "--steps", "20", "--out", "run",
             cwd=tmp_path)  # fmt: skip
    vocab = yaml.safe_load((tmp_path / "run/config.yaml").read_text())["vocab"]
    assert vocab[-6:] == sorted("αβγΑΒΓ") and "a" in vocab  # the shared ones, then its own
    answered = jab_here("predict", "--run", "run", "αβγγ", cwd=tmp_path)
    assert "ΑΒΓΓ" in answered.stdout  # the reference


SHIFT = """
from jabcli import Task


class Shift(Task):
    name = "shift"
    description = "Each letter, the next: ABZ -> BCA"
    default_alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def solve(self, text):
        return "".join(chr(65 + (ord(c) - 64) % 26) for c in text)
"""


def test_a_users_task_drawn_from_fewer_symbols_still_answers_with_all_of_its_own(tmp_path):
    (tmp_path / "shift.py").write_text(SHIFT)
    sets = [arg for value in TINY_SETS if "alphabet" not in value for arg in ("--set", value)]
    jab_here("train", "--task", "shift.py:Shift", *sets, "--set", "task.alphabet=ABC",
             "--steps", "10", "--out", "run", cwd=tmp_path)  # fmt: skip
    vocab = yaml.safe_load((tmp_path / "run/config.yaml").read_text())["vocab"]
    assert set("ABCDZ") <= set(vocab)  # D: an answer to C
    assert "BCD" in jab_here("predict", "--run", "run", "ABC", cwd=tmp_path).stdout


def test_the_docs_own_model_form_trains_evaluates_and_predicts(tmp_path):
    (tmp_path / "mine.py").write_text(example("own-model-form.md"))
    trained = jab_here("train", *TINY, "--steps", "30", "--set",
                       "model.arch=mine.py:HaikuEncoder", "--out", "run", cwd=tmp_path)  # fmt: skip
    assert "sinusoidal, HaikuEncoder" in trained.stdout
    (tmp_path / "mine.py").unlink()
    assert (tmp_path / "run/arch-code.py").is_file()
    evaluated = json.loads(
        jab_here("eval", "run", "--samples", "10", "--json", cwd=tmp_path).stdout
    )
    assert evaluated["step"] == 30
    assert jab_here("predict", "--run", "run", "0123", cwd=tmp_path).returncode == 0
    refused = jab_here("show-attention", "--run", "run", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1


def test_a_ray_cell_holding_code_not_trusted_here_is_not_sent(ends_run, tmp_path, monkeypatch):
    from jabcli.core.errors import JabError
    from jabcli.studies import local
    from jabcli.tasks import user_code

    cell = tmp_path / "cell"
    shutil.copytree(ends_run / "run", cell / "seed-0")
    user_code.check_folder(cell)  # trained with here: sent, and its node imports it
    code = cell / "seed-0/task-code.py"
    code.write_text(code.read_text() + "\n# from elsewhere\n")
    with pytest.raises(JabError, match="JAB_TRUST_CODE=1"):
        user_code.check_folder(cell)
    started = {}

    class Started:
        def __init__(self, *args, **options):
            started.update(options)

    monkeypatch.setattr(local.subprocess, "Popen", Started)
    local.launch(tmp_path, "cell", tmp_path / "logs", trusted=True)
    assert started["env"]["JAB_TRUST_CODE"] == "1"  # the node trusts its driver


REPEAT = """
from dataclasses import dataclass

import jax.numpy as jnp

from jabcli import Task


@dataclass(frozen=True)
class Repeat(Task):
    name = "repeat"
    description = "The last symbol, `times` times: 3141 -> 11"
    times: int = 2

    def solve(self, text):
        return text[-1] * self.times

    def output_length(self, length):
        return 0 * length + self.times

    def targets(self, tokens, lengths):
        last = jnp.take_along_axis(tokens, lengths[:, None] - 1, axis=1)
        return jnp.repeat(last, self.times, axis=1), 0 * lengths + self.times
"""


def test_a_users_task_option_is_a_task_key_checked_by_the_type_of_its_default(tmp_path):
    (tmp_path / "repeat.py").write_text(REPEAT)
    args = ["train", "--task", "repeat.py:Repeat", *SETS, "--steps", "20"]
    jab_here(*args, "--set", "task.times=3", "--out", "run", cwd=tmp_path)
    assert yaml.safe_load((tmp_path / "run/config.yaml").read_text())["task"]["own"] == {"times": 3}
    assert "111" in jab_here("predict", "--run", "run", "231", cwd=tmp_path).stdout
    for wrong, message in [
        ("task.times=three", "config key 'task.times' must be int, got str 'three'"),
        ("task.tims=3", "'task.tims' in --set (did you mean 'task.times'?); task Repeat takes"),
    ]:
        refused = jab_here(*args, "--set", wrong, "--out", "bad", cwd=tmp_path, check=False)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert not (tmp_path / "bad").exists()
    times = {**TINY_OVERRIDES, "task.times": 1}
    api = jab.train(str(tmp_path / "repeat.py") + ":Repeat", steps=20, overrides=times,
                    out=tmp_path / "api")  # fmt: skip
    assert api.predict("12")[0]["expected"] == "2"


def test_an_edited_task_file_is_another_experiment_never_a_program_compiled_for_the_old(
    tmp_path, monkeypatch
):
    from jabcli.experiment.resolve import resolve

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ends.py").write_text(example())
    before = resolve("ends.py:Ends", sets=TINY_SETS)
    edited = example().replace("text[-1] + text[0]", "text[-1] * 2")
    (tmp_path / "ends.py").write_text(edited.replace("[last, tokens[:, :1]]", "[last, last]"))
    after = resolve("ends.py:Ends", sets=TINY_SETS)
    assert before.config == after.config  # the same name, options and model
    assert before != after and before.code_digest != after.code_digest
    assert resolve("copy", sets=TINY_SETS).code_digest == ""  # jab's own code is jab's digest


@pytest.fixture(scope="module")
def solve_only(tmp_path_factory):
    """The page's task without its `targets` (answered by `solve` on the host) trained for
    2 seeds by `jab train` into run/, and what it printed: a program that calls back to
    the host is never kept on disk, so the tests below share one compilation of it."""
    folder = tmp_path_factory.mktemp("solve-only")
    code = re.sub(r"\n    def targets\(.*", "\n", example(), flags=re.S)
    assert "targets" not in code.split("class Ends")[1]
    (folder / "ends.py").write_text(code)
    trained = jab_here("train", "--task", "ends.py:Ends", *SETS, "--seeds", "2", "--steps",
                       "24", "--set", "train.log_every=8", "--out", "run", cwd=folder)  # fmt: skip
    return folder, trained.stdout


def test_a_task_with_solve_alone_trains_answered_on_the_host(solve_only):
    folder, trained = solve_only
    assert "Training 2 seeds of Ends" in trained
    answered = jab_here("predict", "--run", "run/seed-0", "0123", cwd=folder)
    assert "30" in answered.stdout  # the reference, from solve


def test_a_task_with_solve_alone_trains_on_the_answers_targets_gives_step_for_step(
    solve_only, tmp_path
):
    """solve's answers to each batch begin on the host a step ahead (host_answers.py): a
    batch answered for the wrong step would train differently."""
    from jabcli.tasks.host_answers import ANSWERS

    (tmp_path / "with_targets.py").write_text(example())
    with_targets = jab.train(f"{tmp_path / 'with_targets.py'}:Ends", steps=24, seeds=2,
                             out=tmp_path / "with_targets",
                             overrides={**TINY_OVERRIDES, "train.log_every": 8})  # fmt: skip

    def losses(run: jab.Run) -> list[float]:  # its first seed's
        return [r["loss"] for r in run.metrics() if "loss" in r]

    alone = losses(jab.load(solve_only[0] / "run"))  # the same settings, solve alone
    assert len(alone) == 3
    assert alone == pytest.approx(losses(with_targets), rel=1e-5)
    assert ANSWERS.found_begun > ANSWERS.asked / 2  # most batches were answered ahead


def test_a_study_grids_a_users_scheme_found_next_to_the_study_file(trained, tmp_path):
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies/binary.py").write_text(example("own-positional-encoding.md"))
    grid = "parameters:\n  model.pos_encoding: {values: [sinusoidal, 'binary.py:Binary']}"
    run_study(tmp_path, grid, task="copy")
    shown = jab_here("study", "show", "study", cwd=tmp_path).stdout
    assert "Binary" in shown and "sinusoidal" in shown
    assert len(list((tmp_path / "study").glob("*/pos_encoding-code.py"))) == 1


READS = """
def reads(self, steps, lengths):  # the last symbol, then the first: off by one
    return jnp.where(steps == 0, lengths, 0)
"""
ALIGNMENT = """
def alignment(self, src, width):  # the last symbol, then the first: off by one
    lengths = jnp.sum(src > 2, axis=1, keepdims=True)
    columns = jnp.arange(src.shape[1])[None, :]
    source = jnp.where(columns < lengths, columns, -2)
    steps = jnp.arange(width)[None, :]
    answer = jnp.where(steps == 0, lengths, jnp.where(steps == 1, 0, -2))
    return source, answer
"""


@pytest.mark.parametrize("method", [READS, ALIGNMENT], ids=["reads", "alignment"])
def test_a_users_reads_or_alignment_that_points_outside_the_input_is_named(
    method, tmp_path, monkeypatch
):
    code = example() + method.replace("\n", "\n    ")
    name = method.split("(")[0].split()[-1]
    (tmp_path / "ends.py").write_text(code)
    refused = jab_here("train", "--task", "ends.py:Ends", *SETS, "--out", "run", cwd=tmp_path,
                       check=False)  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert f"task ends: {name} points outside the input" in refused.stderr
    assert "at answer step 0: index" in refused.stderr and refused.stderr.count("\n") == 1
    assert not (tmp_path / "run").exists()
    (tmp_path / "ends.py").write_text(
        code.replace("steps == 0, lengths,", "steps == 0, lengths - 1,")
    )
    from jabcli.experiment.resolve import resolve

    monkeypatch.chdir(tmp_path)
    assert resolve("ends.py:Ends", sets=TINY_SETS).task.name == "ends"  # right: accepted


def test_the_docs_name_every_member_a_users_scheme_or_form_may_define():
    from jabcli import Form, PositionalScheme

    for cls, page in ((PositionalScheme, "own-positional-encoding.md"),
                      (Form, "own-model-form.md")):  # fmt: skip
        text = (DOCS / page).read_text()
        members = [name for name in vars(cls) if not name.startswith("_")]
        assert [name for name in members if f"`{name}" not in text] == [], page


def test_what_a_users_file_subclasses_is_importable_from_jabcli_itself():
    from jabcli import Form, OnePassForm, PositionalScheme, Task, Tokenizer
    from jabcli.api.names import CONTRACT

    assert {Task.__name__, PositionalScheme.__name__, OnePassForm.__name__} <= set(CONTRACT)
    assert issubclass(OnePassForm, Form) and Tokenizer().tokens[:3] == ["<pad>", "<bos>", "<eos>"]


def test_the_api_trains_a_users_task_class_or_instance_kept_with_the_run(tmp_path, monkeypatch):
    import importlib

    (tmp_path / "repeat_task.py").write_text(REPEAT)
    monkeypatch.syspath_prepend(str(tmp_path))
    Repeat = importlib.import_module("repeat_task").Repeat
    run = jab.train(Repeat(times=1), steps=20, overrides=TINY_OVERRIDES, out=tmp_path / "one")
    assert run.predict("12")[0]["expected"] == "2"  # times=1, not the class's default 2
    assert (tmp_path / "one/task-code.py").read_text() == REPEAT
    run = jab.train(Repeat, steps=20, overrides=TINY_OVERRIDES, out=tmp_path / "two")
    assert run.predict("12")[0]["expected"] == "22"

    def defined_here():
        class Inner(Repeat):
            pass

        return Inner

    with pytest.raises(jab.JabError, match=r"is not defined at the top of a \.py file"):
        jab.train(defined_here(), steps=20, out=tmp_path / "never")


def test_an_edited_scheme_file_is_loaded_again_in_the_same_process(tmp_path, monkeypatch):
    from jabcli.model.positions import get_scheme

    monkeypatch.chdir(tmp_path)
    (tmp_path / "binary.py").write_text(example("own-positional-encoding.md"))
    before = get_scheme("binary.py:Binary")
    assert get_scheme("binary.py:Binary") is before  # loaded once
    (tmp_path / "binary.py").write_text(example("own-positional-encoding.md") + "\n# edited\n")
    assert type(get_scheme("binary.py:Binary")) is not type(before)
