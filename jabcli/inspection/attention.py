"""What `jab show-attention` computes on a saved run: one input decoded, and one kind of
attention while it is answered (cross, encoder or decoder), or a recurrent form's memory
(the stack's or the tape's cells), as weights with the tokens that label them."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from jabcli.core.errors import JabError
from jabcli.core.tokenizer import EOS_ID, clean
from jabcli.evaluation import layout
from jabcli.inspection.inspection import Loaded, decode_batch, encode_inputs, random_input

# What `jab show-attention` draws: attention, or a recurrent form's memory, whose columns
# are the memory's cells (described here, for the picture's key).
MEMORY_KINDS = {
    "stack": "the stack's cells, 0 its top",
    "tape": "the tape's cells, 0 under its head",
}
ATTENTION_KINDS = ("cross", "encoder", "decoder", *MEMORY_KINDS)
SLOT_LABEL = "□"  # an empty answer slot of the encoder form (encoder_only.py)


@dataclass
class AttentionMap:
    """One kind of attention while answering an input: weights [layers, heads, rows,
    cols], with the tokens labelling rows (queries) and columns (keys)."""

    kind: str
    input: str
    answer: str
    expected: str | None
    weights: np.ndarray
    rows: list[str]
    cols: list[str]
    # For a recurrent form's memory (kind "stack" or "tape"): what its columns are.
    memory: str | None = None


def attention(loaded: Loaded, text: str | None, kind: str | None = None) -> AttentionMap:
    """Decode `text` (default: a random held-out input) and return the `kind` attention
    ("cross", "encoder" or "decoder"; default: the form's first, cross for the
    encoder-decoder) of the pass that produced the answer. A decoder-only model's
    "decoder" attention is over the input, then the answer. A Stack-RNN's or Tape-RNN's
    "stack" or "tape" is its memory instead (`one_pass_picture`)."""
    from jabcli.evaluation.decode import attention_weights

    experiment = loaded.experiment
    form = experiment.form
    if not form.attention:
        arch = experiment.config.model.arch  # a form of the user's own: as they named it
        raise JabError(f"a model.arch={arch} run has no attention or memory that jab can draw")
    kind = kind or form.attention[0]
    if kind not in ATTENTION_KINDS:
        raise JabError(f"attention kind must be one of {', '.join(ATTENTION_KINDS)}, got {kind!r}")
    if kind not in form.attention:
        missing = kind if kind in MEMORY_KINDS else f"{kind} attention"
        raise JabError(
            f"a model.arch={form.name} run has no {missing}: it has "
            f"{', '.join(form.attention)} (--kind {form.attention[0]})"
        )
    text = clean(text) if text is not None else random_input(loaded)
    src = encode_inputs(loaded, [text])
    outputs, (src_positions, tgt_positions) = decode_batch(loaded, src)
    out = outputs[0]
    produced = layout.produced(out)
    if experiment.one_pass:
        return one_pass_picture(
            loaded, kind, text, src, out, produced, src_positions, tgt_positions
        )
    tgt_in = layout.decoder_input(produced)
    # The positions decoding read, so the picture shows the computation that answered.
    weights = attention_weights(
        experiment, loaded.params, src, tgt_in, src_positions, tgt_positions[:, : tgt_in.shape[1]]
    )
    tokens = experiment.tokenizer.tokens
    src_labels = [tokens[i] for i in src[0]]
    out_labels = [tokens[i] for i in produced]
    in_labels = [tokens[i] for i in tgt_in[0]]
    if form.prefixed:  # one causal sequence: the input's tokens, then the answer's
        out_labels, in_labels = src_labels + out_labels, src_labels + in_labels
    matrices, rows, cols = {
        "cross": (weights.cross, out_labels, src_labels),
        "decoder": (weights.decoder, out_labels, in_labels),
        "encoder": (weights.encoder, src_labels, src_labels),
    }[kind]
    return AttentionMap(
        kind=kind,
        input=text,
        answer=experiment.tokenizer.decode(out),
        expected=experiment.task.solve(text),
        weights=np.asarray(matrices)[:, 0],
        rows=rows,
        cols=cols,
    )


def one_pass_picture(
    loaded: Loaded,
    kind: str,
    text: str,
    src: np.ndarray,
    out: np.ndarray,
    produced: np.ndarray,
    src_positions,
    tgt_positions,
) -> AttentionMap:
    """The one pass that answered `text` (source `src` [1, S], answer `out`, `produced` up
    to its <eos>), over the input and every answer slot: rows are the tokens read, the
    slots labelled SLOT_LABEL with the token each wrote. The encoder form's self-attention
    (queries and keys), or a Stack-RNN's or Tape-RNN's memory (`kind` "stack" or "tape"),
    drawn as attention is, one layer of one head: after each token read, the size
    (Euclidean norm) of each cell's vector, the largest 1 (columns: the cells, numbered by
    their last two digits; the trailing cells no step wrote, left out)."""
    import jax.numpy as jnp

    from jabcli.evaluation.decode import attention_weights
    from jabcli.model.encoder_only import answer_slots
    from jabcli.tasks import derived

    experiment = loaded.experiment
    slots = np.zeros_like(tgt_positions)  # only their width is read, as decoding did
    seen = attention_weights(experiment, loaded.params, src, slots, src_positions, tgt_positions)
    ids = jnp.asarray(src)  # as the model read them, for the slots the task gives them
    count = src.shape[1] + int(answer_slots(experiment.task, ids, slots.shape[1])[0])
    read = src[0]
    if experiment.config.model.answer_slots == "exact":  # the paper's: no <eos>, fewer slots
        read = read[read != EOS_ID]
        count = len(read) + int(derived.exact_slots(experiment.task, ids)[0])
    tokens = experiment.tokenizer.tokens
    written = ["$" if i == EOS_ID else tokens[i] for i in produced]
    written = written[: count - len(read)]  # exact slots: the <eos> past them is no slot's
    rows = [tokens[i] for i in read] + [f"{SLOT_LABEL}→{token}" for token in written]
    rows += [SLOT_LABEL] * (count - len(rows))
    answered = functools.partial(
        AttentionMap,
        input=text,
        answer=experiment.tokenizer.decode(out),
        expected=experiment.task.solve(text),
        rows=rows,
    )
    if kind in MEMORY_KINDS:
        sizes = np.linalg.norm(np.asarray(seen.cells, np.float64)[0, :count], axis=-1)  # [N, M]
        written_cells = np.flatnonzero(sizes.max(axis=0) > 0)
        sizes = sizes[:, : written_cells[-1] + 1 if len(written_cells) else 1]
        return answered(
            kind=kind,
            weights=(sizes / max(sizes.max(), 1e-30))[None, None],
            cols=[str(cell % 100) for cell in range(sizes.shape[1])],
            memory=MEMORY_KINDS[kind],
        )
    return answered(
        kind="encoder",
        weights=np.asarray(seen.encoder)[:, 0, :, :count, :count],
        cols=rows[: src.shape[1]] + [SLOT_LABEL] * (count - src.shape[1]),
    )
