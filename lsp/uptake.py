"""Which suggestions the user takes: each one the server sends an editor gets an id, and what the
editor reports of it becomes the daemon's Feedback, summed in `specd status` (daemon/metrics.py).

The editors report by the names Copilot's language server made usual:
- taken whole: the item's `command` (ACCEPT, its one argument the id), which both VS Code and
  Neovim's `vim.lsp.inline_completion` run after inserting the text; the server answers it as a
  `workspace/executeCommand`;
- taken in part: `textDocument/didPartiallyAcceptCompletion` with the item and `acceptedLength`,
  the characters taken so far (a client that counts each part alone is also read right, as long
  as it sends the total: the larger of what it says and what came before counts).
What is shown and never taken (typed over, escaped, or replaced by the next suggestion) is the
rest: shown minus taken.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from specd.daemon.protocol import Feedback

ACCEPT = "specd.didAccept"                              # the command on every item
PARTIAL = "textDocument/didPartiallyAcceptCompletion"   # Copilot's name, its params' shape
KEEP = 512                                              # ids remembered: the newest suggestions
LANGUAGE = 64                                           # a languageId's characters kept (the protocol's cap)


class UptakeError(ValueError):
    """A report that names no suggestion this server sent (a client's mistake: logged)."""


@dataclass
class Sent:
    length: int
    language: str
    request: int | None    # the daemon request that answered it
    taken: int = 0         # characters taken so far
    whole: bool = False


class Uptake:
    """The suggestions sent and what became of them, the newest KEEP by id."""

    def __init__(self):
        self.sent: OrderedDict[str, Sent] = OrderedDict()
        self.count = 0

    def shown(self, text: str, language: str = "", request: int | None = None) -> tuple[str, Feedback]:
        """A suggestion sent in a document of `language` (its languageId), the answer to daemon
        request `request`: its id, and the report."""
        self.count += 1
        key, language = f"s{self.count}", language[:LANGUAGE]
        self.sent[key] = Sent(len(text), language, request)
        while len(self.sent) > KEEP:
            self.sent.popitem(last=False)
        return key, Feedback("shown", len(text), language=language, request=request)

    def accepted(self, key: object) -> Feedback | None:
        """Taken whole; None where that was already counted (a command run twice)."""
        sent = self.find(key)
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
    item = _field(params, "item")
    command = _field(item, "command")
    arguments = _field(command, "arguments") or []
    if not isinstance(arguments, list) or not arguments:
        raise UptakeError(f"{PARTIAL} needs the item it shows, with specd's command and its id")
    return arguments[0], _field(params, "acceptedLength", "accepted_length")


def _field(value: object, *names: str) -> object:
    """`name` of a JSON object as pygls hands it over (a namespace object, or a dict)."""
    for name in names:
        if isinstance(value, dict) and name in value:
            return value[name]
        if hasattr(value, name):
            return getattr(value, name)
    return None
