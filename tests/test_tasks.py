import jax
import numpy as np
import pytest

from jabcli.tasks import TASKS
from jabcli.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer


@pytest.mark.parametrize("name", sorted(TASKS))
def test_sampled_targets_match_the_reference_solver(name):
    task, tok = TASKS[name], Tokenizer()
    symbols = np.asarray(tok.ids("0123456789"), np.int32)
    batch = task.sample(jax.random.PRNGKey(0), 256, 1, 12, symbols)
    src, tgt_in, tgt_out = map(np.asarray, batch)
    lengths = ((src != PAD_ID) & (src != EOS_ID)).sum(1)
    assert lengths.min() >= 1 and lengths.max() <= 12
    for s, i, o in zip(src, tgt_in, tgt_out):
        text = tok.decode(s)
        assert tok.decode(o) == task.solve(text)
        assert i[0] == BOS_ID and tok.decode(i) == task.solve(text)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_draws_sources_from_its_alphabet_only(name):
    tok = Tokenizer()
    symbols = np.asarray(tok.ids("abc"), np.int32)
    src = np.asarray(TASKS[name].sample(jax.random.PRNGKey(1), 64, 3, 5, symbols).src)
    assert set(np.unique(src)) <= set(symbols) | {PAD_ID, EOS_ID}
    assert np.all(np.sum(src == EOS_ID, axis=1) == 1)


def test_sort_keeps_duplicates():
    assert TASKS["sort"].solve("3141") == "1134"
