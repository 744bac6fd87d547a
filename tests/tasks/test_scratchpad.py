"""`task.scratchpad` on the class tasks: the answer shows its working, then the class."""

import jax
import numpy as np
import pytest

from jabcli.core.errors import JabError
from jabcli.core.tokenizer import EOS_ID, PAD_ID, Tokenizer
from jabcli.model.positions import SCHEMES
from jabcli.tasks import derived, sampling
from jabcli.tasks.registry import TASKS

SCRATCHPAD = TASKS["modular_arithmetic"](scratchpad=True)


@pytest.mark.parametrize(
    "expression, answer",
    [
        ("3", "33"),  # the term 3, then the value
        ("1+2*3", "112112"),  # terms 1, 2, 2*3=1 under the digits; sums 1, 1 under + and *
        ("2-3-2", "222432"),  # -3 is 2, -2 is 3 (mod 5); 2+2=4 under the second -
        ("4*4*4+1", "40104410"),  # 4, 16=1, 4; nothing summed until +: 4; 4+1=0
    ],
)
def test_the_scratchpad_shows_each_term_and_sum_then_the_value(expression, answer):
    assert SCRATCHPAD.solve(expression) == answer
    assert answer[-1] == TASKS["modular_arithmetic"]().solve(expression)  # the value is last


@pytest.mark.parametrize(
    "name, text, answer",
    [
        ("parity_check", "1011", "11011"),  # the parity so far, then the class
        ("even_pairs", "0110", "01100"),  # the parity of the changes so far
        ("cycle_navigation", "2202", "12122"),  # the place reached so far: +1 +1 -1 +1
        ("missing_duplicate", "0110_110", "010001000"),  # the parity of the 1s so far
        ("missing_duplicate", "10_0#", "111111"),  # the filler counts for nothing
    ],
)
def test_the_regular_tasks_show_where_they_stand_after_each_symbol(name, text, answer):
    assert TASKS[name](scratchpad=True).solve(text) == answer
    assert answer[-1] == TASKS[name]().solve(text)


@pytest.mark.parametrize(
    "expression, answer",
    [
        ("(1-(-2))", "011003333"),  # 1 - (-2) = 3 under the last two brackets
        ("((1+2)-(-4))", "0011333001222"),  # 0 under each (, 3 - 1 = 2 at the end
        ("(2*(3+4))", "0220332444"),  # under *, its left operand; 2 * 2 = 4 at the )
        ("-(1+2)", "0011322"),  # a sign before a bracket negates it at its )
        ("3", "33"),
    ],
)
def test_the_brackets_scratchpad_shows_the_innermost_brackets_value_so_far(expression, answer):
    task = TASKS["modular_arithmetic_brackets"](scratchpad=True, mult=True)
    assert task.solve(expression) == answer
    assert answer[-1] == TASKS["modular_arithmetic_brackets"](mult=True).solve(expression)


def test_the_brackets_scratchpad_refuses_a_product_after_a_sum_in_one_bracket_in_one_line():
    """Its working goes left to right: 1+2*3 is not (1+2)*3; 1+2+3 and 2*3+1 are."""
    task = TASKS["modular_arithmetic_brackets"](scratchpad=True, mult=True)
    refused = r"no \* after a \+ or - in one bracket, like \(1\+\(2\*3\)\); got '1\+2\*3'"
    with pytest.raises(JabError, match=refused):
        task.check_input("1+2*3")
    assert TASKS["modular_arithmetic_brackets"](mult=True).solve("1+2*3") == "2"  # without it
    assert task.solve("1+(2*3)") == "11022122"
    assert task.solve("1+2+3") == "113311" and task.solve("2*3+1") == "221122"


@pytest.mark.parametrize(
    "equation, answer",
    [
        # x - (-2) is x - 3 = x + 2 (c: 2 after a) from the second ); x + 2 = 3 at x = 1
        ("(x-(-2))=3", "0aa003ccc11"),
        ("(3-x)=4", "033nnn44"),  # 3 - x is -x + 3 (n: 3 after k); -x + 3 = 4 at x = 4
        ("-x=2", "0kk33"),  # -x under x; -x = 2 at x = 3
        ("((1+x)-(2-3))=0", "0011bbb0224ccc33"),  # x + 1 - (-1) = x + 2 = 0 at x = 3
    ],
)
def test_the_equations_scratchpad_carries_x_as_a_letter_then_solves_for_it(equation, answer):
    task = TASKS["solve_equation"](scratchpad=True)
    assert task.solve(equation) == answer
    assert answer[-1] == TASKS["solve_equation"]().solve(equation)
    assert task.solve("1+x+2=3") == "11bbdd00"  # x + 3 = 3 at x = 0


@pytest.mark.parametrize(
    "name, options",
    [(name, {}) for name in ["parity_check", "even_pairs", "cycle_navigation",
                             "modular_arithmetic", "missing_duplicate",
                             "modular_arithmetic_brackets", "solve_equation"]]
    + [("modular_arithmetic_brackets", {"mult": True, "modulus": 7}),
       ("solve_equation", {"modulus": 3})],
)  # fmt: skip
def test_drawn_scratchpad_answers_match_the_reference_solver_up_to_length_41(name, options):
    task, tok = TASKS[name](scratchpad=True, **options), Tokenizer()
    batch = sampling.sample(task, jax.random.PRNGKey(3), 400, task.min_length, 41)
    src, tgt_out = np.asarray(batch.src), np.asarray(batch.tgt_out)
    lengths = ((src != PAD_ID) & (src != EOS_ID)).sum(1)
    assert lengths.max() == 41 and tgt_out.shape[1] == 41 + 2  # working, class, <eos>
    for s, o in zip(src, tgt_out):
        assert tok.decode(o) == task.solve(tok.decode(s))


def test_coupled_positions_put_each_working_symbol_under_its_input_symbol():
    batch = sampling.sample_lengths(SCRATCHPAD, jax.random.PRNGKey(0), np.asarray([3, 5]), 5)
    source, answer = map(np.asarray, derived.alignment(SCRATCHPAD, batch.src, 7))
    unaligned = -2
    assert source.tolist() == [[0, 1, 2, unaligned, unaligned, unaligned],
                               [0, 1, 2, 3, 4, unaligned]]  # fmt: skip
    # working under symbols 0..n-1, the value at n, then <eos> and padding unaligned
    assert answer.tolist() == [[0, 1, 2, 3, unaligned, unaligned, unaligned],
                               [0, 1, 2, 3, 4, 5, unaligned]]  # fmt: skip


def test_coupled_positions_on_bare_modular_arithmetic_are_refused_naming_the_scratchpad():
    bare = TASKS["modular_arithmetic"]()
    coupled = SCHEMES["coupled"]
    with pytest.raises(JabError, match=r"with task\.scratchpad=true: parity_check, even_pairs, "):
        coupled.check_pair(coupled, bare)
    coupled.check_pair(coupled, SCRATCHPAD)  # with it, accepted
