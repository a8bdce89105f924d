"""An edit folded into the first verify pass, and completions that do not depend on the history
that led to a text: a cold request, edits, and a request cancelled halfway give the same."""

from __future__ import annotations

import pytest

from specd.decoding import qkernel
from specd.decoding.blocks import BlockLinear
from specd.decoding.qlinear import Int4Linear
from specd.decoding.request import CompletionRequest
from tests.conftest import tiny_engine

TEXT = "def total(items):\n    result = 0\n    for item in items:\n        result += item\n    return "
SUFFIX = "\n\n\ndef mean(items):\n    return total(items) / len(items)\n"


@pytest.fixture(scope="module", params=["int4", "gguf"])
def int4(request, tiny_target, tmp_path_factory):
    """A target with quantized weights: torch's int4 kernel (bf16 activations), or specd's block
    kernels (Q8_0 here: the tiny model has no GGUF blocks; float32 activations)."""
    if request.param == "gguf" and not qkernel.available():
        pytest.skip("specd's kernels were not built here")
    return tiny_engine(tiny_target, cache_dir=tmp_path_factory.mktemp("q"), quantize=request.param, width=4)


def _complete(engine, prefix, document, drafter="none", cancelled=lambda: False, reuse=True, **kw):
    return engine.complete(CompletionRequest(prefix, SUFFIX, document=document, max_tokens=16, drafter=drafter,
                                             reuse=reuse, suffix_tokens=8, **kw), cancelled)


def _passes(engine, run) -> tuple[object, int]:
    """`run()`'s result and how many forward passes of the target it took."""
    count = [0]
    hook = engine.target.model.register_forward_pre_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    try:
        return run(), count[0]
    finally:
        hook.remove()


def test_quantized_weights_fold_edits_and_need_no_padding(int4):
    layer = int4.target.model.model.layers[0].mlp.up_proj
    assert isinstance(layer, Int4Linear if int4.target.weights == "int4" else BlockLinear)
    # the quantized kernels compute a row from its own input alone, and attention pads its query blocks:
    # every width gives the same bits, and a prompt's tokens may share a pass with the draft
    assert int4.low_width == 1 and int4.folds
    # block weights (float32) attend through specd's kernel, int4's bf16 through torch's
    lean = getattr(int4.target.model, "specd_lean", None)
    assert (lean is not None and lean.own_attention) == (int4.target.weights == "gguf")


@pytest.mark.parametrize("drafter", ["none", "lookup"])
def test_a_folded_edit_completes_as_a_cold_request(int4, drafter):
    cold = _complete(int4, TEXT, "cold", drafter, reuse=False)
    _complete(int4, TEXT[:-12], "typed", drafter)
    edited, passes = _passes(int4, lambda: _complete(int4, TEXT, "typed", drafter))  # 12 characters typed
    assert 0 < edited.stats.prefilled_tokens <= int4.settings.prefill_chunk
    assert passes == edited.stats.target_forwards, "the edit was computed in the first verify pass, no prefill pass"
    assert edited.tokens == cold.tokens and edited.text == cold.text


def test_the_history_of_a_text_does_not_change_its_completion(int4):
    """(a) cold, (b) an earlier text then edits, one character at a time and a deletion,
    (c) a request cancelled mid-prefill then resumed: the same tokens every time."""
    cold = _complete(int4, TEXT, "a", reuse=False)
    for end in range(len(TEXT) - 20, len(TEXT) + 1, 4):
        _complete(int4, TEXT[:end], "b")
    _complete(int4, TEXT + "xy", "b")                                    # typed past, then deleted
    edited = _complete(int4, TEXT, "b")
    passes = [0]
    hook = int4.target.model.register_forward_pre_hook(lambda *_: passes.__setitem__(0, passes[0] + 1))
    try:  # cancelled once its second prefill chunk has begun (the lean forward asks between layers too)
        cancelled = _complete(int4, TEXT, "c", cancelled=lambda: passes[0] >= 2, reuse=False)
    finally:
        hook.remove()
    assert cancelled.outcome == "cancelled"
    resumed = _complete(int4, TEXT, "c")
    assert resumed.stats.reused_tokens > 0, "the cancelled request's prefill was kept"
    assert edited.tokens == cold.tokens == resumed.tokens


def test_a_cancelled_decodes_tokens_draft_the_next_request(int4):
    whole = _complete(int4, TEXT, "d", reuse=False)
    steps, passes = iter(range(1000)), [0]
    hook = int4.target.model.register_forward_pre_hook(lambda *_: passes.__setitem__(0, passes[0] + 1))
    # a few tokens in: the lean forward (gguf) also asks between layers, so there the count is of passes
    lean = hasattr(int4.target.model, "specd_lean")
    cancel = (lambda: passes[0] >= 4) if lean else (lambda: next(steps) >= 4)
    try:
        partial = _complete(int4, TEXT, "e", cancelled=cancel, reuse=False)
    finally:
        hook.remove()
    assert partial.outcome == "cancelled" and 0 < len(partial.tokens) < len(whole.tokens)
    again = _complete(int4, TEXT, "e", drafter="lookup")
    assert again.tokens == whole.tokens
    assert sum(again.stats.accepted.values()) >= len(partial.tokens) - 1, \
        "the cancelled tokens were proposed and accepted"
