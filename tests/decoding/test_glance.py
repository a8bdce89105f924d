"""A place not yet read is answered from a glance (the prefix window nearest the cursor), and
once the whole prompt is read, from that again: each answer is the target's own for its prompt."""

from __future__ import annotations

from specd.decoding.request import CompletionRequest
from tests.conftest import tiny_engine

LONG_PREFIX = "".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(40)) + "def g(y):\n    return"
GLANCE = 48


def request(**fields) -> CompletionRequest:
    fields = {"prefix": LONG_PREFIX, "drafter": "lookup", "max_tokens": 12, "stop_at_suffix": False,
              "document": "doc", "glance": True, **fields}
    return CompletionRequest(**fields)


def test_a_cold_place_glances_then_takes_the_whole_prompt_once_read(tiny_target, tmp_path):
    engine = tiny_engine(tiny_target, cache_dir=tmp_path, glance_tokens=GLANCE)
    whole = engine.build_prompt(LONG_PREFIX)
    assert len(whole.ids) > 2 * GLANCE, "the test's prompt is longer than a glance"

    glanced = engine.complete(request())
    assert glanced.outcome == "done" and glanced.stats.glance
    assert glanced.stats.prompt_tokens <= GLANCE + 3, "the prefix window of a glance, and the FIM marks"
    # the target's own completion of that prompt: an engine whose whole window is a glance's
    short = tiny_engine(tiny_target, cache_dir=tmp_path, prefix_tokens=GLANCE, glance_tokens=0)
    assert glanced.tokens == short.complete(request(document="other")).tokens

    read = engine.complete(request(glance=False, max_tokens=1))   # the daemon's read on its idle lane
    assert not read.stats.glance and read.stats.prompt_tokens == len(whole.ids)
    documents = engine.cached_documents()

    after = engine.complete(request())
    assert not after.stats.glance and after.stats.reused_tokens == len(whole.ids) - 1
    assert engine.cached_documents() == documents - 1, "the glance's cache is dropped once the prompt is read"
    cold = tiny_engine(tiny_target, cache_dir=tmp_path, glance_tokens=0).complete(request(document="cold"))
    assert after.tokens == cold.tokens, "the same text as the whole prompt read in one go"


def test_a_place_partly_read_glances_until_what_is_left_fits_a_chunk(tiny_target, tmp_path):
    chunk = 8
    engine = tiny_engine(tiny_target, cache_dir=tmp_path, glance_tokens=GLANCE, prefill_chunk=chunk)
    whole = engine.build_prompt(LONG_PREFIX)
    assert engine.complete(request()).stats.glance, "a cold place glances: the glance's cache is warm"

    # the idle lane has read all but the last two functions: fewer tokens than a glance are left
    engine.complete(request(prefix=LONG_PREFIX[:LONG_PREFIX.rindex("def f39")], glance=False, max_tokens=1))
    left = len(whole.ids) - engine._pool.peek("doc").target.common_prefix(whole.ids)
    assert chunk < left < GLANCE
    partly = engine.complete(request())
    assert partly.stats.glance and partly.stats.prefilled_tokens <= 1, "the warm glance, not the tokens left"

    # all but the cursor's line is read: what is left fits a chunk, and the whole prompt answers
    engine.complete(request(prefix=LONG_PREFIX[:LONG_PREFIX.rindex("    return")], glance=False, max_tokens=1))
    left = len(whole.ids) - engine._pool.peek("doc").target.common_prefix(whole.ids)
    assert 0 < left <= chunk
    read = engine.complete(request())
    assert not read.stats.glance and read.stats.reused_tokens == len(whole.ids) - left


def test_a_keystroke_in_a_read_place_never_glances(tiny_target, tmp_path):
    engine = tiny_engine(tiny_target, cache_dir=tmp_path, glance_tokens=GLANCE)
    engine.complete(request(glance=False))
    typed = engine.complete(request(prefix=LONG_PREFIX + " x"))
    assert not typed.stats.glance and typed.stats.reused_tokens > GLANCE


def test_only_a_request_that_may_glances(tiny_target, tmp_path):
    engine = tiny_engine(tiny_target, cache_dir=tmp_path, glance_tokens=GLANCE)
    assert not engine.complete(request(glance=False)).stats.glance
    assert not tiny_engine(tiny_target, cache_dir=tmp_path, glance_tokens=0).complete(request()).stats.glance


def test_a_glance_is_the_nearest_lines_of_the_prefix(tiny_target, tmp_path):
    engine = tiny_engine(tiny_target, cache_dir=tmp_path, glance_tokens=GLANCE)
    prompt = engine.build_prompt(LONG_PREFIX)
    glance = engine._builder.build(LONG_PREFIX, "", prefix_budget=GLANCE)
    healed = [] if glance.heal_id is None else [glance.heal_id]   # the prefix's last token, spelled by the completion
    text = engine.target.tokenizer.decode(glance.prefix_ids + healed)
    assert 0 < len(glance.prefix_ids) <= GLANCE < len(prompt.prefix_ids)
    assert LONG_PREFIX.endswith(text) and text.startswith("def "), "whole lines, up to the cursor"
