"""bench/replay_pair.py: two replays' keystrokes paired, and a pair of different typings refused."""

from __future__ import annotations

import json

import pytest

from specd.bench.replay_pair import Unpaired, main, pair


def keys(*answers: tuple[bool, bool]) -> list[dict]:
    """One record per (suggested, matched), typing "abcd..." one key each."""
    return [{"index": i, "truth": "abcdefgh"[i:], "suggested": s, "matched": s and m}
            for i, (s, m) in enumerate(answers)]


def test_both_answered_are_compared_and_the_rest_counted_apart():
    a = keys((True, True), (True, False), (True, True), (False, False), (True, False))
    b = keys((True, True), (True, True), (False, False), (True, True), (False, False))
    sides = pair(a, b)
    assert (sides["both_a"].answered, sides["both_a"].right) == (2, 1)
    assert (sides["both_b"].answered, sides["both_b"].right) == (2, 2)
    assert (sides["only_a"].answered, sides["only_a"].right, sides["only_a"].rate) == (2, 1, 0.5)
    assert (sides["only_b"].answered, sides["only_b"].right) == (1, 1)


def test_records_of_different_typing_are_refused(tmp_path):
    a = keys((True, True), (True, True))
    with pytest.raises(Unpaired, match="2 keystrokes against 1"):
        pair(a, a[:1])
    moved = [dict(a[0]), dict(a[1], truth="elsewhere")]
    with pytest.raises(Unpaired, match="keystroke 1 differs"):
        pair(a, moved)
    for name, rows in (("a", a), ("b", moved)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 2, "a clear error, no figures"
    assert main([str(tmp_path / "a.jsonl"), str(tmp_path / "missing.jsonl")]) == 2


def test_the_summary_names_both_sides(tmp_path, capsys):
    rows = keys((True, True), (True, False), (False, False))
    for name in ("x", "y"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(tmp_path / "x.jsonl"), str(tmp_path / "y.jsonl"), "--names", "specd", "llama.cpp"]) == 0
    assert capsys.readouterr().out.strip() == ("both answered 2: match_rate specd 0.500 llama.cpp 0.500; "
                                               "only specd 0 (-), only llama.cpp 0 (-)")
