"""The typist of `specd replay`: where it pauses, its timing, the places it picks, and the
figures made from what came back (counted here from records whose times are set by hand)."""

from __future__ import annotations

import pytest

from specd.bench.replay_report import Keystroke, Outcome, records, report
from specd.bench.typist import PassageError, pauses_after, sample, schedule

PY = "import os\n\n\ndef walk(top):\n    for name in os.listdir(top):\n        yield os.path.join(top, name)\n"
C = ("#include <stdio.h>\n\nint main(void)\n{\n    /* say hello\n       to everyone */\n"
     "    printf(\"hello\\n\");\n    return 0;\n}\n")


def test_the_typist_pauses_once_a_word_is_done():
    typed = "x = foo(bar)\n    return"
    pauses = [typed[: i + 1] for i in range(len(typed)) if pauses_after(typed, i)]
    # where a word follows: after "= " (not after "x ", which "=" follows), after "(" (before
    # "bar"), after the indent (before "return"), and after the last key; never inside a word,
    # never inside a run of spaces or punctuation
    assert pauses == ["x = ", "x = foo(", "x = foo(bar)\n    ", typed]


def test_the_schedule_keeps_the_pace_and_pauses_only_when_told():
    even = schedule("ab cd", cps=8)
    assert [k.gap_s for k in even] == [0.125] * 5 and not any(k.pause for k in even)
    paused = schedule("ab cd", cps=8, pause_ms=1000)
    assert [k.pause for k in paused] == [False, False, True, False, True]
    assert [k.gap_s for k in paused] == [0.125, 0.125, 1.0, 0.125, 1.0]


def test_places_are_reproducible_alternate_languages_and_start_on_code(tmp_path):
    (tmp_path / "walk.py").write_text(PY)
    (tmp_path / "hello.c").write_text(C)
    (tmp_path / "notes.txt").write_text("not source\n" * 20)
    first, again = sample(tmp_path, 4, 6, seed=0), sample(tmp_path, 4, 6, seed=0)
    assert first == again, "the same files and seed give the same places"
    assert [p.language for p in first] == ["c", "python", "c", "python"]
    for p in first:
        line = p.before.rsplit("\n", 1)[-1]
        assert not line.strip(), f"{p.at}: typing starts at the line's first character of code"
        assert not p.typed.startswith(("/*", "to everyone", "#")), f"{p.at}: no comment is typed as code"
        assert p.before + p.typed + p.after == p.file.read_text()
    with pytest.raises(PassageError, match="places to type"):
        sample(tmp_path, 50, 6)
    (tmp_path / "empty").mkdir()
    with pytest.raises(PassageError, match="no source files"):
        sample(tmp_path / "empty", 1, 6)
    with pytest.raises(PassageError, match="no line with"):
        sample(tmp_path / "notes.txt", 1, 6)


def _sent(index: int, at: float, answered: float | None, text: str, truth: str, pause: bool, gap: float) -> Keystroke:
    return Keystroke(at, truth, index=index, pause=pause, next_at=at + gap, answered_at=answered, text=text)


def test_pause_figures_count_what_arrived_before_the_next_key():
    typed = "ab cd ef"
    keys = schedule(typed, cps=10, pause_ms=1000)
    replies = {2: ("cd", 0.3), 5: ("ef", 1.5), 7: ("zz", 0.2)}   # key index: (text, seconds to it)
    sent, at = [], 0.0
    for i, key in enumerate(keys):
        text, delay = replies.get(i, ("", None))
        sent.append(_sent(i, at, None if delay is None else at + delay, text, typed[i + 1:], key.pause, key.gap_s))
        at += key.gap_s
    outcome = Outcome("file:///x.py", started=0.0, typed_chars=len(typed), sent=sent)
    figures = report([outcome, outcome])
    assert figures["pauses"] == 6 and figures["shown"] == 4, "the 1.5 s reply came after the next key"
    assert figures["shown_share"] == round(4 / 6, 3)
    assert figures["pause_late"] == 2 and figures["pause_empty"] == 0
    assert figures["pause_p50_ms"] == 250.0 and figures["pause_p95_ms"] == 300.0
    assert figures["pause_match_rate"] == 0.5, "'cd' begins the real text, 'zz' does not"
    # "cd" at key 2 covers keys 3 and 4; the late "ef" and the wrong "zz" save nothing
    assert figures["chars_saved"] == 4 and figures["chars_typed"] == 16
    assert "model_s_done" not in figures, "no trace: no model time is claimed"


def test_a_pause_without_ghost_text_is_late_or_empty():
    sent = [_sent(0, 0.0, 0.2, "  ", "x", True, 1.0),      # in time, but only whitespace
            _sent(1, 1.0, None, "", "x", True, 1.0),       # never answered
            _sent(2, 2.0, 3.5, "x", "x", True, 1.0),       # after the next key
            _sent(3, 3.0, 3.1, "x", "x", True, 1.0)]       # shown
    figures = report([Outcome("file:///x.py", started=0.0, typed_chars=4, sent=sent)])
    assert (figures["shown"], figures["pause_late"], figures["pause_empty"]) == (1, 2, 1)


def test_keystroke_figures_count_only_suggestions_with_text():
    """answered_share, p50/p95 and match_rate over hand-made records: an empty answer, a
    cancelled request and an unanswered one are not suggestions."""
    sent = [Keystroke(0.0, "return x\n", answered_at=0.1, text="return x"),      # right, 100 ms
            Keystroke(1.0, "return y\n", answered_at=1.3, text="return z"),      # wrong, 300 ms
            Keystroke(2.0, "pass\n", answered_at=2.05, text="  \n"),             # blank: not a suggestion
            Keystroke(3.0, "pass\n", cancelled=True),                           # cancelled, never answered
            Keystroke(4.0, "x = 1\n")]                                          # never answered
    figures = report([Outcome("file:///k.py", started=0.0, sent=sent)])
    assert figures["sent"] == 5 and figures["answered"] == 2 and figures["answered_share"] == 0.4
    assert figures["p50_ms"] == 200.0 and figures["p95_ms"] == 290.0
    assert figures["match_rate"] == 0.5 and figures["cancelled_by_client"] == 1
    assert report([Outcome("file:///k.py", started=0.0, sent=sent[2:])])["answered_share"] == 0.0


def test_records_say_of_each_keystroke_what_it_was_counted_as():
    """`--records`: one row per key, the suggestion beside the real text, matched and shown as
    the report counts them."""
    sent = [Keystroke(0.0, "return x\n", index=0, pause=True, next_at=1.0, answered_at=0.1, text="return x"),
            Keystroke(1.0, "return y\n", index=1, next_at=1.2, answered_at=1.3, text="return z"),
            Keystroke(2.0, "pass\n", index=2, cancelled=True)]
    rows = records([Outcome("file:///r.py", started=0.0, sent=sent)])
    assert [(r["index"], r["shown"], r["matched"], r["ms"], r["cancelled"]) for r in rows] == \
        [(0, True, True, 100.0, False), (1, False, False, 300.0, False), (2, False, False, None, True)]
    assert rows[1]["text"] == "return z" and rows[1]["truth"] == "return y\n" and rows[0]["uri"] == "file:///r.py"
