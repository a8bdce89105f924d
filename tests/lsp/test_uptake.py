"""Which suggestions the user takes (lsp/uptake.py): the ids on the items, the reports editors send
back, and the totals the daemon keeps for `specd status`."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from specd.daemon.client import Client
from specd.daemon.config import load_config
from specd.daemon.metrics import Metrics
from specd.daemon.protocol import Feedback, decode_request, pack
from specd.daemon.protocol import Uptake as Totals
from specd.lsp.context import Cursor
from specd.lsp.uptake import ACCEPT, DISMISS, KEEP, PARTIAL, Uptake, UptakeError, item_id, partial_params
from tests.lsp.conftest import inline, type_text


def summed(events) -> Totals:
    metrics = Metrics()
    for event in events:
        if event is not None:
            metrics.feedback(event)
    return metrics.uptake()


def test_each_suggestion_counts_once_whole_and_its_parts_by_characters():
    uptake = Uptake()
    a, shown_a = uptake.shown("return value")        # 12 characters
    b, shown_b = uptake.shown("pass")
    assert a != b
    events = [shown_a, shown_b,
              uptake.partially(a, 7),                 # "return "
              uptake.partially(a, 7),                 # the same report again: nothing more
              uptake.partially(a, 3),                 # less than before: nothing
              uptake.accepted(a),                     # the rest, "value"
              uptake.accepted(a),                     # the command run twice: once
              uptake.partially(a, 12)]                # after the whole: nothing
    assert events[3:5] == [None, None] and events[6:] == [None, None]
    assert summed(events) == Totals(shown=2, accepted=1, partial=1, taken=1, chars_shown=16, chars_taken=12)
    assert uptake.partially(b, 99) == Feedback("partial", 4, True), "never more than was shown"


def test_a_suggestion_taken_whole_at_once_is_taken_and_its_language_travels_with_it():
    uptake = Uptake()
    key, shown = uptake.shown("x = 1", "python")
    assert shown.language == "python" and shown.request is None
    assert uptake.accepted(key) == Feedback("accepted", 5, True, "python")
    assert summed([shown, Feedback("accepted", 5, True, "python")]).summary() == (
        "1 shown, 1 taken (100%): 1 whole, 0 in part; 5 of 5 characters (100%)")
    assert Totals().summary() == "none shown"


def test_every_report_names_the_daemon_request_whose_answer_was_shown():
    uptake = Uptake()
    key, shown = uptake.shown("return x", "python", request=41)
    assert shown == Feedback("shown", 8, True, "python", 41)
    assert uptake.partially(key, 7) == Feedback("partial", 7, True, "python", 41)
    assert uptake.accepted(key) == Feedback("accepted", 1, False, "python", 41)
    assert decode_request(pack(shown)[4:]) == shown, "and it travels the wire"


def test_status_counts_by_language_and_over_the_last_hour():
    metrics = Metrics()
    metrics.feedback(Feedback("shown", 10, language="python"), now=0.0)
    metrics.feedback(Feedback("accepted", 10, language="python"), now=10.0)
    metrics.feedback(Feedback("shown", 4, language="lua"), now=3000.0)
    metrics.feedback(Feedback("shown", 6), now=3700.0)                     # no languageId given
    assert metrics.uptake_within(now=3700.0) == Totals(shown=2, chars_shown=10), "the first two are over an hour old"
    assert metrics.uptake() == Totals(shown=3, accepted=1, taken=1, chars_shown=20, chars_taken=10)
    assert metrics.by_language["python"].rate() == "100%" and metrics.by_language["lua"].rate() == "0%"
    assert set(metrics.by_language) == {"python", "lua", "unknown"}
    for n in range(100):                                                  # an editor inventing names
        metrics.feedback(Feedback("shown", 1, language=f"lang{n}"), now=3700.0)
    assert len(metrics.by_language) == 65 and metrics.by_language["other"].shown == 100 - 61
    assert metrics.uptake().shown == 103, "nothing lost to the cap"


def at(prefix: str, suffix: str = "\n") -> Cursor:
    return Cursor(prefix, suffix, prefix.count("\n"), len(prefix.rsplit("\n", 1)[-1]), "", True)


def test_a_suggestion_typed_over_or_escaped_is_dismissed_once_with_what_was_left():
    uptake = Uptake()
    doc, other = "file:///a.py", "file:///b.py"
    a, shown_a = uptake.shown("return value", "python", 7, doc, at("def f():\n    "))
    assert uptake.moved(doc, at("def f():\n    ")) is None, "asked again where it was shown"
    assert uptake.moved(doc, at("def f():\n    ret")) is None, "typing its start continues it"
    assert uptake.moved(other, at("x")) is None, "another document's request leaves it alone"
    assert uptake.partially(a, 7) is not None
    assert uptake.moved(doc, at("def f():\n    return value")) is None, "typed to its end: continued"
    typed_over = uptake.moved(doc, at("def f():\n    return None"))
    assert typed_over == Feedback("dismissed", 5, False, "python", 7, "typed over"), "the 5 not taken"
    assert uptake.moved(doc, at("def f():\n    return Nonesense")) is None, "once"
    assert uptake.dismissed(a, "escaped") is None and uptake.accepted(a) is not None

    b, shown_b = uptake.shown("pass", "python", 8, doc, at("if x:\n    "))
    escaped = uptake.dismissed(b, "escaped")
    assert escaped == Feedback("dismissed", 4, True, "python", 8, "escaped")
    assert uptake.moved(doc, at("elsewhere")) is None, "escaped, it is settled: not typed over too"
    d, _ = uptake.shown("y", "python", 10, other, at("x"))
    uptake.forget(other)   # closed: nothing is open there, and nothing is reported of it
    assert other not in uptake.open and uptake.moved(other, at("z")) is None
    c, shown_c = uptake.shown("x + 1", "python", 9, doc, at("y = "))
    assert uptake.accepted(c) is not None
    assert uptake.dismissed(c, "escaped") is None and uptake.moved(doc, at("z")) is None, "taken whole: never left"
    totals = summed([shown_a, shown_b, shown_c, typed_over, escaped])
    assert (totals.dismissed, totals.escaped) == (2, 1)
    assert totals.summary().endswith("; 2 dismissed (1 escaped)")
    assert decode_request(pack(escaped)[4:]) == escaped, "and it travels the wire"


def test_a_dismissal_names_its_item_as_a_partial_accept_does():
    item = {"insertText": "abc", "command": {"title": "t", "command": ACCEPT, "arguments": ["s4"]}}
    assert item_id({"item": item}, DISMISS) == "s4"
    for bad in ({"item": {"insertText": "abc"}}, None, {"item": {"command": {"arguments": []}}}):
        with pytest.raises(UptakeError, match=DISMISS):
            item_id(bad, DISMISS)


def test_reports_that_name_no_suggestion_or_no_length_are_refused():
    uptake = Uptake()
    key, _ = uptake.shown("x = 1")
    for bad in (None, 3, "s999", ["s1"]):
        with pytest.raises(UptakeError):
            uptake.accepted(bad)
    for length in (-1, "3", None, True, 2.5):
        with pytest.raises(UptakeError):
            uptake.partially(key, length)
    for _ in range(KEEP):
        uptake.shown("y")
    with pytest.raises(UptakeError, match="too old"):
        uptake.accepted(key)


def test_partial_params_read_copilots_shape_from_dicts_and_objects():
    item = {"insertText": "abc", "command": {"title": "t", "command": ACCEPT, "arguments": ["s4"]}}
    assert partial_params({"item": item, "acceptedLength": 2}) == ("s4", 2)
    with pytest.raises(UptakeError):
        partial_params({"item": {"insertText": "abc"}, "acceptedLength": 2})
    with pytest.raises(UptakeError):
        partial_params(None)


def test_feedback_travels_the_wire_and_a_bad_one_is_an_error_not_a_crash():
    assert decode_request(pack(Feedback("partial", 5, False))[4:]) == Feedback("partial", 5, False)
    for bad in (b'{"type": "feedback", "event": "liked", "chars": 1}',
                b'{"type": "feedback", "event": "shown", "chars": -4}'):
        error = decode_request(bad)
        assert error.code == "invalid" and error.id is None


async def status(home):
    client = await Client.connect(load_config(home.config_path))
    try:
        return await client.status()
    finally:
        await client.close()


async def until_counted(home, expected: Totals, timeout: float = 30) -> Totals:
    """The daemon's totals once they equal `expected` (feedback is a notice: it lands a little later)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (uptake := (await status(home)).uptake) != expected and loop.time() < deadline:
        await asyncio.sleep(0.1)
    return uptake


