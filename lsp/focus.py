"""`specd/didFocus`: specd's own editor clients say where the cursor rests before any typing.

LSP has no notification for a cursor that moves without an edit, and the first request in a
document that the daemon has not read yet waits for its whole prompt to be prefilled (seconds on a
CPU). So specd's VS Code and Neovim clients send this notification when the cursor has rested in a
document (a file opened or switched to, a jump, a click), and the server reads that document ahead
there, on the daemon's idle lane (lsp/suggest.py `read_ahead`). Any other client simply never sends
it. Its params are those of a position request: {"textDocument": {"uri"}, "position": {"line",
"character"}}, the character in the negotiated position encoding.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from lsprotocol import types

DID_FOCUS = "specd/didFocus"

Count = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]


class _Document(msgspec.Struct, frozen=True):
    uri: str


class _Position(msgspec.Struct, frozen=True):
    line: Count
    character: Count


class _Focus(msgspec.Struct, frozen=True, rename="camel"):
    text_document: _Document
    position: _Position


def read_focus(params: object) -> tuple[str, types.Position]:
    """(uri, position) from the notification's params, as pygls hands them over (namedtuples for
    JSON objects) or as plain JSON; ValueError says what does not fit."""
    try:
        focus = msgspec.convert(_plain(params), _Focus)
    except msgspec.ValidationError as error:
        raise ValueError(f"{DID_FOCUS}: {error}") from None
    return focus.text_document.uri, types.Position(focus.position.line, focus.position.character)


def _plain(value: object) -> object:
    """pygls turns a custom notification's JSON objects into namedtuples: back to dicts."""
    if hasattr(value, "_asdict"):
        return {key: _plain(item) for key, item in value._asdict().items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
