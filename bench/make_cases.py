"""Make FIM benchmark cases from this machine's Python standard library, reproducibly.

    python bench/make_cases.py --seed 0 --n 8 > bench/cases.jsonl

Each case cuts a standard-library module at the start of an indented line inside a function
body: `prefix` is about `--prefix-chars` before the cursor, `middle` the next `--middle-lines`
lines (the truth, for first-line quality), `suffix` about `--suffix-chars` after them. Files and
cursors are drawn with `random.Random(seed)` from a sorted list, so the same Python gives the same
cases; the Python version is recorded in each case's `path`.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import sysconfig
import tokenize
from pathlib import Path

SKIP = ("test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "site-packages", "__phello__")


def modules(root: Path) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if not any(part in relative for part in SKIP) and 20_000 <= path.stat().st_size <= 400_000:
            files.append(path)
    return files


def in_strings(source: str) -> set[int]:
    """0-based lines inside multi-line string literals (docstrings), found by the tokenizer."""
    inside = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.STRING and token.end[0] > token.start[0]:
            inside.update(range(token.start[0] - 1, token.end[0]))
    return inside


def cursors(lines: list[str], min_line: int) -> list[int]:
    """Lines that start a statement inside a body: indented, not blank, not a comment or decorator,
    not in a docstring, after enough text for a prefix."""
    picks, strings = [], in_strings("".join(lines))
    for i in range(min_line, len(lines) - 12):
        text = lines[i].strip()
        if (lines[i].startswith("        ") and i not in strings and text
                and not text.startswith(("#", "@", '"', "'", ")", "]", "}"))
                and lines[i - 1].strip() and not lines[i - 1].rstrip().endswith(("\\", ","))):
            picks.append(i)
    return picks


def make_case(rng: random.Random, path: Path, root: Path, args) -> dict | None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    candidates = cursors(lines, min_line=60)
    if not candidates:
        return None
    i = rng.choice(candidates)
    prefix = "".join(lines[:i])[-args.prefix_chars:]
    prefix = prefix[prefix.find("\n") + 1:]  # start at a line boundary
    middle = "".join(lines[i:i + args.middle_lines])
    suffix = "".join(lines[i + args.middle_lines:])[: args.suffix_chars]
    suffix = suffix[: suffix.rfind("\n") + 1]  # end at a line boundary
    version = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    return {"path": f"python{version}/{path.relative_to(root).as_posix()}:{i + 1}", "language": "python",
            "prefix": prefix, "suffix": suffix, "middle": middle}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--prefix-chars", type=int, default=2800)
    p.add_argument("--suffix-chars", type=int, default=1200)
    p.add_argument("--middle-lines", type=int, default=3)
    args = p.parse_args()
    root = Path(sysconfig.get_paths()["stdlib"])
    rng = random.Random(args.seed)
    files = modules(root)
    rng.shuffle(files)
    made = 0
    for path in files:
        case = make_case(rng, path, root, args)
        if case is not None:
            print(json.dumps(case))
            made += 1
            if made == args.n:
                break


if __name__ == "__main__":
    main()
