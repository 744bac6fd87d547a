"""One character-level vocabulary shared by every task, the encoder and the decoder.

The special tokens come first, so their ids (0, 1, 2) can never collide with data
(tensor2tensor once shipped exactly that bug). Data characters follow in code-point
order, so sorting ids sorts the characters. A run with `task.index_hints` has the
index hints after them: HINTS tokens [0], [1], ... that jab writes before each symbol
(see tasks.Hinted), never typed by a user.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from jabcli.core.errors import JabError

if TYPE_CHECKING:
    import numpy as np

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS = (PAD, BOS, EOS)
DATA_CHARS = "".join(sorted("0123456789abcdefghijklmnopqrstuvwxyz+-*/=<>()#|_.,:;"))
HINTS = 128  # index hints: inputs of up to this many symbols can carry them
HINT_TOKENS = tuple(f"[{k}]" for k in range(HINTS))
HINT_NAMES = frozenset(HINT_TOKENS)


class Tokenizer:
    """Maps text to ids and back; the token list is saved with every run."""

    def __init__(self, tokens: Sequence[str] = (*SPECIALS, *DATA_CHARS)) -> None:
        if tuple(tokens[:3]) != SPECIALS:
            raise JabError(f"a vocabulary must start with {', '.join(SPECIALS)}")
        self.tokens = list(tokens)
        self._ids = {token: i for i, token in enumerate(self.tokens)}
        # The id of hint [0]; hint [k] is hint_start + k. None: no hints in this vocabulary.
        self.hint_start = self._ids.get(HINT_TOKENS[0])

    @classmethod
    def with_hints(cls) -> Tokenizer:
        """The shared vocabulary followed by the index hints."""
        return cls((*SPECIALS, *DATA_CHARS, *HINT_TOKENS))

    @classmethod
    def for_symbols(cls, symbols: str, hints: bool = False) -> Tokenizer:
        """The shared vocabulary, then the characters of `symbols` it lacks (a task of the
        user's own may use any), in code-point order, then the index hints if asked for."""
        extra = sorted(set(symbols) - set(DATA_CHARS))
        return cls((*SPECIALS, *DATA_CHARS, *extra, *(HINT_TOKENS if hints else ())))

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.tokens == other.tokens

    # Equal by its token list, which is a list: not a dict key. (None is how Python says
    # unhashable; typeshed's object has a __hash__ method, so its stubs write it so too.)
    __hash__ = None  # type: ignore[assignment]

    def ids(self, chars: Iterable[str]) -> list[int]:
        return [self._ids[c] for c in chars]

    def encode(self, text: str, alphabet: str | None = None) -> list[int]:
        """Text to ids; spaces are ignored. Characters outside `alphabet` are an error."""
        text = clean(text)
        allowed = alphabet if alphabet is not None else "".join(self.tokens[3:])
        unknown = sorted({c for c in text if c not in allowed or c not in self._ids})
        if unknown:
            raise JabError(
                f"input {text!r} has characters outside the alphabet {allowed!r}: "
                f"{''.join(unknown)!r}"
            )
        return [self._ids[c] for c in text]

    def is_hint(self, ids: int | np.ndarray) -> bool | np.ndarray:
        """Whether each id (an int or an array) is an index hint."""
        start = len(self.tokens) if self.hint_start is None else self.hint_start
        return (ids >= start) & (ids < start + HINTS)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids to text, stopping at the first <eos> and skipping <pad>, <bos> and index
        hints (the model's working, not its answer)."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID) or self.is_hint(i):
                continue
            out.append(self.tokens[i])
        return "".join(out)


def is_hint_token(token: str) -> bool:
    """Whether a token, as text, is an index hint ([0], [1], ...)."""
    return token in HINT_NAMES


def clean(text: str) -> str:
    """User text as the model sees it: whitespace removed."""
    return "".join(text.split())
