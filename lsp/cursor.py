"""A place in a text as people write it, LINE:COL (1-based), and the text cut there.

`specd complete --at`, `specd bench-daemon --at` and `specd replay --at` all cut here, so they
agree on what a position means and say the same thing about one the file does not have. No torch,
no LSP: the language server, the command line and bench/ import this.
"""

from __future__ import annotations

from specd.decoding.errors import UserError


class PositionError(UserError):
    """A position the text does not have (or one that is not written as a position)."""


def parse_at(at: str) -> tuple[int, int]:
    """(line, column), 1-based, from "LINE:COL"."""
    try:
        line, column = (int(x) for x in at.split(":"))
    except ValueError:
        raise PositionError(f"--at wants LINE:COL, not {at!r}") from None
    return line, column


def cut(text: str, line: int, column: int) -> tuple[str, str]:
    """(before, after) the 1-based position; the line after the last one is there, at column 1."""
    lines = text.splitlines(keepends=True)
    if not 1 <= line <= len(lines) + 1 or column < 1:
        raise PositionError(f"{line}:{column} is outside the file ({len(lines)} lines)")
    current = lines[line - 1].rstrip("\n") if line <= len(lines) else ""
    if column - 1 > len(current):
        raise PositionError(f"{line}:{column} is outside the file: line {line} has {len(current)} characters")
    offset = sum(map(len, lines[: line - 1])) + column - 1
    return text[:offset], text[offset:]


def cut_at(text: str, at: str | None) -> tuple[str, str]:
    """(before, after) "LINE:COL"; None is the end of the text."""
    return (text, "") if at is None else cut(text, *parse_at(at))
