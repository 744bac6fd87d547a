import json
import re
from collections import Counter
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jabcli.core.errors import JabError
from jabcli.core.tokenizer import BOS_ID, EOS_ID, HINTS, PAD_ID, Tokenizer
from jabcli.experiment.resolve import resolve
from jabcli.inspection.inspection import Loaded, default_lengths
from jabcli.tasks import derived, sampling
from jabcli.tasks.contract import Task
from jabcli.tasks.hinted import Hinted, draw_hints
from jabcli.tasks.registry import TASKS

# Every built-in task, and each option that changes its answers.
VARIANTS = [(name, {}) for name in TASKS] + [
    ("shift", {"shift": 3}),
    ("shift", {"shift": 20}),
    ("addition", {"reverse_answer": True}),
    ("modular_arithmetic", {"modulus": 7}),
    ("modular_arithmetic_brackets", {"modulus": 10}),
    ("modular_arithmetic_brackets", {"mult": True}),
    ("modular_arithmetic_brackets", {"mult": True, "modulus": 7}),
    ("solve_equation", {"modulus": 3}),
    ("odds_first", {"count_from": 0}),
]


def configured(name, options):
    return TASKS[name](**options)


@pytest.mark.parametrize("name, options", VARIANTS, ids=lambda v: str(v) if v else "")
def test_sampled_targets_match_the_reference_solver(name, options):
    task, tok = configured(name, options), Tokenizer()
    symbols = np.asarray(tok.ids(task.alphabet), np.int32)
    batch = sampling.sample(task, jax.random.PRNGKey(0), 256, task.min_length, 13)
    src, tgt_in, tgt_out = map(np.asarray, batch)
    lengths = ((src != PAD_ID) & (src != EOS_ID)).sum(1)
    assert lengths.min() == task.min_length and lengths.max() == 13
    assert set(np.unique(src)) <= set(symbols) | {PAD_ID, EOS_ID}
    assert np.all(np.sum(src == EOS_ID, axis=1) == 1)
    assert tgt_out.shape[1] == task.output_length(13) + 1
    assert max(len(task.solve(tok.decode(row))) for row in src) <= task.output_length(13)
    for s, i, o in zip(src, tgt_in, tgt_out):
        text = tok.decode(s)
        task.check_input(text)
        assert tok.decode(o) == task.solve(text)
        assert i[0] == BOS_ID and tok.decode(i) == task.solve(text)


LOOPING = ["addition", "binary_addition", "binary_multiplication", "compute_sqrt",
           "stack_manipulation", "modular_arithmetic", "modular_arithmetic_brackets",
           "solve_equation", "missing_duplicate"]  # fmt: skip


@pytest.mark.parametrize("name", LOOPING)
def test_sampled_targets_match_the_reference_solver_at_the_longest_test_lengths(name):
    """Carries, stacks and brackets are loops along the row: the paper tests to 500."""
    task, tok = TASKS[name](), Tokenizer()
    # jitted, as training and evaluation draw
    sample = jax.jit(partial(sampling.sample_lengths, task), static_argnums=2)
    batch = sample(jax.random.PRNGKey(3), jnp.arange(485, 501), 500)
    for s, o in zip(np.asarray(batch.src), np.asarray(batch.tgt_out)):
        text = tok.decode(s)
        assert len(text) >= 484 and tok.decode(o) == task.solve(text)


@pytest.mark.parametrize("name", TASKS)
def test_each_tasks_description_shows_an_input_and_its_answer(name):
    example, answer = re.search(r"(\S+) -> (\S+)$", TASKS[name].description).groups()
    TASKS[name]().check_input(example)
    assert TASKS[name]().solve(example) == answer


