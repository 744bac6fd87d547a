import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jabcli.positions import SCHEMES, alibi_bias, randomized_positions, rope


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
