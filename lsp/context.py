"""What a completion request sees of the editor: text around the cursor, the mode, other files.

Positions arrive in the client's encoding (UTF-16 code units unless negotiated otherwise); the
document converts them. A position outside the document is the client's mistake and is refused
with a clear error, never clamped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace

from specd.daemon.cursor import PositionError

# A line that opens a block: multi-line completion is wanted on the empty line after it.
BLOCK_OPENER = re.compile(r"""(:|\{|\(|\[|=>|->|\bdo|\bthen|\belse|\bbegin)\s*(#.*|//.*|--.*)?$""")
MAX_EXTRA_CHARS = 64_000  # per other document: enough for lookup, bounded for the socket


@dataclass(frozen=True)
class Cursor:
    prefix: str            # the document before the cursor
    suffix: str            # the document after the cursor
    line: int
    character: int         # in the client's position encoding
    line_rest: str         # the current line after the cursor (without its newline)
    single_line: bool


def cursor_at(document: TextDocument, position: types.Position, multiline: str) -> Cursor:
    """The cursor's context; `multiline` is the config's lsp.multiline (auto, always, never)."""
    lines = document.lines
    if position.line < 0 or position.character < 0:
        raise PositionError(f"position {position.line}:{position.character} is negative")
    if position.line > len(lines) or (position.line == len(lines) and position.character > 0):
        raise PositionError(f"line {position.line} is outside {document.uri} ({len(lines)} lines)")
    text = lines[position.line] if position.line < len(lines) else ""
    content = text.rstrip("\r\n")
    width = document.position_codec.client_num_units(content)
    if position.character > width:
        raise PositionError(f"character {position.character} is past the end of line {position.line} "
                            f"({width} characters)")
    offset = document.offset_at_position(position)
    source = document.source
    column = offset - sum(len(line) for line in lines[: position.line])
    rest = content[column:]
    return Cursor(source[:offset], source[offset:], position.line, position.character, rest,
                  single_line=not _wants_multiline(lines, position.line, content, multiline))


def _wants_multiline(lines: list[str], line: int, content: str, mode: str) -> bool:
    if mode != "auto":
        return mode == "always"
    if content.strip():
        return False  # text on the line: complete the line
    previous = next((lines[i].rstrip() for i in range(line - 1, -1, -1) if lines[i].strip()), "")
    return bool(BLOCK_OPENER.search(previous))


@dataclass(frozen=True)
class Surroundings:
    """What a request carries besides the cursor: the document's language and the other open
    documents (as context and as lookup text)."""
    language: str
    others: tuple[tuple[str, str], ...] = ()   # (path, text), most recently edited first


def surroundings(workspace: Workspace, uri: str, recent: list[str], limit: int) -> Surroundings:
    """The document's language and up to `limit` other open documents, in `recent`'s order."""
    others = []
    for other in recent:
        if len(others) == limit:
            break
        if other == uri or other not in workspace.text_documents:
            continue
        document = workspace.get_text_document(other)
        others.append((document.path or other, document.source[-MAX_EXTRA_CHARS:]))
    return Surroundings(workspace.get_text_document(uri).language_id or "", tuple(others))
