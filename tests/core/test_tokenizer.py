import pytest

from jabcli.core.errors import JabError
from jabcli.core.tokenizer import BOS_ID, DATA_CHARS, EOS_ID, PAD_ID, Tokenizer


def test_encode_then_decode_gives_back_the_text():
    tok = Tokenizer()
    for text in ["0123456789", "hello", "a+b=c", "z", DATA_CHARS]:
        assert tok.decode(tok.encode(text)) == text


def test_spaces_in_user_input_are_ignored():
    tok = Tokenizer()
    assert tok.encode(" 1 2\t3 ") == tok.encode("123")


def test_special_tokens_never_collide_with_data():
    tok = Tokenizer()
    data_ids = set(tok.encode(DATA_CHARS))
    assert {PAD_ID, BOS_ID, EOS_ID}.isdisjoint(data_ids)
    assert tok.tokens[:3] == ["<pad>", "<bos>", "<eos>"]


def test_decoding_stops_at_eos_and_skips_padding():
    tok = Tokenizer()
    ids = [BOS_ID, *tok.encode("42"), EOS_ID, *tok.encode("9"), PAD_ID]
    assert tok.decode(ids) == "42"


def test_sorting_ids_sorts_the_characters():
    tok = Tokenizer()
    text = "b3a+1z"
    assert tok.decode(sorted(tok.encode(text))) == "".join(sorted(text))


def test_characters_outside_the_alphabet_are_named_in_the_error():
    tok = Tokenizer()
    with pytest.raises(JabError, match="'x'"):
        tok.encode("12x", alphabet="0123456789")


def test_a_saved_vocabulary_decodes_like_the_original():
    tok = Tokenizer()
    assert Tokenizer(list(tok.tokens)) == tok
