"""The public API's names, in one place: `jabcli` hands them on lazily and
`jabcli.api.api` exports them (`__all__`). A module of its own, so that neither of the
two imports the other."""

API = (
    "train",
    "load",
    "compare",
    "curves",
    "study",
    "load_study",
    "StudyResults",
    "Run",
    "Result",
    "Comparison",
    "Predictions",
    "Curves",
    "Attention",
    "JabError",
)

# What a user's own code subclasses or reads (a task of their own: `from jabcli import
# Task`), by the module that defines it; kept stable.
CONTRACT = {
    "Task": "jabcli.tasks.contract",
    "PositionalScheme": "jabcli.model.positions",
    "OnePassForm": "jabcli.model.encoder_only",
    "Form": "jabcli.model.contract",
    "ModelFns": "jabcli.model.contract",
    "ModelConfig": "jabcli.core.settings",
    "Tokenizer": "jabcli.core.tokenizer",
}
