"""The model forms `model.arch` names, by name (contract.py says what a form is)."""

from __future__ import annotations

from jabcli.core.errors import JabError
from jabcli.model.contract import Form
from jabcli.model.decoder_only import Decoder
from jabcli.model.encoder_only import Encoder
from jabcli.model.model import EncoderDecoder
from jabcli.model.recurrent import LSTM, StackRNN, TapeRNN

FORMS: dict[str, Form] = {
    form.name: form
    for form in (EncoderDecoder(), Encoder(), Decoder(), LSTM(), StackRNN(), TapeRNN())
}


def get_form(name: str) -> Form:
    """The form `model.arch` names; one line listing the forms if there is none."""
    if name not in FORMS:
        raise JabError(f"model.arch must be one of {', '.join(FORMS)}, got {name!r}")
    return FORMS[name]
