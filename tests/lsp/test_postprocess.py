"""Post-processing: what every completion tool does before it shows a suggestion."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from specd.lsp.context import LspTextDocument, clip, cursor_at
from specd.lsp.cursor import PositionError
from specd.lsp.postprocess import clean
from specd.lsp.typed_through import Shown, rest_after_typing


def cursor(text: str, line: int, character: int, multiline: str = "auto"):
    return cursor_at(LspTextDocument("file:///t.py", text), types.Position(line, character), multiline)


def test_trailing_whitespace_and_blank_lines_go():
    c = cursor("def f():\n    \n", 1, 4)
    s = clean("x = 1   \n    return x  \n\n\n", c, "stop_token")
    assert s.text == "x = 1\n    return x" and not s.replaces_rest


def test_whitespace_only_or_empty_gives_nothing():
    c = cursor("def f():\n    \n", 1, 4)
    assert clean("   \n\n  ", c, "stop_token") is None
    assert clean("", c, "stop_token") is None


def test_single_line_keeps_the_first_line():
    c = cursor("total = \nprint(total)\n", 0, 8)
    assert c.single_line
    assert clean("sum(values)\nprint(1)\n", c, "end_of_line").text == "sum(values)"


def test_lines_repeating_the_suffix_are_dropped():
    text = "def f(a, b):\n    \n    return a\n"
    c = cursor(text, 1, 4)
    assert not c.single_line
    s = clean("a, b = b, a + b\n    return a\n", c, "stop_token")
    assert s.text == "a, b = b, a + b"


def test_a_suggestion_ending_with_the_rest_of_the_line_replaces_it():
    c = cursor("print(foo(\n", 0, 10)
    assert c.line_rest == ""
    c = cursor("x = compute()\n", 0, 12)
    assert c.line_rest == ")"
    s = clean("values, 2)", c, "end_of_line")
    assert s.text == "values, 2)" and s.replaces_rest
    assert clean(")", c, "end_of_line") is None, "only repeats what is there"


def test_truncated_suggestions_close_the_brackets_they_opened():
    c = cursor("result = \n", 0, 9)
    assert clean("compute(values[0", c, "max_tokens").text == "compute(values[0])"
    assert clean("compute(values[0", c, "stop_token").text == "compute(values[0", "only when cut short"
    c = cursor("result = ])\n", 0, 9)
    assert clean("compute(values[0", c, "max_tokens").text == "compute(values[0"


def test_multiline_on_an_empty_line_after_a_block_opener_only():
    text = "if ready:\n    \nx = \n"
    assert not cursor(text, 1, 4).single_line
    assert cursor(text, 2, 4).single_line
    assert not cursor(text, 2, 4, multiline="always").single_line
    assert cursor(text, 1, 4, multiline="never").single_line


@pytest.mark.parametrize("line,character", [(9, 0), (0, 40)])
def test_positions_outside_the_document_are_refused(line, character):
    with pytest.raises(PositionError):
        cursor("a = 1\nb = 2\n", line, character)


def test_the_line_after_the_last_exists_only_after_a_final_line_end():
    assert cursor("a = 1\n", 1, 0).prefix == "a = 1\n"
    with pytest.raises(PositionError):
        cursor("a = 1\nb = 2", 2, 0)


def test_utf16_positions_count_surrogate_pairs():
    c = cursor("s = '😀' + \n", 0, 11)
    assert c.prefix == "s = '😀' + " and c.line_rest == ""


def test_typed_through_rest():
    c0 = cursor("x = \n", 0, 4)
    shown = Shown(c0.prefix, c0.suffix, "compute(a, b)")
    c1 = cursor("x = com\n", 0, 7)
    assert rest_after_typing(shown, c1) == "pute(a, b)"
    assert rest_after_typing(shown, cursor("x = cat\n", 0, 7)) is None, "typed something else"
    assert rest_after_typing(shown, cursor("x = compute(a, b)\n", 0, 17)) is None, "nothing left"
    assert rest_after_typing(shown, c0) is None, "nothing typed"


def test_a_typed_through_rest_still_replaces_the_rest_of_the_line():
    """`a, b)` shown before `)`: typing `a` leaves `, b)`, which must still replace the `)`."""
    from specd.lsp.context import Surroundings
    from specd.lsp.suggest import Suggester

    async def no_daemon():
        raise AssertionError("a typed-through answer needs no daemon")

    c0 = cursor("x = f()\n", 0, 6)
    suggestion = clean("a, b)", c0, "end_of_line")
    assert suggestion.replaces_rest
    suggester = Suggester(connect=no_daemon)
    suggester.shown["u"] = Shown(c0.prefix, c0.suffix, suggestion.text, suggestion.replaces_rest)
    suggester._spawn = lambda coroutine: coroutine.close()  # no daemon here: skip the verification
    rest = asyncio.run(suggester.suggest("u", cursor("x = f(a)\n", 0, 7), Surroundings("python")))
    assert rest.text == ", b)" and rest.replaces_rest


def test_a_form_feed_ends_no_line():
    """LSP ends lines at \\n, \\r\\n and \\r only; Python's splitlines also at a form feed."""
    text = "x = 1\n\x0c\ndef f(y):\n    "
    assert cursor(text, 3, 4).prefix == text
    assert cursor("a\rb\r\nc", 2, 1).prefix == "a\rb\r\nc"


def test_a_huge_prefix_is_cut_at_an_aligned_line_that_stays_put_while_typing():
    text = "".join(f"line {i}\n" for i in range(100_000))
    prefix, suffix = clip(text, "y" * 100_000, 100_000)
    assert len(prefix) <= 32_000 and prefix.startswith("line ") and int(prefix.split()[1]) % 32 == 0
    assert len(suffix) <= 8_000
    assert clip(text + "abc", "", 100_000)[0].startswith(prefix[:20]), "one more key keeps the start"
    assert clip("a\ud800b", "", 0) == ("a\ufffdb", ""), "a lone surrogate becomes U+FFFD"