def test_reference_answers_of_each_task():
    assert TASKS["sort"]().solve("3141") == "1134"
    assert TASKS["duplicate"]().solve("314") == "314314"
    assert TASKS["odds_first"]().solve("31415") == "34511"
    assert TASKS["shift"]().solve("31415") == "14153"
    assert configured("shift", {"shift": 7}).solve("31415") == "41531"
    assert TASKS["addition"]().solve("57+68") == "125"
    assert configured("addition", {"reverse_answer": True}).solve("57+68") == "521"
    assert TASKS["binary_multiplication"]().solve("1001*000001") == "000001001"  # 9 * 32 = 288
    assert TASKS["compute_sqrt"]().solve("0111") == "10"  # floor(sqrt(7)), in 2 bits
    assert TASKS["stack_manipulation"]().solve("01---") == ""  # popping the empty stack
    assert configured("modular_arithmetic", {"modulus": 7}).solve("1-1-1*3") == "4"
    assert TASKS["modular_arithmetic_brackets"]().solve("((1+2)-(-4))") == "2"
    assert TASKS["modular_arithmetic_brackets"]().solve("(" * 400 + "1" + ")" * 400) == "1"
    assert TASKS["solve_equation"]().solve("(3-x)=4") == "4"
    assert TASKS["missing_duplicate"]().solve("101_01#") == "1"


def test_odds_first_counted_from_zero_writes_what_the_papers_code_wrote():
    """The paper's code writes s[1::2] + s[0::2] (its docstring counts from 1, as jab's
    default does): 11100 -> 10110, and index 1, 3, then 0, 2, 4."""
    code, docstring = configured("odds_first", {"count_from": 0}), TASKS["odds_first"]()
    assert code.solve("11100") == "10110" and docstring.solve("11100") == "11010"
    assert code.solve("abcde") == "bdace" and code.solve("abcdef") == "bdface"
    assert code.solve("a") == "a" and docstring.solve("abcde") == "acebd"
    reads = code.reads(jnp.arange(5)[None, :], jnp.array([[5]]))
    assert np.asarray(reads)[0].tolist() == [1, 3, 0, 2, 4]
    with pytest.raises(JabError, match=r"task\.count_from must be 0 or 1"):
        configured("odds_first", {"count_from": 2})


def test_brackets_with_mult_evaluate_products_modulo_the_modulus():
    mult = configured("modular_arithmetic_brackets", {"mult": True})
    assert mult.solve("(2*(3+4))") == "4"  # 14 mod 5
    assert mult.solve("((-2)*3)") == "4"  # -6 mod 5
    assert mult.solve("(1-(2*3))") == "0"  # -5 mod 5
    assert mult.solve("((4*4)*(-(1+1)))") == "3"  # 16 * -2 = -32 mod 5
    seven = configured("modular_arithmetic_brackets", {"mult": True, "modulus": 7})
    assert seven.solve("(3*(-5))") == "6"  # -15 mod 7
    with pytest.raises(JabError, match=r"\+ - and brackets"):
        TASKS["modular_arithmetic_brackets"]().check_input("(2*3)")


@pytest.mark.parametrize("mult", [True, False])
def test_brackets_draw_products_as_often_as_sums_with_mult_and_never_without(mult):
    """At length 5, (d?d) holds one operator, drawn among + - * alike with task.mult (the
    paper's experiments: about a third of such inputs hold *)."""
    task, tok = configured("modular_arithmetic_brackets", {"mult": mult}), Tokenizer()
    sample = jax.jit(partial(sampling.sample_lengths, task), static_argnums=2)
    batch = sample(jax.random.PRNGKey(6), jnp.full(600, 5), 5)
    texts = [tok.decode(row) for row in np.asarray(batch.src)]
    share = sum("*" in text for text in texts) / len(texts)
    assert abs(share - 1 / 3) < 0.06 if mult else share == 0, share
    assert ("*" in task.alphabet) == mult


def test_predict_takes_products_from_a_run_with_mult_and_refuses_them_without():
    from jabcli.inspection.inspection import encode_inputs

    with_mult = resolve("modular_arithmetic_brackets", sets=["task.mult=true"])
    src = encode_inputs(Loaded(None, with_mult, None, 0), ["(2*(3+4))"])
    assert with_mult.tokenizer.decode(src[0]) == "(2*(3+4))"
    assert with_mult.task.solve("(2*(3+4))") == "4"
    without = resolve("modular_arithmetic_brackets")
    with pytest.raises(JabError, match="outside the alphabet"):
        encode_inputs(Loaded(None, without, None, 0), ["(2*(3+4))"])


