"""What a completion request sees of the editor: text around the cursor, the mode, other files.

Positions arrive in the client's encoding (UTF-16 code units unless negotiated otherwise); the
document converts them. A position outside the document is the client's mistake and is refused
with a clear error, never clamped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace

from specd.lsp.cursor import PositionError

# A line that opens a block: multi-line completion is wanted on the empty line after it.
BLOCK_OPENER = re.compile(r"""(:|\{|\(|\[|=>|->|\bdo|\bthen|\belse|\bbegin)\s*(#.*|//.*|--.*)?$""")
MAX_EXTRA_CHARS = 64_000  # per other document: enough for lookup, bounded for the socket
# What a request carries of the text around the cursor: many times what the engine's token
# budgets read (1024 prefix tokens, 32 to 256 suffix tokens by default), so that a keystroke in a
# 10 MB file costs what one in a small file does, and its frame stays far under the daemon's cap.
MAX_PREFIX_CHARS = 32_000
MAX_SUFFIX_CHARS = 8_000
# A cut prefix starts at a line whose number is a multiple of this (the engine's prompt window
# steps by 32 lines too), so consecutive keystrokes send the same start and reuse the cache.
CUT_LINES = 32
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# LSP ends lines at \n, \r\n and \r only; str.splitlines, which pygls uses, also at these, and
# would put every position after a form feed (old C and Python sources have them) on a wrong line.
OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
LSP_LINES = re.compile("[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


class LspTextDocument(TextDocument):
    @property
    def lines(self) -> tuple[str, ...]:
        if not OTHER_BREAKS.search(self.source):
            return tuple(self.source.splitlines(True))   # the same lines, faster
        return tuple(LSP_LINES.findall(self.source))


class LspWorkspace(Workspace):
    """pygls's workspace, with documents whose lines end where LSP says."""

    def _create_text_document(self, doc_uri, source=None, version=None, language_id=None) -> TextDocument:
        return LspTextDocument(doc_uri, source=source, version=version, language_id=language_id,
                               sync_kind=self._sync_kind, position_codec=self._position_codec)


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
    after_last = position.line == len(lines) and (position.character > 0 or not document.source.endswith(("\n", "\r")))
    if position.line > len(lines) or (after_last and lines):   # past a final line end is the end
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
    prefix, suffix = clip(source[:offset], source[offset:], position.line)
    return Cursor(prefix, suffix, position.line, position.character, rest,
                  single_line=not _wants_multiline(lines, position.line, content, multiline))


def clip(prefix: str, suffix: str, line: int) -> tuple[str, str]:
    """What a request sends of the text before and after the cursor (on `line`), as valid Unicode."""
    if len(prefix) > MAX_PREFIX_CHARS:
        prefix = prefix[_aligned_start(prefix, line):]
    if len(suffix) > MAX_SUFFIX_CHARS:
        end = suffix.rfind("\n", 0, MAX_SUFFIX_CHARS) + 1
        suffix = suffix[: end or MAX_SUFFIX_CHARS]
    return unicode(prefix), unicode(suffix)


def _aligned_start(prefix: str, line: int) -> int:
    """Where a cut prefix starts: the first line numbered a multiple of CUT_LINES within the last
    MAX_PREFIX_CHARS characters, else (lines that long) those characters themselves."""
    start = len(prefix) - MAX_PREFIX_CHARS
    at = prefix.find("\n", start) + 1
    if at == 0:
        return start
    number = line - prefix.count("\n", at)      # the line that starts at `at`
    for _ in range(-number % CUT_LINES):
        at = prefix.find("\n", at) + 1
        if at == 0:
            return start
    return at


def unicode(text: str) -> str:
    """`text` with any lone surrogate (JSON carries them, UTF-8 cannot) made U+FFFD, one for one."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return LONE_SURROGATE.sub("\ufffd", text)


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


def is_open(workspace: Workspace, uri: str) -> bool:
    """pygls keys open documents by the unquoted uri: `file:///a%20b.py` is open as `file:///a b.py`."""
    return unquote(uri) in workspace.text_documents


def surroundings(workspace: Workspace, uri: str, recent: list[str], limit: int) -> Surroundings:
    """The document's language and up to `limit` other open documents, in `recent`'s order."""
    others = []
    for other in recent:
        if len(others) == limit:
            break
        if other == uri or not is_open(workspace, other):
            continue
        document = workspace.get_text_document(other)
        others.append((unicode(document.path or other), unicode(document.source[-MAX_EXTRA_CHARS:])))
    return Surroundings(workspace.get_text_document(uri).language_id or "", tuple(others))
