"""Which suggestions the user takes: each one the server sends an editor gets an id, and what the
editor reports of it becomes the daemon's Feedback, summed in `specd status` (daemon/metrics.py).

The editors report by the names Copilot's language server made usual:
- taken whole: the item's `command` (ACCEPT, its one argument the id), which both VS Code and
  Neovim's `vim.lsp.inline_completion` run after inserting the text; the server answers it as a
  `workspace/executeCommand`;
- taken in part: `textDocument/didPartiallyAcceptCompletion` with the item and `acceptedLength`,
  the characters taken so far (a client that counts each part alone is also read right, as long
  as it sends the total: the larger of what it says and what came before counts).
- dismissed, typed over: seen by the server itself at the next request in that document, whose
  cursor no longer continues the suggestion (typing its start, or taking a part of it, continues
  it: what is left is then shown as a new suggestion);
- dismissed, escaped: `specd/didDismissCompletion` with the item, which specd's editor clients
  send when the user hides the suggestion (Escape; leaving insert mode in Neovim).
A suggestion is dismissed at most once, and never after it was taken whole; what is shown and
never settled (the document closed, the editor gone) is the rest: shown minus taken minus left.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from specd.daemon.protocol import Feedback
from specd.lsp.context import Cursor

ACCEPT = "specd.didAccept"                              # the command on every item
PARTIAL = "textDocument/didPartiallyAcceptCompletion"   # Copilot's name, its params' shape
DISMISS = "specd/didDismissCompletion"                  # specd's own, the same params less acceptedLength
KEEP = 512                                              # ids remembered: the newest suggestions
LANGUAGE = 64                                           # a languageId's characters kept (the protocol's cap)


class UptakeError(ValueError):
    """A report that names no suggestion this server sent (a client's mistake: logged)."""


@dataclass
class Sent:
    text: str
    language: str
    request: int | None    # the daemon request that answered it
    document: str = ""     # its uri
    at: tuple[str, str] = ("", "")  # the prefix and suffix of the cursor it was shown at
    taken: int = 0         # characters taken so far
    whole: bool = False
    left: bool = False     # dismissed

    @property
    def length(self) -> int:
        return len(self.text)

    def continued_at(self, cursor: Cursor) -> bool:
        """Whether `cursor` is where the user is still on this suggestion: where it was shown, or
        after typing (or taking) a start of it."""
        prefix, suffix = self.at
        typed = cursor.prefix[len(prefix):]
        return cursor.suffix == suffix and cursor.prefix.startswith(prefix) and self.text.startswith(typed)


class Uptake:
    """The suggestions sent and what became of them, the newest KEEP by id."""

    def __init__(self):
        self.sent: OrderedDict[str, Sent] = OrderedDict()
        self.count = 0
        self.open: dict[str, str] = {}   # per document: the newest suggestion not yet settled

    def shown(self, text: str, language: str = "", request: int | None = None, document: str = "",
              cursor: Cursor | None = None) -> tuple[str, Feedback]:
        """A suggestion sent at `cursor` in `document`, of `language` (its languageId), the answer
        to daemon request `request`: its id, and the report."""
        self.count += 1
        key, language = f"s{self.count}", language[:LANGUAGE]
        at = (cursor.prefix, cursor.suffix) if cursor is not None else ("", "")
        self.sent[key] = Sent(text, language, request, document, at)
        self.open[document] = key
        while len(self.sent) > KEEP:
            self.sent.popitem(last=False)
        return key, Feedback("shown", len(text), language=language, request=request)

    def moved(self, document: str, cursor: Cursor) -> Feedback | None:
        """A new request in `document` at `cursor`: the suggestion open there is typed over where
        the cursor no longer continues it."""
        key = self.open.get(document)
        if key is None or (sent := self.sent.get(key)) is None or sent.continued_at(cursor):
            return None
        return self.dismissed(key, "typed over")

    def dismissed(self, key: object, how: str) -> Feedback | None:
        """Left without being taken whole (`how`: "typed over", "escaped"); None where it was
        settled before."""
        sent = self.find(key)
        self._settle(key, sent)
        if sent.whole or sent.left:
            return None
        sent.left = True
        return Feedback("dismissed", sent.length - sent.taken, sent.taken == 0, sent.language, sent.request, how)

    def forget(self, document: str) -> None:
        """The document is closed: what was open there is never settled."""
        self.open.pop(document, None)

    def _settle(self, key: object, sent: Sent) -> None:
        if self.open.get(sent.document) == key:
            del self.open[sent.document]

    def accepted(self, key: object) -> Feedback | None:
        """Taken whole; None where that was already counted (a command run twice)."""
        sent = self.find(key)
        self._settle(key, sent)
        if sent.whole:
            return None
        first, rest = sent.taken == 0, sent.length - sent.taken
        sent.taken, sent.whole = sent.length, True
        return Feedback("accepted", rest, first, sent.language, sent.request)

    def partially(self, key: object, length: object) -> Feedback | None:
        """`length` characters of it taken so far; None where that adds nothing."""
        sent = self.find(key)
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise UptakeError(f"acceptedLength must be a count of characters, not {length!r}")
        taken = min(length, sent.length)
        if sent.whole or taken <= sent.taken:
            return None
        first, added, sent.taken = sent.taken == 0, taken - sent.taken, taken
        return Feedback("partial", added, first, sent.language, sent.request)

    def find(self, key: object) -> Sent:
        if not isinstance(key, str) or key not in self.sent:
            raise UptakeError(f"no suggestion {key!r} was sent by this server (or it is too old to count)")
        return self.sent[key]


def partial_params(params: object) -> tuple[object, object]:
    """The id and `acceptedLength` of a didPartiallyAcceptCompletion: `{"item": {..., "command":
    {"arguments": [id]}}, "acceptedLength": n}` as Copilot's clients send it."""
    return item_id(params, PARTIAL), _field(params, "acceptedLength", "accepted_length")


def item_id(params: object, method: str) -> object:
    """The suggestion's id in a notification's `{"item": {..., "command": {"arguments": [id]}}}`."""
    command = _field(_field(params, "item"), "command")
    arguments = _field(command, "arguments") or []
    if not isinstance(arguments, list) or not arguments:
        raise UptakeError(f"{method} needs the item it shows, with specd's command and its id")
    return arguments[0]


def _field(value: object, *names: str) -> object:
    """`name` of a JSON object as pygls hands it over (a namespace object, or a dict)."""
    for name in names:
        if isinstance(value, dict) and name in value:
            return value[name]
        if hasattr(value, name):
            return getattr(value, name)
    return None
