"""The model forms `model.arch` names, by name (contract.py says what a form is)."""

from __future__ import annotations

import functools

from jabcli.core.errors import JabError
from jabcli.core.settings import is_code
from jabcli.model.contract import Form
from jabcli.model.decoder_only import Decoder
from jabcli.model.encoder_only import Encoder, OnePassForm
from jabcli.model.model import EncoderDecoder
from jabcli.model.recurrent import LSTM, StackRNN, TapeRNN
from jabcli.tasks import user_code

FORMS: dict[str, Form] = {
    form.name: form
    for form in (EncoderDecoder(), Encoder(), Decoder(), LSTM(), StackRNN(), TapeRNN())
}


def get_form(name: str) -> Form:
    """The form `model.arch` names: one of FORMS, or a class in the user's own code
    (PATH.py:Class, package.module:Class) on the Form contract; one line listing the forms
    if there is none."""
    if is_code(name) or (
        name not in FORMS and name in user_code.entry_points(user_code.FORM_ENTRY_POINTS)
    ):
        return user_form(name)
    if name not in FORMS:
        raise JabError(
            f"model.arch must be one of {', '.join(FORMS)} or PATH.py:Class for your own, "
            f"got {name!r}"
        )
    return FORMS[name]


def user_form(name: str) -> Form:
    """A form of the user's own, loaded once a process for each version of its file, and
    checked against the contract."""
    return loaded_form(name, user_code.version(name))


@functools.cache
def loaded_form(name: str, version: str) -> Form:
    if is_code(name):
        found = user_code.from_code(name, "model.arch")
    else:  # an installed package's entry point
        found = user_code.from_entry_point(user_code.FORM_ENTRY_POINTS, name)
    if not (isinstance(found, type) and issubclass(found, Form)):
        raise JabError(f"model.arch={name} is not a model form: subclass jabcli.OnePassForm")
    missing = [
        member
        for member in ("name", "forward")
        if not getattr(found, member, None) or getattr(found, member) is OnePassForm.forward
    ]
    if issubclass(found, OnePassForm) and missing:
        raise JabError(f"model.arch={name} does not define {', '.join(missing)}")
    try:
        return found()
    except Exception as err:
        raise user_code.UserCodeError(f"{name}()", err, user_code.user_files(err)) from None