@pytest.mark.parametrize(
    "file, rows, bracket_rows", [("chomsky.yaml", 6, 5), ("chomsky_paper.yaml", 1, 1)]
)
def test_the_protocol_study_builds_each_task_as_the_papers_experiments_did(
    file, rows, bracket_rows
):
    """Binary strings for reverse, duplicate and odds_first, five symbols for
    bucket_sort (randomized_positional_encodings' experiments/constants.py), * in the
    brackets and odds_first as the code ran it: in jab's study of the protocol and in the
    paper's Transformer's."""
    from pathlib import Path

    from jabcli.studies import study_file

    study = study_file.read(Path(__file__).resolve().parents[2] / "studies" / file)
    expected = {
        "reverse": {"alphabet": "01"},
        "duplicate": {"alphabet": "01"},
        "odds_first": {"alphabet": "01", "count_from": 0},
        "bucket_sort": {"alphabet": "01234"},
        "modular_arithmetic_brackets": {"mult": True, "alphabet": "01234+-()*"},
    }
    seen = Counter()
    for cell in study.cells:
        if cell.task in expected:
            task = resolve(cell.task, overrides=cell.values).config.task
            assert {key: getattr(task, key) for key in expected[cell.task]} == expected[
                cell.task
            ], cell.name
            seen[cell.task] += 1
    assert seen == {name: bracket_rows if "brackets" in name else rows for name in expected}
    assert study.evaluation.force_length  # the paper's score


@pytest.mark.parametrize(
    "name, text",
    [("modular_arithmetic", "1+"), ("modular_arithmetic_brackets", "(1+2"),
     ("modular_arithmetic", "1--2"), ("solve_equation", "x=01"),
     ("modular_arithmetic", "1+7"), ("solve_equation", "1+2=3"),
     ("missing_duplicate", "0110_111"), ("stack_manipulation", "a01"),
     ("binary_addition", "01+"), ("compute_sqrt", "102")],
)  # fmt: skip
def test_inputs_a_task_has_no_answer_for_are_refused_with_what_it_takes(name, text):
    with pytest.raises(JabError, match="like"):
        TASKS[name]().check_input(text)


def test_addition_numbers_have_no_leading_zeros():
    task, tok = TASKS["addition"](), Tokenizer()
    sample = jax.jit(partial(sampling.sample, task), static_argnums=(1, 2, 3))
    src = np.asarray(sample(jax.random.PRNGKey(2), 512, 3, 9).src)
    for row in src:
        for number in tok.decode(row).split("+"):
            assert number == "0" or not number.startswith("0")


def test_addition_rejects_inputs_that_are_not_sums():
    with pytest.raises(JabError, match="57\\+68"):
        TASKS["addition"]().check_input("5768")


ALIGNED = [
    ("copy", {}),
    ("reverse", {}),
    ("duplicate", {}),
    ("shift", {"shift": 3}),
    ("odds_first", {}),
    ("odds_first", {"count_from": 0}),
]


@pytest.mark.parametrize("name, options", ALIGNED, ids=lambda v: str(v) if v else "")
def test_each_answer_symbol_is_the_input_symbol_its_alignment_names(name, options):
    task, tok = configured(name, options), Tokenizer()
    batch = sampling.sample(task, jax.random.PRNGKey(1), 256, 1, 12)
    src, tgt_out = np.asarray(batch.src), np.asarray(batch.tgt_out)
    source, answer = map(np.asarray, derived.alignment(task, batch.src, tgt_out.shape[1]))
    for s, o, source_index, answer_index in zip(src, tgt_out, source, answer):
        text = tok.decode(s)
        expected = task.solve(text)
        assert tok.decode(o) == expected
        reads = {int(i): tok.decode([symbol]) for i, symbol in zip(source_index, s) if i >= 0}
        assert len(reads) == len(text)  # every input symbol has an index of its own
        aligned = "".join(reads[int(i)] for i in answer_index[: len(expected)])
        assert aligned == expected
        assert np.all(answer_index[len(expected) :] < 0)  # the <eos> step reads no symbol
        assert source_index[len(text)] < 0  # nor is the source's <eos> a symbol


