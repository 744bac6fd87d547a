"""."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tiny_models import DECODER_FORM, ENCODER_FORM, decoder_form, encoder_form, make

from jabcli.core.errors import JabError
from jabcli.core.tokenizer import EOS_ID, PAD_ID
from jabcli.evaluation.decode import free, greedy_decode
from jabcli.experiment.resolve import resolve
from jabcli.model.model import answer_columns
from jabcli.model.positions import SCHEMES, sinusoidal_encoding
from jabcli.model.registry import FORMS
from jabcli.tasks import derived


def test_positional_encoding_follows_the_paper_formula():
    d_model, pe = 16, sinusoidal_encoding(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_changing_a_later_target_token_leaves_earlier_predictions_unchanged(norm):
    fns, params, src, tgt, _ = make(norm)
    logits, _ = fns.forward(params, None, src, tgt)
    changed = tgt.at[0, 3].set(12)
    logits_changed, _ = fns.forward(params, None, src, changed)
    np.testing.assert_allclose(logits[0, :3], logits_changed[0, :3], atol=1e-5)
    assert not np.allclose(logits[0, 3:], logits_changed[0, 3:], atol=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_extra_padding_leaves_outputs_unchanged(norm):
    fns, params, src, tgt, _ = make(norm, "gelu")
    logits, _ = fns.forward(params, None, src, tgt)
    more_src = jnp.pad(src, ((0, 0), (0, 4)), constant_values=PAD_ID)
    more_tgt = jnp.pad(tgt, ((0, 0), (0, 3)), constant_values=PAD_ID)
    padded_logits, attention = fns.forward(params, None, more_src, more_tgt)
    np.testing.assert_allclose(logits, padded_logits[:, : tgt.shape[1]], atol=1e-5)
    assert float(jnp.max(attention.cross[..., src.shape[1] :])) == 0.0


def test_attention_weights_are_returned_for_every_layer_and_sum_to_one():
    fns, params, src, tgt, _ = make(num_layers=2)
    _, attention = fns.forward(params, None, src, tgt)
    assert attention.encoder.shape == (2, 2, 4, 5, 5)
    assert attention.decoder.shape == (2, 2, 4, 5, 5)
    assert attention.cross.shape == (2, 2, 4, 5, 5)
    np.testing.assert_allclose(jnp.sum(attention.cross, -1), 1.0, atol=1e-5)


def test_dropout_is_active_only_in_training():
    fns, params, src, tgt, _ = make()
    a, _ = fns.forward(params, jax.random.PRNGKey(1), src, tgt, is_training=True)
    b, _ = fns.forward(params, jax.random.PRNGKey(2), src, tgt, is_training=True)
    c, _ = fns.forward(params, None, src, tgt)
    d, _ = fns.forward(params, None, src, tgt)
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(c, d)


# A copy model of one layer run twice over, shaped as the flop count needs (XLA counts a
# d_model of 64, not tinier ones): its training program is compiled once for both tests.
SMALL_BATCH = ["task.max_len=6", "train.batch_size=8"]


LOOPED = [*SMALL_BATCH, "model.num_layers=1", "model.loops=2"]


def test_looped_layers_share_their_weights_and_compute_deeper():
    """model.loops runs each side's layers again with the same weights: the parameters
    are those of one pass, the answer that of a deeper model; training steps run."""
    one, params, src, tgt, _ = make()
    looped, looped_params, _, _, _ = make(loops=3)
    same = jax.tree_util.tree_map(np.shape, params) == jax.tree_util.tree_map(
        np.shape, looped_params
    )
    assert same
    logits, attention = one.forward(params, None, src, tgt)
    deeper, looped_attention = looped.forward(params, None, src, tgt)
    assert not np.allclose(logits, deeper, atol=1e-3)
    assert looped_attention.cross.shape[0] == 3 * attention.cross.shape[0]  # one per pass
    from jabcli.training.training import Trainer

    trainer = Trainer(resolve("copy", sets=LOOPED))
    state, metrics = trainer.chunk(trainer.state, jnp.asarray(3, jnp.int32))
    assert np.isfinite(np.asarray(metrics["loss"])).all() and int(state.step) == 3


@pytest.mark.parametrize(
    "steps, warmup, learning_rate, final",
    [(300, 50, 0.0015, 0.1), (150, 0, 0.003, 0.1), (2000, 200, 5e-4, 0.1),
     (40, 100, 1e-3, 0.1), (7, 3, 0.01, 0.1), (500, 0, 1e-3, 1.0), (300, 20, 3e-3, 0.0)],
)  # fmt: skip
def test_the_learning_rate_a_run_applies_is_optaxs_warmup_cosine_schedule(
    steps, warmup, learning_rate, final
):
    """The schedule's numbers are the training program's input, so that more steps or
    another learning rate compile nothing; the rates it computes from them are optax's,
    compiled with them as constants (what runs applied before), to the last bit or the
    one before (XLA rewrites arithmetic on constants)."""
    import dataclasses

    from jabcli.core.settings import TrainConfig
    from jabcli.training import training

    tr = dataclasses.replace(
        TrainConfig(),
        steps=steps,
        warmup_steps=warmup,
        learning_rate=learning_rate,
        final_lr_fraction=final,
    )
    counts = jnp.arange(steps + 2, dtype=jnp.int32)
    optax_schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=learning_rate,
        warmup_steps=min(warmup, steps),
        decay_steps=max(steps, warmup + 1),
        end_value=learning_rate * final,
    )
    expected = jax.jit(jax.vmap(optax_schedule))(counts)

    def rates(schedule, counts):
        return jax.vmap(lambda count: training.learning_rate(schedule, warmup > 0, count))(counts)

    rates = jax.jit(rates)(training.Schedule.of(tr), counts)
    np.testing.assert_allclose(rates, expected, rtol=2.5e-7, atol=0)
    if final == 1.0 and not warmup:  # the paper's recurrent models' constant rate
        np.testing.assert_array_equal(rates, np.float32(learning_rate))


def test_more_loops_compile_no_bigger_a_program():
    """model.loops=100 compiles about as fast as loops=2: the passes are a loop over the
    shared weights, not copies of the layers, so the programs do not grow with them."""
    sizes = []
    for loops in (2, 12):
        fns, params, src, tgt, _ = make(loops=loops)
        positions = (jnp.tile(jnp.arange(5), (2, 1)), jnp.tile(jnp.arange(8), (2, 1)))
        key = jax.random.PRNGKey(1)
        forward = fns.forward.lower(params, key, src, tgt, is_training=True).as_text()
        decode = greedy_decode.lower(fns, params, src, 8, *positions).as_text()
        sizes.append((len(forward.splitlines()), len(decode.splitlines())))
    assert sizes[0] == sizes[1]


def test_a_looped_models_flop_count_counts_every_pass():
    """The training header's GFLOP per step: XLA counts a loop's body once, and jab adds
    the passes it misses, so two passes through a layer cost about what two layers do
    (a little less: the optimizer updates half of the layers' parameters); one pass
    counted alone would be about half."""
    from jabcli.training import training

    looped = training.compiled(resolve("copy", sets=LOOPED))
    deep = training.compiled(resolve("copy", sets=[*SMALL_BATCH, "model.num_layers=2"]))
    assert 0.9 * deep.flops < looped.flops < deep.flops


def keys_read(experiment, src, tgt_in) -> np.ndarray:
    """[B] the keys the encoder form's first query attends to, in each row (at the weights
    it starts with, no score so low that its weight rounds to 0)."""
    _, params, _ = encoder_form(experiment.config.task.name, scale=1)
    _, attention = experiment.model.forward(params, None, src, tgt_in)
    return np.sum(np.asarray(attention.encoder[0, :, 0, 0]) > 0, axis=1)


def test_the_encoder_form_answers_every_symbol_in_one_pass_from_empty_slots():
    from jabcli.evaluation.decode import one_pass_decode
    from jabcli.model.encoder_only import SLOT_ID

    experiment, params, batch = encoder_form()
    forward = jax.jit(experiment.model.forward)
    logits, attention = forward(params, None, batch.src, batch.tgt_in)
    assert logits.shape == (*batch.tgt_out.shape, len(experiment.tokenizer))
    # The answer so far is not read: not its symbols, not where it ends.
    scrambled = jax.random.randint(jax.random.PRNGKey(2), batch.tgt_in.shape, 3, 10)
    np.testing.assert_array_equal(forward(params, None, batch.src, scrambled)[0], logits)
    # One self-attention over the input, <eos> and one slot per answer token (reverse:
    # as many as the input has symbols, and the <eos>): nothing else is a key.
    src_width, answer_width = batch.src.shape[1], batch.tgt_in.shape[1]
    assert attention.decoder is None and attention.cross is None
    assert attention.encoder.shape[-1] == src_width + answer_width
    symbols = np.sum(np.asarray(batch.src) > EOS_ID, axis=1)
    np.testing.assert_array_equal(keys_read(experiment, batch.src, batch.tgt_in), 2 * symbols + 2)
    # More padding of either side changes no slot's answer (to rounding).
    wider = jnp.pad(batch.src, ((0, 0), (0, 3)))
    more_slots = jnp.pad(batch.tgt_in, ((0, 0), (0, 2)))
    padded, _ = forward(params, None, wider, more_slots)
    slots = np.asarray(batch.tgt_out != PAD_ID)
    np.testing.assert_allclose(padded[:, :answer_width][slots], logits[slots], atol=1e-3)
    # The answer is each slot's likeliest token, up to the first <eos>.
    positions = experiment.positions(jax.random.PRNGKey(0), batch.src, answer_width)
    unforced = (*positions, free(batch.src))  # as `jab eval` decodes, with forced's program
    out = np.asarray(one_pass_decode(experiment.model, params, batch.src, answer_width, *unforced))
    best = np.asarray(jnp.argmax(logits, -1))
    for row, chosen in zip(out, best):
        stop = np.argmax(chosen == EOS_ID) if EOS_ID in chosen else answer_width
        np.testing.assert_array_equal(row[:stop], chosen[:stop])
        assert np.all(row[stop + 1 :] == PAD_ID)
    assert len(np.unique(out)) > 3 and SLOT_ID not in out[out != PAD_ID]
    # Forced to the true length: <eos> exactly there, each symbol the best but <eos>.
    lengths = jnp.sum(batch.tgt_out != PAD_ID, axis=1) - 1
    forced = np.asarray(
        one_pass_decode(experiment.model, params, batch.src, answer_width, *positions, lengths)
    )
    assert list(np.argmax(forced == EOS_ID, axis=1)) == list(np.asarray(lengths))
    symbols_best = np.asarray(jnp.argmax(logits.at[..., EOS_ID].set(-jnp.inf), -1))
    for row, best_row, n in zip(forced, symbols_best, np.asarray(lengths)):
        np.testing.assert_array_equal(row[:n], best_row[:n])


def test_the_encoder_forms_slots_depend_on_the_input_alone_never_on_the_answers_length():
    """stack_manipulation's answers are of any length up to the task's longest: every
    input of a length gets as many slots as the longest answer to it has tokens, and the
    model writes <eos> where its answer ends."""
    from jabcli.training.training import training_rows

    experiment = resolve("stack_manipulation", sets=ENCODER_FORM)
    rows = training_rows(experiment, jax.random.PRNGKey(0), jax.random.PRNGKey(1))
    tokens = np.sum(np.asarray(rows.src) != PAD_ID, axis=1)
    width = np.asarray(derived.answer_width(experiment.task, tokens - 1))
    np.testing.assert_array_equal(keys_read(experiment, rows.src, rows.tgt_in), tokens + width)
    answers = np.sum(np.asarray(rows.tgt_out) != PAD_ID, axis=1)
    assert len(np.unique(answers - width)) > 1  # the answers' own lengths vary
    assert rows.src.shape[0] == experiment.config.train.batch_size  # one example a row


@pytest.mark.parametrize(
    "pos_encoding", [name for name in SCHEMES if name not in ("coupled", "coupled_sinusoidal")]
)
def test_every_scheme_of_source_positions_places_the_encoder_forms_slots_after_the_input(
    pos_encoding,
):
    experiment, params, batch = encoder_form("copy", f"model.pos_encoding={pos_encoding}")
    answer_width = batch.tgt_in.shape[1]
    src_positions, slot_positions = experiment.positions(
        jax.random.PRNGKey(0), batch.src, answer_width
    )
    tokens = np.sum(np.asarray(batch.src) != PAD_ID, axis=1)
    for row, n in enumerate(tokens):  # one increasing run of positions: input, then slots
        whole = np.concatenate([src_positions[row, :n], slot_positions[row, :n]])
        assert np.all(np.diff(whole) > 0) and whole.max() < 64
        if pos_encoding != "randomized":
            np.testing.assert_array_equal(whole, np.arange(2 * n))
    logits, _ = experiment.model.forward(
        params,
        None,
        batch.src,
        batch.tgt_in,
        src_positions=src_positions,
        tgt_positions=slot_positions,
    )
    assert np.isfinite(np.asarray(logits)).all()
    if pos_encoding != "none":  # the slots tell apart only by their positions
        assert not np.allclose(logits[:, 0], logits[:, 1], atol=1e-4)


def test_the_encoder_form_refuses_a_scheme_that_pairs_source_and_answer_positions():
    for scheme in ("coupled", "coupled_sinusoidal"):
        with pytest.raises(JabError, match=rf"^model.pos_encoding={scheme} pairs the answer"):
            resolve("copy", sets=["model.arch=encoder", f"model.pos_encoding={scheme}"])
    with pytest.raises(JabError, match=r"model.arch=encoder has no decoder"):
        resolve("copy", sets=["model.arch=encoder", "model.tgt_pos_encoding=rope"])
    with pytest.raises(JabError, match=r"^model.arch must be one of encoder_decoder, .*'gpt'$"):
        resolve("copy", sets=["model.arch=gpt"])
    # The input and its slots share the positions: a longest input needs both.
    experiment = resolve(
        "duplicate", sets=["model.arch=encoder", "model.max_positions=40", "task.max_len=8"]
    )
    assert experiment.longest_input() == 12  # 12 symbols, <eos>, 24 answer slots and <eos>
    with pytest.raises(JabError, match="needs 41 positions"):
        experiment.check_length(13, "length 13")


def test_the_encoder_form_trains_looped_pre_norm_with_dropout_and_several_seeds_at_once():
    from jabcli.training.training import Trainer

    more = ["model.num_layers=1", "model.loops=2", "model.norm=pre", "model.dropout=0.1",
            "train.seeds=2"]  # fmt: skip
    experiment = resolve("reverse", sets=[*ENCODER_FORM, *more, "train.log_every=5"])
    trainer = Trainer(experiment)
    state, metrics = trainer.chunk(trainer.state, jnp.asarray(5, jnp.int32))
    losses = np.asarray(metrics["loss"])
    assert losses.shape == (2,) and np.isfinite(losses).all() and losses[0] != losses[1]
    assert list(np.asarray(state.step)) == [5, 5]
    assert trainer.flops and trainer.parameters


def test_the_decoder_form_reads_the_input_then_the_answer_so_far_and_nothing_after():
    experiment, params, batch = decoder_form()
    forward = jax.jit(experiment.model.forward)
    logits, attention = forward(params, None, batch.src, batch.tgt_in)
    assert logits.shape == (*batch.tgt_out.shape, len(experiment.tokenizer))
    # One causal self-attention over the input and the answer: no encoder, no cross.
    src_width, answer_width = batch.src.shape[1], batch.tgt_in.shape[1]
    assert attention.encoder is None and attention.cross is None
    assert attention.decoder.shape == (2, 16, 4, src_width + answer_width, src_width + answer_width)
    # The first answer step reads every input token (<eos> too) and <bos>, no padding (at
    # the weights it starts with, no score so low that its weight rounds to 0).
    _, start, _ = decoder_form(scale=1)
    _, attention = forward(start, None, batch.src, batch.tgt_in)
    tokens = np.sum(np.asarray(batch.src) != PAD_ID, axis=1)
    read = np.asarray(attention.decoder[0, :, 0, src_width]) > 0
    np.testing.assert_array_equal(read.sum(axis=1), tokens + 1)
    assert not read[:, :src_width][np.asarray(batch.src) == PAD_ID].any()
    # A later answer token changes no earlier step's logits, and does change its own.
    changed = batch.tgt_in.at[:, 3].set(7)
    later, _ = forward(params, None, batch.src, changed)
    np.testing.assert_allclose(later[:, :3], logits[:, :3], atol=1e-5)
    assert not np.allclose(later[:, 3:], logits[:, 3:], atol=1e-5)
    # More padding after the input or after the answer changes no answer step.
    wider, _ = forward(
        params, None, jnp.pad(batch.src, ((0, 0), (0, 3))), jnp.pad(batch.tgt_in, ((0, 0), (0, 2)))
    )
    answer = np.asarray(batch.tgt_out != PAD_ID)
    np.testing.assert_allclose(wider[:, :answer_width][answer], logits[answer], atol=1e-3)


def test_the_decoder_forms_answer_embedding_marks_the_answers_tokens_and_no_input_token():
    experiment, params, batch = decoder_form(
        "reverse", "model.pos_encoding=none", "model.answer_embedding=true"
    )
    plain, _, _ = decoder_form("reverse", "model.pos_encoding=none")
    vector = params["decoder_only/~/transformer"]["answer_embedding"]
    assert vector.shape == (32,)
    without = {name: p for name, p in params.items() if name != "decoder_only/~/transformer"}
    forward = jax.jit(experiment.model.forward)
    logits, attention = forward(params, None, batch.src, batch.tgt_in)
    # Its vector at zero, the model is the one without the option.
    zero = {**without, "decoder_only/~/transformer": {"answer_embedding": 0 * vector}}
    unmarked, _ = plain.model.forward(without, None, batch.src, batch.tgt_in)
    # (float32 logits near 10, jitted or not: JAX 0.6's XLA rounds them up to 1e-4 apart)
    marked_at_zero = forward(zero, None, batch.src, batch.tgt_in)[0]
    np.testing.assert_allclose(marked_at_zero, unmarked, atol=3e-4)
    assert not np.allclose(logits, unmarked, atol=1e-3)
    # The input's tokens do not carry it: the first layer's attention from the last input
    # token (which sees no answer token) is the unmarked model's.
    _, plain_attention = plain.model.forward(without, None, batch.src, batch.tgt_in)
    last = batch.src.shape[1] - 1
    np.testing.assert_allclose(
        attention.decoder[0, :, :, last], plain_attention.decoder[0, :, :, last], atol=1e-5
    )
    # Every answer token carries it, in a full pass (the answer from column 5 of 9) and in
    # a cached step (one token at column 7, traced as decoding traces it).
    np.testing.assert_array_equal(answer_columns(0, 9, 5), [0, 0, 0, 0, 0, 1, 1, 1, 1])
    step = jax.jit(lambda index: answer_columns(index, 1, 5))
    np.testing.assert_array_equal(step(jnp.asarray(7)), [1])
    np.testing.assert_array_equal(answer_columns(0, 5, 5), [0] * 5)  # the prefill: none


@pytest.mark.parametrize("arch", sorted(set(FORMS) - {"decoder"}))
def test_every_other_form_refuses_the_answer_embedding_in_one_line(arch):
    with pytest.raises(JabError, match=r"^model.answer_embedding marks the answer's tokens .*"
                       rf"model.arch={arch} tells them apart without it$"):  # fmt: skip
        resolve("copy", sets=[f"model.arch={arch}", "model.answer_embedding=true"])


def test_the_decoder_forms_positions_count_on_from_the_input_or_couple_to_it():
    experiment, _, batch = decoder_form("reverse")
    width = batch.tgt_in.shape[1]
    src_positions, tgt_positions = experiment.positions(jax.random.PRNGKey(0), batch.src, width)
    tokens = np.sum(np.asarray(batch.src) != PAD_ID, axis=1)
    for row, n in enumerate(tokens):  # one count: the input's tokens, then the answer's
        whole = np.concatenate([src_positions[row, :n], tgt_positions[row, :n]])
        np.testing.assert_array_equal(whole, np.arange(2 * n))
    # Coupled: the step writing answer symbol t of a reverse is at input symbol n-1-t's.
    coupled, _, batch = decoder_form("reverse", "model.pos_encoding=coupled")
    src_positions, tgt_positions = coupled.positions(jax.random.PRNGKey(0), batch.src, width)
    for row, n in enumerate(np.sum(np.asarray(batch.src) > EOS_ID, axis=1)):
        np.testing.assert_array_equal(tgt_positions[row, :n], src_positions[row, :n][::-1])
    # Coupled positions number each side, one-count ones the whole sequence.
    assert coupled.longest_input() > experiment.longest_input()


def test_the_decoder_form_refuses_in_one_line_what_it_cannot_read():
    with pytest.raises(JabError, match=r"^model.arch=decoder reads the input and the answer as one "
                       r"sequence, with one positional scheme: .* not rope for the input and "
                       r"sinusoidal for the answer$"):  # fmt: skip
        resolve("copy", sets=["model.arch=decoder", "model.src_pos_encoding=rope"])
    with pytest.raises(JabError, match=r"^task parity_check does not say which input symbol"):
        resolve("parity_check", sets=["model.arch=decoder", "model.pos_encoding=coupled"])
    with pytest.raises(JabError, match=r"^model.d_model / model.num_heads|rope rotates pairs"):
        resolve("copy", sets=["model.arch=decoder", "model.pos_encoding=rope",
                              "model.d_model=12", "model.num_heads=4"])  # fmt: skip
    # The input and its answer share the positions: a longest input needs both.
    experiment = resolve(
        "duplicate", sets=["model.arch=decoder", "model.max_positions=40", "task.max_len=8"]
    )
    assert experiment.longest_input() == 12  # 12 symbols, <eos>, 24 answer tokens and <eos>
    with pytest.raises(JabError, match="needs 41 positions"):
        experiment.check_length(13, "length 13")


def test_the_decoder_form_learns_copy_in_a_few_hundred_steps_with_several_seeds_at_once():
    from jabcli.evaluation.evaluate import HeldOut, evaluate
    from jabcli.training.training import Trainer, seed_state

    sets = ["task.max_len=5", "task.alphabet=0123", "train.batch_size=32", "train.steps=300",
            "train.seeds=2", "train.log_every=300"]  # fmt: skip
    experiment = resolve("copy", sets=[*DECODER_FORM, *sets])
    assert experiment.packs  # two examples a row
    trainer = Trainer(experiment)
    state, metrics = trainer.chunk(trainer.state, jnp.asarray(300, jnp.int32))
    losses = np.asarray(metrics["loss"])
    assert losses.shape == (2,) and np.isfinite(losses).all() and losses[0] != losses[1]
    for seed in range(2):
        params = seed_state(state, seed).params
        scores = evaluate(experiment, params, jax.random.PRNGKey(7), HeldOut(100, 1, 5))
        assert scores["seq_acc"] > 0.9, scores["seq_acc"]
