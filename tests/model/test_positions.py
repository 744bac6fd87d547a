"""."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jabcli.model.positions import SCHEMES, alibi_bias, distance_bias, randomized_positions, rope


def test_rope_scores_depend_only_on_the_offset_between_positions():
    queries = jax.random.normal(jax.random.PRNGKey(0), (1, 1, 2, 16))
    keys = jax.random.normal(jax.random.PRNGKey(1), (1, 1, 2, 16))

    def score(query_position, key_position):
        q = rope(queries, jnp.array([[query_position]]))
        k = rope(keys, jnp.array([[key_position]]))
        return np.asarray(jnp.sum(q * k, axis=-1))

    for offset in (0, 1, 5, -3):
        reference = score(10 + offset, 10)
        for shift in (-10, 7, 50, 300):
            np.testing.assert_allclose(score(10 + offset + shift, 10 + shift), reference, atol=1e-4)
    assert not np.allclose(score(11, 10), score(15, 10), atol=1e-3)


def test_rope_keeps_vector_lengths():
    x = jax.random.normal(jax.random.PRNGKey(2), (2, 5, 4, 8))
    rotated = rope(x, jnp.broadcast_to(jnp.arange(5) * 13, (2, 5)))
    np.testing.assert_allclose(
        jnp.linalg.norm(rotated, axis=-1), jnp.linalg.norm(x, axis=-1), rtol=1e-5
    )


def test_alibi_biases_fall_with_distance_and_are_steepest_in_the_first_head():
    positions = jnp.arange(12)[None]
    bias = np.asarray(alibi_bias(positions, positions, num_heads=4, causal=True))[0]  # [H, Tq, Tk]
    assert np.all(np.diagonal(bias, axis1=1, axis2=2) == 0)
    query = 6
    for head in range(4):
        row = bias[head, query]
        assert np.all(np.diff(row[: query + 1]) > 0)  # nearer keys from the left: less penalty
        assert np.all(np.diff(row[query:]) < 0)  # farther keys to the right: more penalty
    assert np.all(bias[0, query, :] <= bias[3, query, :])


@pytest.mark.parametrize("count", [1, 17, 64, 256])
def test_randomized_positions_are_sorted_distinct_and_within_range(count):
    counts = jnp.full((64,), count)
    positions = np.asarray(randomized_positions(jax.random.PRNGKey(count), counts, count, 256))
    assert positions.shape == (64, count)
    assert positions.min() >= 0 and positions.max() < 256
    assert np.all(np.diff(positions, axis=1) > 0)
    if count < 256:  # rows draw differently, and reach beyond the first `count` positions
        assert len({tuple(row) for row in positions}) > 1
        assert positions.max() >= count


def test_a_sequence_draws_the_same_positions_in_any_batch_width():
    key = jax.random.PRNGKey(7)
    narrow = np.asarray(randomized_positions(key, jnp.array([5, 9]), 9, 128))
    wide = np.asarray(randomized_positions(key, jnp.array([5, 9, 40]), 40, 128))
    np.testing.assert_array_equal(wide[:2, :9], narrow)
    assert np.all(np.diff(narrow[0, :5]) > 0) and np.all(narrow[0, 5:] == 127)


def test_only_randomized_encoding_draws_positions():
    key, counts = jax.random.PRNGKey(0), jnp.array([5, 5])
    for name in ("sinusoidal", "learned", "rope", "alibi"):
        np.testing.assert_array_equal(SCHEMES[name].draw(key, counts, 5, 64), [[0, 1, 2, 3, 4]] * 2)
    drawn = SCHEMES["randomized"].draw(key, counts, 5, 64)
    assert not np.array_equal(drawn, [[0, 1, 2, 3, 4]] * 2)


def test_alibi_lets_the_encoder_tell_a_key_on_the_left_from_one_on_the_right():
    positions = jnp.arange(9)[None]
    bias = np.asarray(alibi_bias(positions, positions, num_heads=2, causal=False))[0]
    query = 4
    for distance in (1, 2, 3):
        left, right = bias[:, query, query - distance], bias[:, query, query + distance]
        assert np.all(left != right)
        assert np.all(left < 0) and np.all(right < 0)
    # Farther is still penalized more, on either side.
    assert np.all(np.diff(bias[:, query, : query + 1], axis=-1) > 0)
    assert np.all(np.diff(bias[:, query, query:], axis=-1) < 0)


def coupled(task="reverse", *sets, scheme="coupled"):
    from jabcli.experiment.resolve import resolve

    experiment = resolve(task, sets=[f"model.pos_encoding={scheme}", *sets])
    batch = experiment.sample(jax.random.PRNGKey(1), 8)
    params = experiment.model.init(jax.random.PRNGKey(2), batch.src, batch.tgt_in)
    # Larger weights than at initialisation, so that logits vary from step to step.
    return experiment, batch, jax.tree_util.tree_map(lambda w: 3 * w, params)


@pytest.mark.parametrize("scheme", ["coupled", "coupled_sinusoidal"])
def test_coupled_positions_are_the_same_in_training_full_and_cached_decoding(scheme):
    experiment, batch, params = coupled(scheme=scheme)
    fns, width = experiment.model, batch.tgt_in.shape[1]
    src_positions, tgt_positions = experiment.positions(jax.random.PRNGKey(0), batch.src, width)
    # Another key (training draws one per step): the same positions with `coupled`, the
    # same alignment at another random start with `coupled_sinusoidal`.
    again = experiment.positions(jax.random.PRNGKey(3), batch.src, width)
    same = scheme == "coupled"
    assert np.array_equal(again[0], src_positions) == same
    for mine, other in zip((src_positions, tgt_positions), again):
        data = np.asarray(mine) > 0
        np.testing.assert_array_equal(np.asarray(other) > 0, data)
        np.testing.assert_array_equal(
            np.where(data, other - other[:, :1], 0), np.where(data, mine - mine[:, :1], 0)
        )
    # The answer step at index t of a reverse reads input symbol n - 1 - t, by position.
    lengths = np.sum(np.asarray(batch.src) > 2, axis=1)
    for row, n in enumerate(lengths):
        src_row, tgt_row = np.asarray(src_positions[row]), np.asarray(tgt_positions[row])
        np.testing.assert_array_equal(tgt_row[:n], src_row[:n][::-1])
        assert src_row[n] == tgt_row[n] == 0
        assert src_row[:n].min() > (100 if same else 16)  # far from <eos>'s 0
    # Teacher-forced logits (training, full decoding) equal cached step-by-step logits.
    logits, _ = jax.jit(fns.forward)(
        params,
        None,
        batch.src,
        batch.tgt_in,
        src_positions=src_positions,
        tgt_positions=tgt_positions,
    )
    memory = fns.encode(params, None, batch.src, src_positions)
    cache = fns.init_cache(params, None, memory, src_positions, width)
    decode_step = jax.jit(fns.decode_step)  # one compilation, not op-by-op per step
    for index in range(width):
        step_logits, cache = decode_step(
            params,
            None,
            batch.tgt_in[:, index],
            index,
            cache,
            batch.src,
            tgt_positions,
            src_positions,
        )
        real = np.asarray(batch.tgt_out[:, index] != 0)
        np.testing.assert_allclose(step_logits[real], logits[real, index], rtol=1e-3, atol=1e-3)


def test_coupled_cross_attention_favours_the_aligned_input_symbol_at_any_length():
    experiment, batch, _params = coupled()
    key = jax.random.PRNGKey(0)
    src_positions, tgt_positions = experiment.positions(key, batch.src, batch.tgt_in.shape[1])
    bias = np.asarray(distance_bias(tgt_positions, src_positions, jnp.zeros((4, 9))))
    aligned = np.asarray(tgt_positions)[:, :, None] == np.asarray(src_positions)[:, None, :]
    assert np.all(bias[:, 0][aligned] == 0) and np.all(bias[:, 0][~aligned] <= -1)
    # A learned bias for an offset means the same far from the origin: head 1 favours
    # the key one position before the query, at 3 and at 300.
    learned = jnp.zeros((2, 9)).at[1, 4 + 1].set(5.0)
    for query in (3, 300):
        keys = jnp.arange(query - 6, query + 6)[None]
        row = np.asarray(distance_bias(jnp.array([[query]]), keys, learned))[0, :, 0]
        assert keys[0, np.argmax(row[1])] == query - 1 and keys[0, np.argmax(row[0])] == query


def test_no_source_positions_make_the_encoder_blind_to_order():
    """Permuting the input symbols permutes the encoder's outputs and changes no answer
    logit with src_pos_encoding=none; with sinusoidal it does change them."""
    from jabcli.experiment.resolve import resolve

    outputs = {}
    for encoding in ("none", "sinusoidal"):
        experiment = resolve("sort", sets=[f"model.src_pos_encoding={encoding}"])
        batch = experiment.sample(jax.random.PRNGKey(5), 4, 9, 9)
        params = experiment.model.init(jax.random.PRNGKey(6), batch.src, batch.tgt_in)
        order = np.r_[np.random.default_rng(0).permutation(9), 9]  # <eos> stays last
        memory = experiment.model.encode(params, None, batch.src)
        shuffled = experiment.model.encode(params, None, batch.src[:, order])
        logits, _ = experiment.model.forward(params, None, batch.src, batch.tgt_in)
        logits_shuffled, _ = experiment.model.forward(
            params, None, batch.src[:, order], batch.tgt_in
        )
        outputs[encoding] = (memory[:, order], shuffled, logits, logits_shuffled)
    memory, shuffled, logits, logits_shuffled = outputs["none"]
    np.testing.assert_allclose(memory, shuffled, atol=1e-5)
    np.testing.assert_allclose(logits, logits_shuffled, atol=1e-4)
    memory, shuffled, logits, logits_shuffled = outputs["sinusoidal"]
    assert not np.allclose(memory, shuffled, atol=1e-3)
    assert not np.allclose(logits, logits_shuffled, atol=1e-3)
