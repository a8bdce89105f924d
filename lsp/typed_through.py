"""Typed-through reuse: when the user types exactly the start of the suggestion on screen, the
rest is answered at once, with no model call. The rest is also sent to the engine as a hint (a
lookup source), so the next suggestion is the target's own, verified, not the old one trusted."""

from __future__ import annotations

from dataclasses import dataclass

from specd.lsp.context import Cursor


@dataclass(frozen=True)
class Shown:
    """The last suggestion made for a document, and where."""
    prefix: str
    suffix: str
    text: str
    replaces_rest: bool = False  # it ends with the rest of the line, which it replaces
    request: int | None = None   # the daemon request that answered it


def rest_after_typing(shown: Shown | None, cursor: Cursor) -> str | None:
    """What is left of `shown` once the user has typed its start, or None if they did not."""
    if shown is None or cursor.suffix != shown.suffix or not cursor.prefix.startswith(shown.prefix):
        return None
    typed = cursor.prefix[len(shown.prefix):]
    if not typed or not shown.text.startswith(typed):
        return None
    rest = shown.text[len(typed):]
    if cursor.single_line:
        rest = rest.split("\n", 1)[0]
    return rest if rest.strip() else None
