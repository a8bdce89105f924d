"""lsp/trigger.py: each rule of `[trigger]`, at its edges; an editor's overrides."""

from __future__ import annotations

import pytest

from specd.daemon.config import Trigger
from specd.lsp.trigger import TriggerOptionsError, decide, line_suffix_chars, with_options

AUTO, INVOKED = False, True


def test_by_default_every_request_asks_at_once():
    assert decide(Trigger(), AUTO, "python", "") == decide(Trigger(), INVOKED, "python", "x" * 200)
    decision = decide(Trigger(), AUTO, "python", "some long rest of the line")
    assert (decision.action, decision.delay_ms) == ("ask", 0)


def test_auto_off_holds_automatic_requests_and_asks_invoked_ones():
    trigger = Trigger(auto=False)
    held = decide(trigger, AUTO, "python", "")
    assert held.action == "hold" and "trigger.auto" in held.why
    assert decide(trigger, INVOKED, "python", "").action == "ask"


def test_the_delay_is_for_automatic_requests_only():
    trigger = Trigger(delay_ms=250)
    assert decide(trigger, AUTO, "python", "").delay_ms == 250
    assert decide(trigger, INVOKED, "python", "").delay_ms == 0, "the user asked: at once"


@pytest.mark.parametrize("rest, action", [
    ("abcdefgh", "ask"),                 # exactly N: still asks
    ("abcdefghi", "hold"),               # N + 1
    ("  a b c d e f g h  \t", "ask"),    # N, with whitespace around and between: not counted
    (" " * 40, "ask"),                   # whitespace only
    ("", "ask"),
    ("):", "ask"),
])
def test_max_line_suffix_counts_what_is_not_whitespace(rest, action):
    assert decide(Trigger(max_line_suffix=8), AUTO, "python", rest).action == action


def test_max_line_suffix_zero_asks_only_at_a_line_end_and_never_holds_back_invoked():
    trigger = Trigger(max_line_suffix=0)
    assert decide(trigger, AUTO, "python", "   ").action == "ask"
    held = decide(trigger, AUTO, "python", ")")
    assert held.action == "hold" and "max_line_suffix" in held.why
    assert decide(trigger, INVOKED, "python", "x" * 100).action == "ask"


def test_max_line_suffix_minus_one_never_holds_back():
    assert decide(Trigger(max_line_suffix=-1), AUTO, "python", "x" * 1000).action == "ask"


def test_a_language_turned_off_gets_nothing_even_invoked():
    trigger = Trigger(languages={"markdown": False})
    for invoked in (AUTO, INVOKED):
        off = decide(trigger, invoked, "markdown", "")
        assert off.action == "off" and "markdown" in off.why
    assert decide(trigger, AUTO, "python", "").action == "ask", "the others stay on"


def test_star_sets_the_languages_not_named():
    trigger = Trigger(languages={"*": False, "python": True})
    assert decide(trigger, AUTO, "python", "").action == "ask"
    assert decide(trigger, INVOKED, "go", "").action == "off"
    assert decide(trigger, INVOKED, "", "").action == "off", "a document with no language id is one of the others"


def test_line_suffix_chars():
    assert line_suffix_chars(" a\tb \u00a0c ") == 3


def test_an_editor_overrides_what_it_names_and_adds_languages():
    config = Trigger(delay_ms=100, languages={"markdown": False, "text": False})
    mine = with_options(config, {"auto": False, "languages": {"text": True, "go": False}})
    assert mine == Trigger(auto=False, delay_ms=100, languages={"markdown": False, "text": True, "go": False})
    assert with_options(config, {}) == config
    assert with_options(config, {"languages": []}) == config, "Neovim sends Lua's empty table as []"


@pytest.mark.parametrize("options, said", [
    ([], "must be an object"),
    ({"delay_ms": -5}, "trigger.delay_ms must be 0..10000"),
    ({"delay_ms": "250"}, "$.delay_ms"),
    ({"delayMs": 250}, "delayMs"),
    ({"auto": "no"}, "$.auto"),
    ({"max_line_suffix": -2}, "trigger.max_line_suffix"),
    ({"languages": ["markdown"]}, "$.languages"),
    ({"languages": {"markdown": "off"}}, "$.languages"),
])
def test_an_editors_bad_values_are_said_clearly(options, said):
    with pytest.raises(TriggerOptionsError) as error:
        with_options(Trigger(), options)
    assert said in str(error.value)