async def test_an_item_taken_whole_and_one_taken_in_part_reach_specd_status(editor, specd_env):
    type_text(editor, 2, 5, 4, "return")
    first = (await asyncio.wait_for(inline(editor, 5, 10), 120)).items[0]
    assert first.command.command == ACCEPT and len(first.command.arguments) == 1
    length = len(first.insert_text)
    await editor.workspace_execute_command_async(types.ExecuteCommandParams(ACCEPT, first.command.arguments))
    second = (await asyncio.wait_for(inline(editor, 5, 4), 120)).items[0]
    assert second.command.arguments != first.command.arguments, "each suggestion its own id"
    editor.protocol.notify(PARTIAL, {"item": {"insertText": second.insert_text,
                                              "command": {"title": "", "command": ACCEPT,
                                                          "arguments": second.command.arguments}},
                                     "acceptedLength": 1})
    editor.protocol.notify(PARTIAL, {"item": {}, "acceptedLength": 1})   # names no suggestion: logged
    expected = Totals(shown=2, accepted=1, partial=1, taken=2, chars_shown=length + len(second.insert_text),
                      chars_taken=length + 1)
    assert await until_counted(specd_env, expected) == expected
    with pytest.raises(JsonRpcException):
        await editor.workspace_execute_command_async(types.ExecuteCommandParams("specd.other", []))
    await editor.workspace_execute_command_async(types.ExecuteCommandParams(ACCEPT, ["nothing-sent"]))
    out = specd_env.specd("status").stdout
    assert "since start: 2 shown, 2 taken (100%): 1 whole, 1 in part" in out, out
    assert "last hour: 2 shown, 2 taken (100%)" in out and "by language: python 2/2 (100%)" in out, out
    now = await status(specd_env)
    assert now.uptake == expected and now.uptake_hour == expected, "a bad report counts nothing"
    assert now.uptake_languages == {"python": expected}
    trace = specd_env.specd("trace").stdout
    assert f"suggestions: {expected.summary()}" in trace, trace
    rows = trace.split("taken\n", 1)[1].splitlines()   # after the per-request table's head
    assert sum(int(row.split()[-1]) for row in rows) == length + 1, "what was taken, by the request that answered"
