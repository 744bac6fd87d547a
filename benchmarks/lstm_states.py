"""What a trained LSTM on cycle_navigation keeps of the count, step by step: whether its
state after each action holds the position (the count mod 5) in a bounded set of states,
as a finite automaton would, or in a state that drifts with length.

    python benchmarks/lstm_states.py RUN [INPUTS]      # default: 100 inputs of 500 actions

For each seed of RUN (a run or a group of seeds), INPUTS random inputs of 500 actions are
read by the run's LSTM (its weights, the step of haiku's `hk.LSTM` written out in numpy,
checked against `jab predict`'s answers first). The state after each action, the hidden
vector h and the cell vector c, is labelled with the true position after it. A linear
read-out of the position from h (least squares onto the five positions, one-hot, with a
bias) is fitted on steps 1-40, the lengths trained on. Prints, by range of steps: how
often the read-out gives the true position (chance 20%), the median size (Euclidean norm)
of c, and the median size of h.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from jabcli.core import runtime
from jabcli.core.tokenizer import BOS_ID
from jabcli.inspection import inspection
from jabcli.runs import runs

RANGES = [(1, 40), (41, 100), (101, 200), (201, 500)]
LENGTH = 500


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


class Lstm:
    """A run's LSTM (model.arch=lstm) in numpy: haiku's LSTM step, then the output layer."""

    def __init__(self, loaded: inspection.Loaded):
        params = loaded.params
        core = params["recurrent/lstm_core/~/lstm/linear"]
        out = params["recurrent/to_logits"]
        self.w, self.b = np.asarray(core["w"], np.float64), np.asarray(core["b"], np.float64)
        self.out_w, self.out_b = np.asarray(out["w"]), np.asarray(out["b"])
        self.hidden = self.b.shape[0] // 4
        self.vocab = self.w.shape[0] - self.hidden

    def states(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids [B, N] -> h and c after each token, [B, N, H] each."""
        batch = len(ids)
        h, c = np.zeros((batch, self.hidden)), np.zeros((batch, self.hidden))
        hs, cs = [], []
        for column in ids.T:
            gated = np.concatenate([np.eye(self.vocab)[column], h], axis=1) @ self.w + self.b
            i, g, f, o = np.split(gated, 4, axis=1)
            c = sigmoid(f + 1) * c + sigmoid(i) * np.tanh(g)
            h = sigmoid(o) * np.tanh(c)
            hs.append(h)
            cs.append(c)
        return np.stack(hs, 1), np.stack(cs, 1)

    def answers(self, src: np.ndarray) -> np.ndarray:
        """The token each source [B, S] (symbols and <eos>, no padding) answers in its
        first slot."""
        ids = np.concatenate([src, np.full((len(src), 1), BOS_ID)], axis=1)
        h, _ = self.states(ids)
        return np.argmax(np.maximum(h[:, -1], 0) @ self.out_w + self.out_b, axis=1)


def main(path: str, count: int) -> None:
    runtime.configure()  # the compilation cache, as every jab command has it
    seeds = runs.open_runs(Path(path))[1]
    rng = np.random.default_rng(0)
    print(f"{path}: {count} inputs of {LENGTH} actions; steps labelled by the true position\n")
    print("| seed | steps | read-out gives the true position | median size of c "
          "| median size of h |")  # fmt: skip
    print("|---|---|---:|---:|---:|")
    for seed in seeds:
        loaded = inspection.load(seed.path)
        lstm, task = Lstm(loaded), loaded.experiment.task
        # The numpy LSTM answers as jab does, on inputs of the lengths trained on.
        checks = ["".join(rng.choice(list("012"), n)) for n in (5, 17, 33, 40)]
        predicted = [row["output"] for row in inspection.predict(loaded, checks)]
        tokens = loaded.experiment.tokenizer.tokens
        src = [inspection.encode_inputs(loaded, [text]) for text in checks]
        ours = [tokens[int(lstm.answers(one)[0])] for one in src]
        assert ours == predicted, (ours, predicted)
        texts = ["".join(rng.choice(list("012"), LENGTH)) for _ in range(count)]
        ids = np.concatenate([inspection.encode_inputs(loaded, [t])[:, :LENGTH] for t in texts])
        h, c = lstm.states(ids)
        truth = np.array([[int(task.solve(t[:n])) for n in range(1, LENGTH + 1)] for t in texts])
        features = np.concatenate([h, np.ones((*h.shape[:2], 1))], axis=-1)  # [B, N, H+1]
        onehot = np.eye(5)[truth]
        readout, *_ = np.linalg.lstsq(
            features[:, :40].reshape(-1, features.shape[-1]), onehot[:, :40].reshape(-1, 5)
        )
        read = np.argmax(features @ readout, axis=-1)
        c_size, h_size = np.linalg.norm(c, axis=-1), np.linalg.norm(h, axis=-1)
        for low, high in RANGES:
            steps = slice(low - 1, high)
            right = np.mean(read[:, steps] == truth[:, steps])
            print(
                f"| {seed.path.name} | {low}-{high} | {100 * right:.1f}% | "
                f"{np.median(c_size[:, steps]):.1f} | {np.median(h_size[:, steps]):.1f} |"
            )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100)
