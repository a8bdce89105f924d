"""Token healing (decoding/healing.py): which prefixes are healed, which tokens agree with the text
left out, and completions that spell it first, shown without it, identical across drafters and to
Hugging Face `generate` under the same constraint."""

from __future__ import annotations

import pytest
import torch

from specd.decoding.healing import Healer
from specd.decoding.prompt import PromptBuilder, detect_template, heals
from specd.decoding.request import CompletionRequest, Sampler
from tests.conftest import tiny_engine
from tests.decoding.test_exactness import REPEATING, served

# Cut inside a word, after a lone space and after an indent: each ends where a token may go on.
CUT = {"word": REPEATING[0] + "    return a / b\n\n\ndef ad",
       "space": REPEATING[0] + "    return a / b\n\n\nx = ",
       "indent": REPEATING[0] + "    "}


@pytest.fixture(scope="module")
def engine(tiny_target, tiny_draft):
    return tiny_engine(tiny_target, tiny_draft, pace_drafts=False)


def test_a_prefix_is_healed_where_it_ends_in_a_word_or_a_space():
    assert all(heals(p) for p in ("x = fo", "x = foo_1", "x = ", "\tif\t", "    "))
    assert not any(heals(p) for p in ("", "f(", "x =\n", "a.", "é"))


def test_every_token_that_agrees_with_the_text_is_allowed_and_no_other(engine):
    healer = Healer(engine.target.tokenizer)
    special = set(engine.target.tokenizer.all_special_ids)
    for rest in ("d", "de", "Ġre", "ĠĠĠ", "value", "ĊĠĠĠ"):
        agree = {i for i, piece in enumerate(healer.pieces) if piece and i not in special
                 and (piece.startswith(rest) or rest.startswith(piece))}
        assert set(healer.allowed(rest).tolist()) == agree and agree, rest
    assert healer.after("ĠĠĠ", healer.pieces.index("Ġ")) == "ĠĠ", "a shorter token leaves the rest to spell"


def test_the_prompt_leaves_the_healed_token_out(engine):
    tokenizer = engine.target.tokenizer
    healing = PromptBuilder(tokenizer, detect_template(tokenizer), engine.settings.budget, heal=True)
    plain = PromptBuilder(tokenizer, detect_template(tokenizer), engine.settings.budget)
    for prefix in CUT.values():
        healed, whole = healing.build(prefix, ""), plain.build(prefix, "")
        assert whole.heal_id is None and healed.heal_id == whole.prefix_ids[-1]
        assert healed.prefix_ids == whole.prefix_ids[:-1]
        assert healed.ids == [i for n, i in enumerate(whole.ids) if n != len(whole.ids) - 3], \
            "the prompt is the same but for that token (before the suffix mark and the middle mark)"
    assert healing.build(REPEATING[0], "").heal_id is None, "a prefix ending in a line end is not healed"


@pytest.mark.parametrize("cut", CUT)
def test_a_healed_completion_spells_the_cut_text_first_and_shows_what_follows(engine, cut):
    prefix = CUT[cut]
    heal_id = engine.build_prompt(prefix).heal_id
    healed_text = engine.target.tokenizer.decode([heal_id])
    result = engine.complete(CompletionRequest(prefix=prefix, suffix="", drafter="none", document=f"heal-{cut}",
                                               max_tokens=12, stop_at_suffix=False))
    decoded = engine.target.tokenizer.decode(result.tokens)
    assert decoded.startswith(healed_text), f"{decoded!r} spells {healed_text!r} first"
    assert result.text == decoded[len(healed_text):], "and shows only what follows"
    if cut == "word":
        assert (prefix + result.text).startswith(REPEATING[0] + "    return a / b\n\n\ndef ad")


@pytest.mark.parametrize("cut", CUT)
def test_every_drafter_gives_plain_healed_greedy(engine, cut):
    ask = lambda drafter: engine.complete(CompletionRequest(  # noqa: E731
        prefix=CUT[cut], suffix=REPEATING[1], drafter=drafter, document=f"{cut}-{drafter}", max_tokens=30,
        stop_at_suffix=False))
    plain = ask("none")
    assert plain.tokens, "something to compare"
    for drafter in served(engine):
        result = ask(drafter)
        assert (result.tokens, result.text) == (plain.tokens, plain.text), f"{drafter} diverged from healed greedy"


def test_under_sampling_every_drafter_spells_the_cut_text(engine):
    heal = engine.target.tokenizer.decode([engine.build_prompt(CUT["word"]).heal_id])
    for drafter in served(engine):
        for seed in range(8):
            result = engine.complete(CompletionRequest(
                prefix=CUT["word"], suffix="", drafter=drafter, document=f"sampled-{drafter}", max_tokens=6,
                stop_at_suffix=False, sampler=Sampler(temperature=1.0, seed=seed)))
            decoded = engine.target.tokenizer.decode(result.tokens)
            assert decoded.startswith(heal) or heal.startswith(decoded), (drafter, seed, decoded)


def test_healed_greedy_is_hugging_face_greedy_under_the_same_constraint(tiny_target):
    """In float32, plain healed decoding is `generate` told which tokens agree with the text left out."""
    engine = tiny_engine(tiny_target, dtype="fp32")
    healer = Healer(engine.target.tokenizer)
    prompt = engine.build_prompt(CUT["word"], REPEATING[1])
    ids = prompt.ids
    everything = list(range(engine.target.model.config.vocab_size))

    def agreeing(_batch: int, so_far: torch.Tensor) -> list[int]:
        rest = healer.pieces[prompt.heal_id]
        for token in so_far[len(ids):].tolist():
            rest = healer.after(rest, token) or ""
        return healer.allowed(rest).tolist() if rest else everything

    plain = engine.complete(CompletionRequest(prefix=CUT["word"], suffix=REPEATING[1], drafter="none",
                                              document="fp32-heal", max_tokens=30, stop_at_suffix=False))
    with torch.inference_mode():
        out = engine.target.model.generate(torch.tensor([ids], device=engine.target.device), max_new_tokens=30,
                                           do_sample=False, eos_token_id=sorted(engine.stop_ids),
                                           pad_token_id=engine.pad_id, prefix_allowed_tokens_fn=agreeing)
    reference = out[0, len(ids):].tolist()
    stop = next((i for i, t in enumerate(reference) if t in engine.stop_ids), len(reference))
    assert plain.tokens == reference[:stop]