@pytest.mark.parametrize("reverse_answer", [True, False])
def test_addition_aligns_digits_of_the_same_significance(reverse_answer):
    task, tok = configured("addition", {"reverse_answer": reverse_answer}), Tokenizer()
    batch = sampling.sample(task, jax.random.PRNGKey(4), 256, 3, 14)
    src, tgt_out = np.asarray(batch.src), np.asarray(batch.tgt_out)
    source, answer = map(np.asarray, derived.alignment(task, batch.src, tgt_out.shape[1]))
    for s, source_index, answer_index in zip(src, source, answer):
        text = tok.decode(s)
        a, _, b = text.partition("+")
        digits = {}  # index -> the digits aligned there, least significant first
        for i, symbol in zip(source_index, tok.decode(s[: len(text)])):
            assert (i < 0) == (symbol == "+")
            if i >= 0:
                digits.setdefault(int(i), []).append(symbol)
        for k in range(max(len(a), len(b))):
            assert digits[k] == [n[-1 - k] for n in (a, b) if k < len(n)]
        total = str(int(a) + int(b))
        for step, digit in enumerate(task.solve(text)):
            significance = step if reverse_answer else len(total) - 1 - step
            # Most significant first, the index assumes a carry out of the top digit: it
            # is the digit's significance, or one more when there was no carry.
            carry_out = len(total) > max(len(a), len(b))
            expected = significance if reverse_answer or carry_out else significance + 1
            assert answer_index[step] == expected
            assert digit == total[-1 - significance]


def test_binary_addition_aligns_bits_of_the_same_significance():
    task, tok = TASKS["binary_addition"](), Tokenizer()
    batch = sampling.sample(task, jax.random.PRNGKey(4), 256, 3, 14)
    src, tgt_out = np.asarray(batch.src), np.asarray(batch.tgt_out)
    source, answer = map(np.asarray, derived.alignment(task, batch.src, tgt_out.shape[1]))
    for s, source_index, answer_index in zip(src, source, answer):
        text = tok.decode(s)
        a, _, b = text.partition("+")
        bits = {}  # index -> the bits aligned there
        for i, symbol in zip(source_index, text):
            assert (i < 0) == (symbol == "+")
            if i >= 0:
                bits.setdefault(int(i), []).append(symbol)
        assert all(bits[k] == [n[k] for n in (a, b) if k < len(n)] for k in bits)
        total = task.solve(text)  # least significant bit first: step k writes bit k
        assert list(answer_index[: len(total)]) == list(range(len(total)))
        assert np.all(answer_index[max(len(a), len(b)) + 2 :] < 0)


def test_only_tasks_whose_answers_are_input_symbols_or_digits_declare_an_alignment():
    aligned = {name for name, cls in TASKS.items() if derived.aligned(cls())}
    assert aligned == {
        "copy", "reverse", "duplicate", "shift", "odds_first", "addition", "binary_addition"
    }  # fmt: skip


@pytest.mark.parametrize("name, options", ALIGNED, ids=lambda v: str(v) if v else "")
def test_index_hints_number_the_input_and_each_answer_symbol_follows_its_own_hint(name, options):
    tok = Tokenizer.with_hints()
    task = Hinted(task=TASKS[name](tokenizer=tok, **options))
    batch = sampling.sample(task, jax.random.PRNGKey(3), 256, 1, 12)
    src, tgt_in, tgt_out = map(np.asarray, batch)
    assert tgt_out.shape[1] == 2 * task.output_length(12) + 1
    for s, i, o in zip(src, tgt_in, tgt_out):
        text = tok.decode(s)  # the symbols alone: hints are not part of the text
        assert tok.decode(o) == task.solve(text) and tok.decode(i) == task.solve(text)
        n = len(text)
        hints = s[0 : 2 * n : 2] - tok.hint_start
        assert np.all(tok.is_hint(s[0 : 2 * n : 2])) and not np.any(tok.is_hint(s[1 : 2 * n : 2]))
        assert np.all(np.diff(hints) > 0) and 0 <= hints[0] and hints[-1] < HINTS
        assert s[2 * n] == EOS_ID and np.all(s[2 * n + 1 :] == PAD_ID)
        m = len(task.solve(text))
        reads = np.asarray(task.reads(jnp.arange(m)[None, :], jnp.array([[n]])))[0]
        np.testing.assert_array_equal(o[0 : 2 * m : 2], s[2 * reads])  # its symbol's hint
        np.testing.assert_array_equal(o[1 : 2 * m : 2], s[2 * reads + 1])
        assert o[2 * m] == EOS_ID


