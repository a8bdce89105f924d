"""On the real built-in pair: what only real models show. Slow; the models come from the cache
that `make test` fills with `specd models pull`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from specd.daemon.config import Config
from specd.daemon.runtime import build_engine
from specd.decoding.forward import prefill, step
from specd.decoding.kvcache import KVCache
from specd.decoding.registry import DRAFTERS
from specd.decoding.request import CompletionRequest
from specd.models.heads import Plan, load_heads, train_heads
from specd.models.integrity import is_converted

pytestmark = pytest.mark.real
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """Every drafter: the draft model asked for (the default, lookup, loads none), and heads from a
    short real run of `specd heads train`'s work, kept in a folder of the test's own (a
    machine's own trained heads stay out of it)."""
    built = build_engine(Config(), drafters=DRAFTERS)
    cache = tmp_path_factory.mktemp("heads")
    record = train_heads(built.target, cache, Plan(count=2, tokens=1000, window=128, epochs=1), lambda line: None)
    assert record["train_tokens"] >= 1000 and len(record["accuracy"]) == 2
    return built.with_heads(load_heads(cache, built.target))


def test_both_models_load_from_the_converted_cache(engine):
    for loaded in (engine.target, engine.draft):
        assert loaded.spec.kind == "builtin" and is_converted(loaded.folder)
    assert engine.target.spec.ref == "qwen2.5-coder-1.5b-instruct"
    assert engine.draft.spec.ref == "qwen2.5-coder-0.5b-instruct"


def test_fibonacci_body_is_real_python(engine):
    prefix = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n'
    result = engine.complete(CompletionRequest(prefix=prefix, suffix="    return a\n", max_tokens=32, document="fib"))
    assert result.outcome == "done"
    body = result.text.replace(" ", "")
    assert "a,b=b,a+b" in body or ("a=b" in body and "b=" in body), result.text
    compile(prefix + result.text + "    return a\n", "fib.py", "exec")


def test_every_drafter_gives_plain_greedy_on_real_cases(engine):
    cases = [json.loads(line) for line in (ROOT / "bench" / "cases.jsonl").read_text().splitlines()[:3]]
    accepted = 0
    for i, case in enumerate(cases):
        plain = engine.complete(CompletionRequest(prefix=case["prefix"], suffix=case["suffix"], drafter="none",
                                                  max_tokens=24, document=f"real{i}", stop_at_suffix=False))
        for drafter in DRAFTERS:
            result = engine.complete(CompletionRequest(prefix=case["prefix"], suffix=case["suffix"], drafter=drafter,
                                                       max_tokens=24, document=f"real{i}", stop_at_suffix=False))
            assert result.tokens == plain.tokens, f"case {i}: {drafter} diverged"
            accepted += sum(result.stats.accepted.values())
    assert accepted > 0


def test_the_measured_low_width_gives_the_full_widths_bits_along_a_real_decode(engine):
    # Near-ties are rare, so equal text on a few cases proves little; equal bits at every step
    # does. A probe of short cache lengths once claimed 1-row passes here, which differ from
    # 8-row ones at 2 of 3 steps of a 900-token prompt (never at a 48-token one).
    cases = [json.loads(line) for line in (ROOT / "bench" / "cases.jsonl").read_text().splitlines()]
    model, width, pad = engine.target.model, engine.width, engine.pad_id
    ids = max((engine.build_prompt(c["prefix"], c["suffix"]).ids for c in cases), key=len)
    assert len(ids) > 500, "the case must fill several attention blocks"
    cache = KVCache(model, engine.settings.capacity)
    prefill(model, cache, ids[:-1], 256, lambda: False)
    pending = ids[-1]
    for _ in range(6):
        base = len(cache.tokens)
        reference = step(model, cache, [pending], width, pad)[0]
        cache.truncate(base)
        for narrower in range(engine.low_width, width):
            got = step(model, cache, [pending], narrower, pad)[0]
            cache.truncate(base)
            assert torch.equal(got, reference), f"width {narrower} parts from {width} at {base} cached"
        step(model, cache, [pending], width, pad)
        pending = int(reference.argmax())


def test_the_history_of_a_text_does_not_change_its_completion(engine):
    """Issue 10's history test: the same final text reached (a) cold, (b) from an earlier text by
    typing and a deletion, (c) by a request cancelled mid-prefill and resumed. The completions
    must be identical, token for token: the prompt's keys and values do not depend on how it
    was chunked (README: How it stays exact)."""
    source = (ROOT / "bench" / "typing" / "shlex.py").read_text().splitlines(keepends=True)
    text = "".join(source[:40])
    cut = text.rindex("\n", 0, len(text) - 1) + 1
    prefix, suffix = text[:cut] + "        ", "".join(source[41:60])
    target = engine.target.model
    up = target.model.layers[0].mlp.up_proj
    from specd.decoding import qkernel

    assert type(up).__name__ == "BlockLinear" and up.kind == qkernel.layout(qkernel.Q4_K), \
        "the CPU default: the file's own Q4_K blocks, laid out as the kernels in use read them"
    assert hasattr(target, "specd_lean"), "run by the lean forward (decoding/lean.py)"

    def complete(document, prefix=prefix, cancelled=lambda: False, reuse=True):
        return engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, document=document, max_tokens=12,
                                                 drafter="lookup", reuse=reuse), cancelled)

    cold = complete("history:a", reuse=False)
    assert cold.outcome == "done" and cold.tokens
    for end in (len(prefix) - 9, len(prefix) - 5, len(prefix) - 2):    # typed toward the final text
        complete("history:b", prefix[:end])
    complete("history:b", prefix + "x")                               # one too many, then deleted
    edited = complete("history:b")
    passes = [0]
    hook = engine.target.model.register_forward_pre_hook(lambda *_: passes.__setitem__(0, passes[0] + 1))
    try:  # cancelled once its second prefill chunk has begun: the lean forward gives that one up between layers
        half = complete("history:c", cancelled=lambda: passes[0] >= 2, reuse=False)
    finally:
        hook.remove()
    assert half.outcome == "cancelled" and half.stats.prefilled_tokens > 0, "cancelled after one prefill chunk"
    resumed = complete("history:c")
    assert resumed.stats.reused_tokens == half.stats.prefilled_tokens
    assert edited.tokens == cold.tokens, (engine.target.tokenizer.decode(edited.tokens), cold.text)
    assert resumed.tokens == cold.tokens, (resumed.text, cold.text)
