"""Two replays of the same typing, keystroke by keystroke: is one right more often where both answer?

`match_rate` is over the keystrokes a side answered, and the sides answer different ones: one that
shows ghost text in more places (specd in 86% of pauses, llama.cpp in half) answers the harder ones
the other leaves blank, and its rate drops by that choice alone. Paired on the keystrokes both
answered, the rates compare the suggestions themselves; the ones only one side answered are
counted apart. Reads the `--records` files of `specd replay` and `bench/llama_replay.py`, which
type the same keys in the same order (the same folder, files, seed and pace); a pair whose
records differ in what was typed is refused.

    python -m specd.bench.replay_pair A.jsonl B.jsonl [--names A B]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path


class Unpaired(ValueError):
    """The two records are not of the same typing."""


@dataclass(frozen=True)
class Side:
    answered: int   # keystrokes this side answered with a suggestion
    right: int      # of those, how many suggestions' first line began the real text

    @property
    def rate(self) -> float | None:
        return round(self.right / self.answered, 3) if self.answered else None


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pair(a: list[dict], b: list[dict]) -> dict[str, Side]:
    """Each side's answered/right counts on the keystrokes both answered ("both_a", "both_b") and
    on those only one answered ("only_a", "only_b")."""
    if len(a) != len(b):
        raise Unpaired(f"{len(a)} keystrokes against {len(b)}: not the same typing")
    for i, (x, y) in enumerate(zip(a, b)):
        if (x["index"], x["truth"]) != (y["index"], y["truth"]):
            raise Unpaired(f"keystroke {i} differs (index {x['index']} against {y['index']}, or its text): "
                           "not the same typing")
    both = [(x, y) for x, y in zip(a, b) if x["suggested"] and y["suggested"]]
    only_a = [x for x, y in zip(a, b) if x["suggested"] and not y["suggested"]]
    only_b = [y for x, y in zip(a, b) if y["suggested"] and not x["suggested"]]
    count = lambda rows: Side(len(rows), sum(bool(r["matched"]) for r in rows))  # noqa: E731
    return {"both_a": count([x for x, _ in both]), "both_b": count([y for _, y in both]),
            "only_a": count(only_a), "only_b": count(only_b)}


def summary(sides: dict[str, Side], names: tuple[str, str]) -> str:
    a, b = names
    rate = lambda side: "-" if side.rate is None else f"{side.rate:.3f}"  # noqa: E731
    return (f"both answered {sides['both_a'].answered}: match_rate {a} {rate(sides['both_a'])} "
            f"{b} {rate(sides['both_b'])}; only {a} {sides['only_a'].answered} ({rate(sides['only_a'])}), "
            f"only {b} {sides['only_b'].answered} ({rate(sides['only_b'])})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--names", nargs=2, default=None, metavar=("A", "B"))
    args = parser.parse_args(argv)
    names = tuple(args.names) if args.names else (args.a.stem, args.b.stem)
    try:
        sides = pair(load(args.a), load(args.b))
    except (OSError, json.JSONDecodeError, KeyError, Unpaired) as error:
        print(f"replay_pair: {error}", file=sys.stderr)
        return 2
    print(summary(sides, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
