"""The task contract: what someone adding a task writes. A task is a small frozen dataclass
whose fields are its options; it says what the answer to a text is, in plain Python
(`solve`) and for a batch, in array code (`targets`). Everything else jab asks of a
task (how many tokens and decoder slots it takes, batches for training and evaluation,
which input symbol an answer step reads) is derived from these, once, in derived.py and
sampling.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, ClassVar

from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import PAD_ID, Tokenizer
from jabcli.tasks.batch import columns

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")  # so that `jab tasks` does not import JAX


@dataclass(frozen=True)
class Task:
    """A sequence-to-sequence task over an alphabet, with its options as fields.

    Define these:
      `name`, `description`  how `--task` and `jab tasks` name and show it; the
                             description ends in an example, `input -> answer`
      `solve(text)`          the reference answer to one input (None: it has none)
      `targets(tokens, lengths)`  the answers to a batch of sources, as array code

    Define where your task needs it:
      `output_length(length)`  the longest answer to an input of `length` symbols, when
                             answers can be longer than their inputs (default: as long)
      `reads(steps, lengths)`  which input symbol each answer step is, when answer symbols
                             are input symbols: gives index hints and coupled positions
      `alignment(src, width)`  which input symbol each answer step lines up with, when it
                             is not an input symbol it copies (digits of a sum)
      `draw(key, lengths, max_len)`  sources and answers drawn together, when sources
                             are not uniform strings over the alphabet
      `check_input(text)`    the one-line error for a text that is no valid input
      `default_alphabet`, `symbols`, `fixed_alphabet`, `min_length`, `level`,
      `end_scored`

    Given: `alphabet`, `tokenizer`, `symbol_ids` (the alphabet's token ids), `options()`,
    `label` and `generated` (both only a file task changes).
    """

    alphabet: str = ""  # what sources are drawn from; "" means `default_alphabet`
    tokenizer: Tokenizer = field(default_factory=Tokenizer, compare=False, repr=False)

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    default_alphabet: ClassVar[str] = "0123456789"
    # Symbols its answers write beyond its alphabet; with the alphabet, what the run's
    # vocabulary holds (a task of the user's own may use any characters).
    symbols: ClassVar[str] = ""
    fixed_alphabet: ClassVar[bool] = False  # True when task.alphabet may not change it
    min_length: ClassVar[int] = 1  # shortest valid source
    level: ClassVar[str] = ""  # its level in the Chomsky hierarchy (Delétang et al. 2023)
    end_scored: ClassVar[bool] = False  # whether their score counts the answer's end too
    generated: ClassVar[bool] = True  # drawn by JAX code alone, so it can be jitted

    def __post_init__(self) -> None:
        if not self.alphabet:
            object.__setattr__(self, "alphabet", self.default_alphabet)

    def solve(self, text: str) -> str | None:
        """The reference answer; None when the task has none for `text`."""
        raise NotImplementedError

    def targets(self, tokens: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Source ids [batch, max_len] (padded with <pad>) -> target ids and lengths."""
        raise NotImplementedError

    def output_length(self, length):
        """The longest answer to a source of `length` symbols (an int or an int array)."""
        return length

    def reads(self, steps: jax.Array, lengths: jax.Array) -> jax.Array:
        """The input index answer step `steps` [1, W] reads, for sources of `lengths`
        [B, 1]: [B, W]. Only tasks whose answer symbols are input symbols define it."""
        raise NotImplementedError

    def alignment(self, src: jax.Array, width: int) -> tuple[jax.Array, jax.Array]:
        """What coupled positions couple, known from the input alone so that it is known
        while decoding: src [B, S] (source + <eos>) -> (an index per source token [B, S],
        an index per answer step [B, width]). An answer step and the source tokens with
        the same index are aligned; UNALIGNED marks <eos>, separators, the step that
        writes <eos> and steps past it. A task that defines `reads` has it from there
        (`derived.alignment`)."""
        raise NotImplementedError

    def draw(
        self, key: jax.Array, lengths: jax.Array, max_len: int
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Sources of the given lengths [batch, max_len] (<pad> after each), their answers
        and the answers' lengths. By default symbols are uniform over the alphabet and
        the answers are `targets`."""
        symbol_ids = self.symbol_ids
        choice = jax.random.randint(key, (lengths.shape[0], max_len), 0, symbol_ids.shape[0])
        tokens = jnp.where(columns(choice) < lengths[:, None], symbol_ids[choice], PAD_ID)
        return (tokens, *self.targets(tokens, lengths))

    def check_input(self, text: str) -> None:
        """Raise a JabError when `text` is not a valid source for this task."""

    @classmethod
    def options(cls) -> list[str]:
        """The task's own options: `task.<name>` config keys passed to its constructor."""
        return [f.name for f in fields(cls) if f.name not in ("alphabet", "tokenizer")]

    @property
    def label(self) -> str:
        """How messages name the task: its name (a file task: file:PATH)."""
        return self.name

    @property
    def symbol_ids(self) -> jax.Array:
        """[len(alphabet)] the alphabet's token ids."""
        return jnp.asarray(self.tokenizer.ids(self.alphabet), jnp.int32)
