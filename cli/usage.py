"""What the commands share: the error for a command line that cannot be served, and reading the
file a command names."""

from __future__ import annotations

import sys
from pathlib import Path

from specd.decoding.errors import UserError


class UsageError(UserError):
    """A command line that cannot be served as given."""


def read_document(file: str) -> tuple[str, str]:
    """(uri, text) of the file, or of standard input for "-"."""
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {file}: {error}") from None
    return ("stdin" if file == "-" else Path(file).resolve().as_uri()), text
