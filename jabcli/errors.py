"""The one exception type for mistakes a user can make and fix."""


class JabError(Exception):
    """A user-facing error: the CLI prints its message as one line and exits with 2."""
