"""The one base class of every error a user can cause: a bad request, a model that cannot load,
a broken config or command line. The command line says such an error in one line (exit status
2); the daemon answers it as an error reply. No torch here: every layer imports this cheaply."""


class UserError(Exception):
    """Something the user (or their editor, config or command line) can fix; the message says what."""
