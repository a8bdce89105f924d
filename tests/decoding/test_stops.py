"""Stops: stop tokens, the token limit, single-line, suffix repeat, the deadline and doubt."""

from __future__ import annotations

import time

import pytest
from transformers import AutoTokenizer

from specd.decoding.stops import Stopper, StopRules


@pytest.fixture(scope="module")
def tokenizer(tiny_target):
    return AutoTokenizer.from_pretrained(tiny_target)


def feed(tokenizer, text: str, **rules) -> Stopper:
    ids = tokenizer.encode(text, add_special_tokens=False)
    stopper = Stopper(tokenizer, StopRules(frozenset({tokenizer.eos_token_id}), rules.pop("max_tokens", 500), **rules))
    for token in ids:
        if stopper.push(token):
            break
    return stopper


def test_stop_token_is_not_kept(tokenizer):
    s = Stopper(tokenizer, StopRules(frozenset({tokenizer.eos_token_id}), 50))
    for token in tokenizer.encode("x = 1", add_special_tokens=False):
        assert not s.push(token)
    assert s.push(tokenizer.eos_token_id)
    assert s.text == "x = 1" and s.reason == "stop_token"


def test_single_line_ends_at_the_first_line_end(tokenizer):
    s = feed(tokenizer, "total += 1\n    return total\n", single_line=True)
    assert s.text == "total += 1" and s.reason == "end_of_line"


def test_a_line_repeating_the_suffix_is_cut(tokenizer):
    s = feed(tokenizer, "    a, b = b, a + b\n    return a\n\nprint(1)\n", suffix_text="\n    return a\n")
    assert s.text == "    a, b = b, a + b\n" and s.reason == "repeats_suffix"


def test_token_limit(tokenizer):
    s = feed(tokenizer, "a b c d e f g h i j k l m n o p", max_tokens=3)
    assert len(s.tokens) == 3 and s.reason == "max_tokens"


def test_deadline_ends_at_the_next_line_end(tokenizer):
    s = feed(tokenizer, "first = 1\nsecond = 2\nthird = 3\n", deadline=time.monotonic() - 1)
    assert s.text == "first = 1\n" and s.reason == "deadline"


def test_past_the_cut_an_unfinished_first_line_ends_at_the_next_word_end(tokenizer):
    s = feed(tokenizer, "result = compute(alpha, beta)\nnext_line = 2\n", cut=time.monotonic() - 1)
    assert s.reason == "cut" and s.text.strip() and "\n" not in s.text
    assert not (s.text[-1].isalnum() or s.text[-1] == "_"), "it ends where a word ended"
    assert "result = compute(alpha, beta)\n".startswith(s.text), "a prefix of the text"


def test_before_the_cut_nothing_is_cut(tokenizer):
    s = feed(tokenizer, "result = compute(alpha, beta)\n", cut=time.monotonic() + 60, max_tokens=500)
    assert s.reason is None and s.text == "result = compute(alpha, beta)\n"


def test_the_cut_never_ends_a_later_line(tokenizer):
    s = feed(tokenizer, "\nvalue = 1\n", cut=time.monotonic() - 1)
    assert s.reason is None and s.text == "\nvalue = 1\n", "past the first line the deadline decides"


def test_doubt_ends_before_the_first_unsure_token_once_text_shows(tokenizer):
    ids = tokenizer.encode("    value = compute(alpha)", add_special_tokens=False)
    s = Stopper(tokenizer, StopRules(frozenset(), 50, min_probability=0.5))
    assert not s.push(ids[0], 0.1), "nothing visible yet: an unsure first token is still shown"
    for token in ids[1:3]:
        assert not s.push(token, 0.9)
    assert s.push(ids[3], 0.49)
    assert s.reason == "unsure" and s.tokens == ids[:3], "the unsure token is not kept"
    assert s.text == tokenizer.decode(ids[:3])


def test_doubt_before_any_text_ends_the_completion_empty(tokenizer):
    """min_first_probability: whitespace and the first visible token are held to it; once text
    shows, min_probability takes over."""
    ids = tokenizer.encode("\n    value = compute(alpha)", add_special_tokens=False)
    visible = next(i for i in range(len(ids)) if tokenizer.decode(ids[:i + 1]).strip())
    rules = StopRules(frozenset(), 50, min_probability=0.2, min_first_probability=0.5)
    s = Stopper(tokenizer, rules)
    assert s.push(ids[0], 0.4) and (s.reason, s.text, s.tokens) == ("unsure", "", []), "nothing shown"
    s = Stopper(tokenizer, rules)
    for token in ids[:visible]:
        assert not s.push(token, 0.6)
    assert s.push(ids[visible], 0.49), "the first visible token is held to min_first_probability"
    assert s.reason == "unsure" and not s.text.strip()
    s = Stopper(tokenizer, rules)
    for token in ids[:visible + 1]:
        assert not s.push(token, 0.5)
    assert not s.push(ids[visible + 1], 0.3), "once text shows, only min_probability (0.2) ends it"
    assert rules.doubts and not StopRules(frozenset(), 50).doubts


def test_no_doubt_without_a_least_probability(tokenizer):
    s = Stopper(tokenizer, StopRules(frozenset(), 50))
    for token in tokenizer.encode("x = 1", add_special_tokens=False):
        assert not s.push(token, 0.0)
    assert s.text == "x = 1" and s.reason is None