def test_short_inputs_draw_every_index_hint_far_apart_and_side_by_side():
    hints = np.asarray(draw_hints(jax.random.PRNGKey(0), jnp.full((20000,), 16), 16))
    assert set(np.unique(hints)) == set(range(HINTS))  # training reaches every hint
    gaps = np.diff(hints, axis=1)
    assert np.all(gaps > 0) and (gaps == 1).any()
    assert (hints[:, -1] - hints[:, 0] > 100).any()  # hints that only long inputs hold


def test_index_hints_only_exist_for_tasks_that_move_input_symbols():
    hintable = {name for name, cls in TASKS.items() if derived.hintable(cls())}
    assert hintable == {"copy", "reverse", "duplicate", "shift", "odds_first"}


def test_eval_and_compare_by_default_stop_at_the_longest_input_hints_can_number():
    plain = resolve("copy", sets=["task.max_len=100"])
    hinted = resolve("copy", sets=["task.max_len=100", "task.index_hints=true"])
    assert plain.longest_input() == 1023  # max_positions 1024: the input and its <eos>
    assert hinted.longest_input() == HINTS
    assert default_lengths([Loaded(None, plain, None, 0)]) == (1, 200)
    assert default_lengths([Loaded(None, plain, None, 0), Loaded(None, hinted, None, 0)]) == (
        1,
        HINTS,
    )


def test_every_task_option_is_a_task_config_key_of_the_same_type_and_default():
    """A task's options are its dataclass fields; `--set task.NAME=...` needs each as a
    TaskConfig key too (the config layer parses keys without importing the tasks and
    JAX). The two must agree, or an option would be unsettable or differently defaulted."""
    import dataclasses

    from jabcli.core.settings import TaskConfig

    keys = {f.name: f for f in dataclasses.fields(TaskConfig)}
    declared = set()
    for cls in TASKS.values():
        for option in (f for f in dataclasses.fields(cls) if f.name in cls.options()):
            assert option.name in keys, f"{cls.name}.{option.name} is no task.* key"
            key = keys[option.name]
            assert (key.type, key.default) == (option.type, option.default), option.name
            declared.add(option.name)
    shared = {"name", "min_len", "max_len", "alphabet", "index_hints", "held_out", "own"}
    assert set(keys) - shared == declared  # no task.* key that no task takes


def test_a_classification_task_trains_evaluates_and_answers_one_class_symbol(tmp_path):
    """The regular tasks of the Chomsky-hierarchy benchmark answer one symbol: the
    decoder writes the class and <eos>, at any input length."""
    from jabrun import jab_here

    from jabcli.api import api

    small = ["--set", "model.d_model=16", "--set", "model.d_ff=32", "--set",
             "model.num_layers=1", "--set", "train.eval_every=40"]  # fmt: skip
    jab_here("train", "--task", "cycle_navigation", "--steps", "40", *small, "--out", "c",
             cwd=tmp_path)  # fmt: skip
    lengths = ["--lengths", "1-40", "--samples", "5", "--json"]
    evaluated = json.loads(jab_here("eval", "--run", "c", *lengths, cwd=tmp_path).stdout)
    assert sorted(map(int, evaluated["per_length"])) == list(range(1, 41))
    rows = api.load(tmp_path / "c").predict(["2202", "0" * 30])
    assert [row["expected"] for row in rows] == ["2", "0"]  # 30 steps back: -30 % 5
    assert all(len(row["output"]) <= 1 and row["output"] in "01234" for row in rows)


