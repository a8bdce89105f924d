"""What the typist of `specd replay` types, and when: passages of real source cut at a cursor, and
the keys with their timing. Pure: no LSP, no daemon; `bench/llama_replay.py` types the same.

A person types a word at an even pace and pauses once it is done, to read or to think: after a
space, punctuation or a line end that the next word follows (`x = foo(` then `bar`). Those pauses
are where ghost text is wanted: it counts only if it arrives before the next key.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path

from specd.decoding.errors import UserError
from specd.lsp.cursor import PositionError, cut, cut_at

LANGUAGES = {".py": "python", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust",
             ".c": "c", ".h": "c", ".cpp": "cpp", ".java": "java", ".lua": "lua"}
COMMENT_STARTS = ("#", "//", "/*", "*", '"""', "'''", "--")
MIN_LINE_CHARS = 12   # a passage starts on a line with this much code on it


class PassageError(UserError):
    """A folder or file the typist cannot type into."""


@dataclass(frozen=True)
class Passage:
    """A file cut at a cursor: what is before it, the real next characters to type, what follows."""
    file: Path
    at: str                       # LINE:COL, 1-based, where typing starts
    before: str
    typed: str
    after: str

    @property
    def language(self) -> str:
        return LANGUAGES.get(self.file.suffix, "plaintext")

    @classmethod
    def of(cls, file: Path, text: str, at: str, chars: int) -> Passage:
        """Type the `chars` characters that follow LINE:COL `at` in `text`."""
        before, rest = cut_at(text, at)
        if chars > len(rest):
            raise PositionError(f"only {len(rest)} characters follow {at}")
        return cls(file, at, before, rest[:chars], rest[chars:])


@dataclass(frozen=True)
class Key:
    char: str
    gap_s: float                  # from this key to the next (or to the end of the last pause)
    pause: bool                   # the typist pauses after this key


def is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def pauses_after(typed: str, i: int) -> bool:
    """After key `i` a word is done: it is a space, punctuation or line end that a word follows,
    or the last key. Runs of them (indentation after a line end) pause once, before the word."""
    if i == len(typed) - 1:
        return True
    return not is_word(typed[i]) and is_word(typed[i + 1])


def schedule(typed: str, cps: float, pause_ms: float = 0.0) -> list[Key]:
    """Every key at `cps` keys a second; with `pause_ms`, a pause of that long after each word
    instead of the next key's interval. `pause_ms` 0: no pauses, an even stream of keys."""
    assert cps > 0 and pause_ms >= 0, "a positive pace and a pause that is not negative"
    keys = []
    for i, char in enumerate(typed):
        pause = pause_ms > 0 and pauses_after(typed, i)
        keys.append(Key(char, pause_ms / 1e3 if pause else 1.0 / cps, pause))
    return keys


def sample(path: Path, n: int, chars: int, seed: int = 0) -> list[Passage]:
    """`n` passages of `chars` characters across the source files under `path` (a folder or one
    file), the same for the same files and seed. The languages take turns, so a folder of three
    languages gets each a third; each passage starts at a line's first character of code, as when
    one starts a new statement."""
    pools = _candidates(path, chars)
    rng = random.Random(seed)
    for pool in pools.values():
        rng.shuffle(pool)
    languages = sorted(pools)
    if n > sum(map(len, pools.values())):
        raise PassageError(f"{path}: only {sum(map(len, pools.values()))} places to type {chars} characters, "
                           f"not {n}")
    passages, turn = [], 0
    while len(passages) < n:
        pool = pools[languages[turn % len(languages)]]
        if pool:
            passages.append(pool.pop())
        turn += 1
    return passages


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The typist's command line, the same for `specd replay` and `bench/llama_replay.py`."""
    parser.add_argument("file", type=Path, help="a source file, or with --files a folder of them")
    parser.add_argument("--at", help="LINE:COL, 1-based: where typing starts in FILE")
    parser.add_argument("--files", type=int, metavar="N",
                        help="type at N places across FILE (a folder or one file), chosen by --seed, languages in turn")
    parser.add_argument("--seed", type=int, default=0, help="which places --files picks (default 0)")
    parser.add_argument("--chars", type=int, default=40,
                        help="how many of the real next characters to type (default 40)")
    parser.add_argument("--cps", type=float, default=10.0, help="keys per second (default 10)")
    parser.add_argument("--pause-ms", type=float, default=0.0,
                        help="pause this long after each word, as people do (default 0: no pauses)")
    parser.add_argument("--read-ms", type=float, default=0.0,
                        help="after opening each file, read this long before the first request there "
                             "(default 0: ask at once)")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--records", type=Path, metavar="JSONL",
                        help="write every keystroke here, one JSON line each: what was suggested, "
                             "what was typed next, when, and whether it showed and matched")


def passages(args: argparse.Namespace) -> tuple[Passage, ...]:
    """What the typist types as `add_arguments` read it: the passage at --at in FILE, or --files N
    passages across it. A command line it cannot serve is a PassageError, said plainly."""
    if args.cps <= 0 or args.pause_ms < 0 or args.read_ms < 0:
        raise PassageError("--cps must be positive, --pause-ms and --read-ms not negative")
    if args.chars < 1:
        raise PassageError(f"--chars must be at least 1, not {args.chars}")
    if args.files is not None:
        if args.at is not None:
            raise PassageError("--at names one place; --files picks N of them: give one or the other")
        if args.files < 1:
            raise PassageError(f"--files must be at least 1, not {args.files}")
        if not args.file.exists():
            raise PassageError(f"{args.file} does not exist")
        return tuple(sample(args.file, args.files, args.chars, args.seed))
    if args.at is None:
        raise PassageError(f"{args.file}: say where to type, --at LINE:COL (or --files N for places chosen across it)")
    try:
        text = args.file.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise PassageError(f"cannot read {args.file}: {error}") from None
    return (Passage.of(args.file, text, args.at, args.chars),)


def _candidates(path: Path, chars: int) -> dict[str, list[Passage]]:
    """Per language, every line start with enough code on it and `chars` characters after it."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in LANGUAGES and p.is_file())
    if not files:
        raise PassageError(f"{path}: no source files ({', '.join(sorted(LANGUAGES))})")
    pools: dict[str, list[Passage]] = {}
    for file in files:
        try:
            text = file.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise PassageError(f"cannot read {file}: {error}") from None
        for number, line in _code_lines(text):
            code = line.strip()
            if len(code) < MIN_LINE_CHARS or code.startswith(COMMENT_STARTS):
                continue
            column = len(line) - len(line.lstrip()) + 1
            before, rest = cut(text, number, column)
            if len(rest) >= chars:
                passage = Passage(file, f"{number}:{column}", before, rest[:chars], rest[chars:])
                pools.setdefault(passage.language, []).append(passage)
    if not pools:
        raise PassageError(f"{path}: no line with {MIN_LINE_CHARS} characters of code and {chars} after it")
    return pools


def _code_lines(text: str):
    """(number, line) of the lines outside block comments and docstrings (a line that only
    continues a comment is prose, not code to complete)."""
    closing = None  # what ends the block we are in
    for number, line in enumerate(text.splitlines(), start=1):
        if closing is not None:
            if closing in line:
                closing = None
            continue
        for opener, closer in (("/*", "*/"), ('"""', '"""'), ("'''", "'''")):
            at = line.find(opener)
            if at >= 0 and closer not in line[at + len(opener):]:
                closing = closer
        yield number, line
