"""Post-processing every completion tool does before showing a suggestion.

- no trailing whitespace on any line, no trailing blank lines;
- single-line mode keeps the first line;
- drop trailing lines that repeat what follows the cursor (the suffix's next lines);
- where the suggestion ends with the rest of the current line, it replaces that rest instead of
  doubling it (`foo(a)` typed before `)` becomes one `)`);
- brackets the suggestion opened and a truncated suggestion left open are closed, unless the
  rest of the line already closes them;
- never an empty or whitespace-only suggestion: None instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from specd.lsp.context import Cursor

PAIRS = {"(": ")", "[": "]", "{": "}"}
TRUNCATED = {"max_tokens", "deadline"}  # not "unsure": a closer there would guess past the target's doubt


@dataclass(frozen=True)
class Suggestion:
    text: str
    replaces_rest: bool  # the suggestion replaces the rest of the current line
    request: int | None = None  # the daemon request whose answer it shows (lsp/uptake.py reports it)


def clean(text: str, cursor: Cursor, stop_reason: str | None) -> Suggestion | None:
    lines = [line.rstrip() for line in text.split("\n")]
    if cursor.single_line:
        lines = lines[:1]
    lines = _drop_suffix_repeat(lines, cursor)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return None
    body = "\n".join(lines)
    if not body.strip():
        return None
    if stop_reason in TRUNCATED:
        body += _closers(body, cursor.line_rest)
    rest = cursor.line_rest.strip()
    if rest and body.rstrip().endswith(rest) and body.strip() != rest:
        return Suggestion(body, replaces_rest=True)
    if rest and body.strip() == rest:
        return None  # it only repeats what is already there
    return Suggestion(body, replaces_rest=False)


def _drop_suffix_repeat(lines: list[str], cursor: Cursor) -> list[str]:
    """Trailing suggestion lines that equal the lines after the cursor's line are dropped."""
    following = [line.strip() for line in cursor.suffix.split("\n")[1:] if line.strip()]
    if not following or len(lines) < 2:
        return lines
    for start in range(1, len(lines)):
        tail = [line.strip() for line in lines[start:] if line.strip()]
        if tail and tail == following[: len(tail)]:
            return lines[:start]
    return lines


def _closers(body: str, line_rest: str) -> str:
    """Closers for brackets the suggestion opened and did not close, unless `line_rest` has them."""
    stack = []
    for char in body:
        if char in PAIRS:
            stack.append(PAIRS[char])
        elif stack and char == stack[-1]:
            stack.pop()
    needed = "".join(reversed(stack))
    return "" if line_rest.lstrip().startswith(needed) else needed
