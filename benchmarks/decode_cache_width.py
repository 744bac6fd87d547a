"""How a decoding step's time grows with the width of its answer's key/value cache, which
every step reads whole (masked past the step): would decoding a long chunk in phases, each
reading only the cache written so far, pay?

    JAX_ENABLE_COMPILATION_CACHE=false python benchmarks/decode_cache_width.py WIDTH ROWS ROUNDS

ROWS sources of WIDTH random symbols (the reverse preset's model with coupled positions,
as initialised: only the time is read), decoded to half their width (forced to that
length, so that both decode the same number of steps) with an answer cache just that wide,
then twice as wide; the median of ROUNDS - 1 timed calls each, after one that compiles.
"""

import sys
import time

import jax
import numpy as np

from jabcli.core.tokenizer import EOS_ID
from jabcli.evaluation import decode
from jabcli.experiment.resolve import resolve
from jabcli.training.training import init


def main() -> None:
    width, rows, rounds = (int(arg) for arg in sys.argv[1:4])
    experiment = resolve(
        "reverse",
        sets=["task.max_len=40", "model.pos_encoding=coupled", "model.max_positions=2048"],
    )
    params = init(experiment, 0).params
    src = np.random.default_rng(0).integers(EOS_ID + 1, EOS_ID + 11, (rows, width), np.int32)
    src[:, -1] = EOS_ID
    keys = decode.row_keys(jax.random.PRNGKey(0), np.arange(rows))
    steps = width // 2
    lengths = np.full(rows, steps, np.int32)  # every row decodes exactly `steps` tokens
    times: dict[int, list[float]] = {steps + 1: [], 2 * steps + 2: []}
    for timed in range(rounds):
        for cache in times:
            start = time.perf_counter()
            decoded, _ = decode.answered(experiment, params, keys, src, cache, lengths)
            np.asarray(decoded)
            if timed:  # the first call compiles
                times[cache].append(time.perf_counter() - start)
    for cache, seconds in times.items():
        per_token = np.median(seconds) / steps / rows * 1e6
        print(
            f"source {width}, {rows} rows, {steps} steps, answer cache {cache}: "
            f"median {np.median(seconds) * 1e3:.1f} ms, {per_token:.1f} us/token"
        )


if __name__ == "__main__":
    main()