def test_the_papers_score_counts_the_answer_and_its_end_only_where_the_paper_marks_it():
    """symbol_acc is the paper's per-token accuracy: a wrong class is 0 (not the half
    token_acc gives for its right <eos>); a stack's end marker counts like a symbol."""
    from jabcli.evaluation.evaluate import score

    tok = Tokenizer()

    def ids(*answers):
        rows = [[*tok.ids(a), EOS_ID] for a in answers]
        return np.asarray([r + [PAD_ID] * (4 - len(r)) for r in rows])

    src = np.asarray([[*tok.ids("0110"), EOS_ID]] * 2)
    parity = score(
        tok, src, ids("1", "0"), ids("0", "0"), end_scored=TASKS["parity_check"].end_scored
    )
    assert (parity["token_acc"], parity["symbol_acc"], parity["seq_acc"]) == (0.75, 0.5, 0.5)
    stack = TASKS["stack_manipulation"].end_scored
    short = score(tok, src, ids("10", "1"), ids("11", "10"), end_scored=stack)  # "1" ends too early
    assert short["symbol_acc"] == short["token_acc"] == 3 / 6
    assert score(tok, src, ids("", "1"), ids("", "0"), end_scored=stack)["symbol_acc"] == 2 / 3


def test_an_empty_answer_shows_as_empty_not_as_a_missing_reference():
    """An empty stack is an empty answer; "-" is a pop, and the mark of no reference."""
    from rich.console import Console

    from jabcli.cli.tables import predictions

    console = Console(width=80, record=True, color_system=None)
    rows = [{"input": "01--", "output": "", "expected": "", "correct": True},
            {"input": "01-", "output": "0", "expected": None, "correct": None}]  # fmt: skip
    console.print(predictions(rows))
    lines = console.export_text().splitlines()
    assert [line.split()[:3] for line in lines if line.strip().startswith("01")] == [
        ["01--", "(empty)", "(empty)"],
        ["01-", "0", "-"],
    ]


def test_binary_numbers_are_drawn_uniformly_among_those_that_are_not_zero():
    """As the paper draws them (randint(1, 2**n - 1)): every 3-bit number but 0 alike."""
    task, tok = TASKS["compute_sqrt"](), Tokenizer()
    sample = jax.jit(partial(sampling.sample_lengths, task), static_argnums=2)
    src = np.asarray(sample(jax.random.PRNGKey(5), jnp.full(7000, 3), 3).src)
    counts = Counter(tok.decode(row) for row in src)
    assert sorted(counts) == [f"{n:03b}" for n in range(1, 8)]
    assert all(abs(count / 7000 - 1 / 7) < 0.02 for count in counts.values()), counts


class Last(Task):
    """A task as a user adds one: a class on the contract (name, description, solve,
    targets) and an entry in the registry; its answer is shorter than its input."""

    name = "last"
    description = "The last symbol: 3141 -> 1"

    def solve(self, text):
        return text[-1]

    def targets(self, tokens, lengths):
        return jnp.take_along_axis(tokens, lengths[:, None] - 1, axis=1), jnp.ones_like(lengths)


def test_a_task_of_one_small_class_and_a_registry_entry_trains_evaluates_predicts_and_is_listed(
    monkeypatch, tmp_path
):
    from jabrun import TINY_SETS, jab_here

    from jabcli.cli import options

    monkeypatch.setitem(TASKS, Last.name, Last)  # its registry entry, for this test alone
    sets = [arg for value in TINY_SETS for arg in ("--set", value)]
    jab_here("train", "--task", "last", *sets, "--steps", "20", "--out", "runs/last", cwd=tmp_path)
    args = ["--run", "runs/last", "--lengths", "1-5", "--samples", "20"]
    evaluated = json.loads(jab_here("eval", *args, "--json", cwd=tmp_path).stdout)
    assert evaluated["step"] == 20 and set(evaluated["per_length"]) == {"1", "2", "3", "4", "5"}
    predicted = jab_here("predict", "3120", "--run", "runs/last", cwd=tmp_path).stdout
    assert re.search(r"3120\s+\S+\s+0\s+[✓✗]", predicted)  # the reference is its `solve`
    listed = json.loads(jab_here("tasks", "--json", cwd=tmp_path).stdout)
    assert [row["name"] for row in listed] == list(TASKS)  # no preset needed
    assert listed[-1]["description"] == Last.description and not listed[-1]["aligned"]
    assert options.complete_task("la") == ["last"]
