"""Decoding (jabcli/evaluation/decode.py): cached decoding answers as full recomputation
does, in every form and positional scheme; forced lengths; rows with nothing to answer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny_models import VOCAB, decoder_form, make

from jabcli.core.errors import JabError
from jabcli.core.tokenizer import BOS_ID, EOS_ID, PAD_ID
from jabcli.evaluation.decode import FREE, free, greedy_decode, greedy_decode_full
from jabcli.experiment.resolve import resolve
from jabcli.model.positions import SCHEMES


@pytest.mark.parametrize(
    "norm, pos_encoding, num_layers, loops",
    [("pre", "sinusoidal", 2, 1), ("pre", "rope", 1, 3)] + [("post", e, 1, 1) for e in SCHEMES],
)
def test_cached_decoding_gives_the_same_answers_as_full_recomputation(
    norm, pos_encoding, num_layers, loops
):
    fns, params, _, _, scheme = make(
        norm, pos_encoding=pos_encoding, num_layers=num_layers, loops=loops
    )
    # Larger weights than at initialisation, so that answers vary from token to token.
    params = jax.tree_util.tree_map(lambda w: 3 * w, params)
    # Sources of every length from 1 to 8, then <eos> and padding, as evaluation sees them.
    lengths = jnp.arange(16) % 8 + 1
    columns = jnp.arange(9)[None, :]
    symbols = jax.random.randint(jax.random.PRNGKey(3), (16, 9), 3, VOCAB)
    src = jnp.where(columns < lengths[:, None], symbols, PAD_ID)
    src = jnp.where(columns == lengths[:, None], EOS_ID, src)
    counts = lengths + 1
    positions = (
        scheme.draw(jax.random.PRNGKey(4), counts, 9, 64),
        scheme.draw(jax.random.PRNGKey(5), counts + 3, 12, 64),
    )
    slow = greedy_decode_full(fns, params, src, 12, *positions)
    assert len(np.unique(np.asarray(slow))) > 3
    # Cached decoding gives those answers, and padding is masked in its cross-attention
    # too: it is given 4 columns more of it (one program to lower, not two).
    wider = jnp.pad(src, ((0, 0), (0, 4)), constant_values=PAD_ID)
    wider_positions = (scheme.draw(jax.random.PRNGKey(4), counts, 13, 64), positions[1])
    np.testing.assert_array_equal(greedy_decode(fns, params, wider, 12, *wider_positions), slow)

    # The same token everywhere after <bos>: only positions can make the outputs differ.
    same = jnp.full((1, 6), 7, jnp.int32)
    tgt = jnp.full((1, 6), 8, jnp.int32).at[0, 0].set(BOS_ID)
    counting = jnp.arange(6)[None]
    logits, _ = fns.forward(params, None, same, tgt, src_positions=counting, tgt_positions=counting)
    assert not np.allclose(logits[0, 2], logits[0, 4], atol=1e-4)


def test_a_batch_row_with_no_input_decodes_to_nothing_and_does_not_hold_up_the_others():
    fns, params, _, _, _scheme = make()
    src = jnp.array([[5, 6, EOS_ID], [PAD_ID, PAD_ID, PAD_ID]], jnp.int32)
    positions = (jnp.tile(jnp.arange(3), (2, 1)), jnp.tile(jnp.arange(6), (2, 1)))
    out = np.asarray(greedy_decode(fns, params, src, 6, *positions))
    assert np.all(out[1] == PAD_ID)  # the filler row is finished from the start
    alone = np.asarray(greedy_decode(fns, params, src[:1], 6, positions[0][:1], positions[1][:1]))
    np.testing.assert_array_equal(out[:1], alone)


def test_a_batch_wider_than_the_model_positions_is_a_clear_error_not_nan():
    experiment = resolve("copy", sets=["model.max_positions=20", "task.max_len=8"])
    src = jnp.full((2, 30), 5, jnp.int32)
    with pytest.raises(JabError, match=r"model.max_positions = 20"):
        experiment.positions(jax.random.PRNGKey(0), src, 10)


def test_forced_length_decoding_writes_eos_exactly_at_the_given_length():
    fns, params, _, _, _scheme = make()
    src = jnp.array([[5, 6, 7, EOS_ID], [8, 9, EOS_ID, PAD_ID], [PAD_ID] * 4], jnp.int32)
    positions = (jnp.tile(jnp.arange(4), (3, 1)), jnp.tile(jnp.arange(8), (3, 1)))
    lengths = jnp.array([6, 1, 0])
    for decode in (greedy_decode, greedy_decode_full):
        out = np.asarray(decode(fns, params, src, 8, *positions, lengths))
        assert list(np.argmax(out[:2] == EOS_ID, axis=1)) == [6, 1]
        assert np.all(out[0, :6] != EOS_ID) and np.all(out[0, 7:] == PAD_ID)
        assert np.all(out[2] == PAD_ID)  # a filler row still gets no answer
    chosen = np.asarray(greedy_decode(fns, params, src, 8, *positions))
    forced = np.asarray(greedy_decode(fns, params, src, 8, *positions, lengths))
    # FREE lengths force nothing: the program that forces answers as no lengths do.
    mixed = greedy_decode(fns, params, src, 8, *positions, jnp.array([6, FREE, FREE]))
    np.testing.assert_array_equal(mixed[1:], chosen[1:])
    np.testing.assert_array_equal(mixed[0], forced[0])
    # Until its true length a row writes what it would have written unforced, or, where
    # the free answer ended early, the best symbol that is not <eos>.
    stop = np.argmax(chosen[0] == EOS_ID) if EOS_ID in chosen[0] else 8
    np.testing.assert_array_equal(forced[0, : min(stop, 6)], chosen[0, : min(stop, 6)])


@pytest.mark.parametrize(
    "pos_encoding, sets",
    [(name, []) for name in SCHEMES]
    + [("rope", ["model.norm=pre", "model.num_layers=1", "model.loops=3"])]
    + [(name, ["model.answer_embedding=true"]) for name in ("none", "coupled")],
)
def test_the_decoder_forms_cached_decoding_gives_the_same_answers_as_full_decoding(
    pos_encoding, sets
):
    experiment, params, batch = decoder_form("reverse", f"model.pos_encoding={pos_encoding}", *sets)
    model, width = experiment.model, batch.tgt_in.shape[1]
    positions = experiment.positions(jax.random.PRNGKey(0), batch.src, width)
    lengths = jnp.sum(batch.tgt_out != PAD_ID, axis=1) - 1  # the answers' true lengths
    # Free lengths, as `jab eval` decodes: the program that forced decoding runs.
    slow = greedy_decode_full(model, params, batch.src, width, *positions, free(batch.src))
    forced = greedy_decode_full(model, params, batch.src, width, *positions, lengths)
    assert len(np.unique(np.asarray(slow))) > 3
    # Cached decoding gives the same answers, free and forced; and padding in the middle
    # of the sequence is masked in the cache too: it is given 3 columns more after the
    # input (one program to lower, not two), where the positions drawn do not depend on
    # the width (randomized and coupled_sinusoidal draw afresh).
    src, cached = batch.src, positions
    if pos_encoding not in ("randomized", "coupled_sinusoidal"):
        src = jnp.pad(batch.src, ((0, 0), (0, 3)))
        cached = experiment.positions(jax.random.PRNGKey(0), src, width)
    for given, answers in ((free(src), slow), (lengths, forced)):
        fast = greedy_decode(model, params, src, width, *cached, given)
        np.testing.assert_array_equal(fast, answers)


# One scheme of each way positions can depend on a batch: fixed per index, drawn at
# random per input, scaled by each input's own length, coupled to the answer, and
# hints that double every input.
CHUNKED = ["sinusoidal", "randomized", "distance", "coupled_sinusoidal", "hinted"]


@pytest.mark.parametrize("scheme", CHUNKED)
def test_decoding_in_chunks_of_similar_length_gives_the_answers_of_one_batch(scheme):
    """`jab eval` decodes its inputs sorted into chunks of similar length, each as wide
    as its longest; every answer (and every forced-length answer) is the one a single
    batch of all of them gives, whatever the positional scheme: fixed, drawn at random
    per input, relative, coupled, or with index hints."""
    from jabcli.evaluation.decode import answer, decode_rows, free, plan, row_keys
    from jabcli.evaluation.evaluate import draw_held_out
    from jabcli.experiment.resolve import resolve

    sets = ["model.d_model=16", "model.d_ff=32", "model.num_layers=1", "task.max_len=10"]
    sets.append("task.index_hints=true" if scheme == "hinted" else f"model.pos_encoding={scheme}")
    experiment = resolve("reverse", sets=sets)
    held_out = draw_held_out(experiment, jax.random.PRNGKey(1), 2, 1, 10, each_length=True)
    src, max_out = np.asarray(held_out.src), held_out.tgt_out.shape[1]
    params = experiment.model.init(jax.random.PRNGKey(2), held_out.src, held_out.tgt_in)
    params = jax.tree_util.tree_map(lambda w: 3 * w, params)  # answers that vary
    key, rows = jax.random.PRNGKey(3), np.arange(len(src))
    budget = 16 * 2**10  # a few rows a chunk: many chunks, of several widths
    chunks = plan(experiment, src, max_out, budget)
    assert len({width for _, width, _, _ in chunks}) >= 2 and len(chunks) >= 4
    # Free lengths: the program decode_rows runs, unforced as forced.
    whole, _ = answer(experiment, params, row_keys(key, rows), src, max_out, free(src))
    chunked = decode_rows(experiment, params, key, src, max_out, budget=budget)
    np.testing.assert_array_equal(chunked, whole)
    assert len(np.unique(chunked)) > 4
    if scheme != "coupled_sinusoidal":
        return  # forced lengths: with the scheme they are most used with
    lengths = np.asarray(np.sum(held_out.tgt_out != 0, axis=1) - 1)  # forced to the truth
    whole, _ = answer(experiment, params, row_keys(key, rows), src, max_out, lengths)
    chunked = decode_rows(experiment, params, key, src, max_out, lengths, budget=budget)
    np.testing.assert_array_equal(chunked, whole)
