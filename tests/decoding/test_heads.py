"""The `heads` drafter on tiny models: where its hidden state comes from, what untrained heads
guess, and that it drafts (its exactness is test_exactness's, which runs every drafter)."""

from __future__ import annotations

import pytest
import torch

from specd.decoding.forward import prefill, step
from specd.decoding.heads import Heads
from specd.decoding.kvcache import KVCache
from specd.decoding.request import CompletionRequest
from specd.models.heads import output_rows
from tests.conftest import seeded_heads, tiny_engine
from tests.decoding.test_exactness import REPEATING


@pytest.fixture(scope="module")
def engine(tiny_target):
    return tiny_engine(tiny_target, dtype="fp32")


def test_a_pass_leaves_its_rows_and_a_truncation_below_them_makes_them_stale(engine):
    model = engine.target.model
    ids = engine.build_prompt(*REPEATING).ids
    cache = KVCache(model, engine.settings.capacity)
    prefill(model, cache, ids[:-1], 16, lambda: False)
    rows = cache.rows
    assert rows is not None and rows.first == len(ids) - 2 and rows.ids == [ids[-2]]
    assert rows.at(len(ids) - 2, cache.tokens) is not None
    logits = step(model, cache, [ids[-1], 5, 6], engine.width, engine.pad_id)
    first = len(ids) - 1
    assert cache.rows.first == first and cache.rows.ids[:3] == [ids[-1], 5, 6]
    # the row of the pending token predicted what the pass's logits say: it is the output layer's input
    with torch.inference_mode():
        assert torch.allclose(model.lm_head(cache.rows.hidden[:1]), logits[:1], atol=1e-5)
    assert cache.rows.at(first + 2, cache.tokens) is not None
    cache.truncate(first + 1)                      # the two drafted tokens rejected
    assert cache.rows.at(first + 2, cache.tokens) is None
    assert cache.rows.at(first, cache.tokens) is not None
    cache.tokens[first] = 7                        # another token at that position: stale too
    assert cache.rows.at(first, cache.tokens) is None


def test_heads_at_medusas_start_guess_what_the_target_says_next(engine):
    """Zero blocks leave the hidden state as it is: every head's guess is the target's own next
    token (Medusa starts there and learns the offsets)."""
    model = engine.target.model
    vocab = torch.arange(model.config.vocab_size)
    heads = Heads(3, model.config.hidden_size, vocab, output_rows(model, vocab))
    ids = engine.build_prompt(*REPEATING).ids
    cache = KVCache(model, engine.settings.capacity)
    prefill(model, cache, ids, 16, lambda: False)
    hidden = cache.rows.hidden[-1]
    tokens, probs = heads.guess(hidden)
    with torch.inference_mode():
        target = int(model.lm_head(hidden[None]).argmax())
    assert tokens == [target] * 3 and all(0 < p <= 1 for p in probs)


def test_output_rows_are_the_output_layers_weights(engine):
    model = engine.target.model
    vocab = torch.tensor([3, 17, 250])
    assert torch.allclose(output_rows(model, vocab), model.lm_head.weight[vocab].float().detach())


def test_the_heads_drafter_drafts_after_the_first_pass_and_changes_nothing(engine):
    request = CompletionRequest(prefix=REPEATING[0], suffix=REPEATING[1], drafter="heads", document="heads",
                                max_tokens=30, stop_at_suffix=False)
    plain = engine.complete(CompletionRequest(prefix=REPEATING[0], suffix=REPEATING[1], drafter="none",
                                              document="plain", max_tokens=30, stop_at_suffix=False))
    result = engine.complete(request)
    assert result.tokens == plain.tokens
    steps = result.stats.steps
    assert steps[0].proposed > 0, "the prompt's last prefill chunk gives the first proposal its state"
    assert sum(s.proposed for s in steps) > sum(s.accepted for s in steps) > 0


def test_without_heads_the_drafter_is_named_with_how_to_train_them(tiny_target):
    from specd.decoding.request import RequestError

    bare = tiny_engine(tiny_target, dtype="fp32", heads=None)
    assert "heads" not in bare.drafters
    with pytest.raises(RequestError, match="specd heads train"):
        bare.complete(CompletionRequest(prefix="x = 1\n", drafter="heads", document="d", max_tokens=4))


def test_seeded_heads_are_the_same_for_the_same_seed(engine):
    a, b = seeded_heads(engine.target, seed=4), seeded_heads(engine.target, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_the_calibration_learns_each_place_of_the_chain_by_how_sure_its_head_was():
    from specd.decoding.heads import Calibration

    calibration = Calibration(3, prior=0.5)
    for _ in range(40):  # head 1, sure of itself, right; head 2 unsure and wrong; head 3 never reached
        calibration.update([0.9, 0.1, 0.9], agreed=1, known=3)
    sure, unsure, third = calibration.chances([0.9, 0.1, 0.9])
    assert sure > 0.95 and unsure < 0.05 and third == 0.5
    assert calibration.chances([0.1, 0.9, 0.9])[:2] == [0.5, 0.5], "other bins learned nothing"
    calibration.update([0.9, 0.1, 0.9], agreed=1, known=1)  # one place decoded: place 2 not known
    assert calibration.chances([0.9, 0.1, 0.9])[1] == unsure
