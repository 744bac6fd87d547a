"""modular_arithmetic with `task.scratchpad`: the answer shows its working, then the value."""

import jax
import numpy as np
import pytest

from jabcli.errors import JabError
from jabcli.positions import SCHEMES
from jabcli.registry import TASKS
from jabcli.tokenizer import EOS_ID, PAD_ID, Tokenizer

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


def test_drawn_scratchpad_answers_match_the_reference_solver_up_to_length_41():
    tok = Tokenizer()
    batch = SCRATCHPAD.sample(jax.random.PRNGKey(3), 400, 1, 41)
    src, tgt_out = np.asarray(batch.src), np.asarray(batch.tgt_out)
    lengths = ((src != PAD_ID) & (src != EOS_ID)).sum(1)
    assert lengths.max() == 41 and tgt_out.shape[1] == 41 + 2  # working, value, <eos>
    for s, o in zip(src, tgt_out):
        assert tok.decode(o) == SCRATCHPAD.solve(tok.decode(s))


def test_coupled_positions_put_each_working_symbol_under_its_input_symbol():
    batch = SCRATCHPAD.sample_lengths(jax.random.PRNGKey(0), np.asarray([3, 5]), 5)
    source, answer = map(np.asarray, SCRATCHPAD.alignment(batch.src, 7))
    unaligned = -2
    assert source.tolist() == [[0, 1, 2, unaligned, unaligned, unaligned],
                               [0, 1, 2, 3, 4, unaligned]]  # fmt: skip
    # working under symbols 0..n-1, the value at n, then <eos> and padding unaligned
    assert answer.tolist() == [[0, 1, 2, 3, unaligned, unaligned, unaligned],
                               [0, 1, 2, 3, 4, 5, unaligned]]  # fmt: skip


def test_coupled_positions_on_bare_modular_arithmetic_are_refused_naming_the_scratchpad():
    bare = TASKS["modular_arithmetic"]()
    coupled = SCHEMES["coupled"]
    with pytest.raises(JabError, match=r"modular_arithmetic \(with task\.scratchpad=true\)"):
        coupled.check_pair(coupled, bare)
    coupled.check_pair(coupled, SCRATCHPAD)  # with it, accepted
