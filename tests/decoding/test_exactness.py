"""Exactness is the contract: every drafter's greedy output equals plain greedy, token for token.
Every drafter the registry names (decoding/registry.py) is checked, so a new one is proven by
the suite that exists.

On tiny seeded models in bf16 (where a 1-row and a k-row pass can round differently), several
seeds and vocabulary sizes, prompts that repeat and prompts that do not, and drafters that are
always right and always wrong. Plain greedy itself is checked against Hugging Face `generate`.
"""

from __future__ import annotations

import random

import pytest
import torch

from specd.decoding.drafter import Proposal
from specd.decoding.engine import Engine
from specd.decoding.healing import Healer, Spelling
from specd.decoding.registry import DRAFTERS, HEAD_DRAFTERS
from specd.decoding.request import CompletionRequest
from tests.conftest import CHEAP, STEEP, hand_curve, tiny_engine
from tests.tiny import make_draft, make_model

REPEATING = ("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n"
             "def mul(a, b):\n    return a * b\n\n\ndef div(a, b):\n", "\n\nprint(add(1, 2))\n")


def scrambled(seed: int) -> tuple[str, str]:
    """Text that does not repeat itself: shuffled words, so lookup rarely finds anything."""
    words = "alpha beta gamma delta parse value index token branch return yield class".split()
    rng = random.Random(seed)
    text = " ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(60))
    return text[:200], text[200:]


class Oracle:
    """Proposes the true continuation (always right) or its neighbour (always wrong)."""

    def __init__(self, truth: list[int], prompt_len: int, vocab: int, wrong: bool):
        self.truth, self.prompt_len, self.vocab, self.wrong = truth, prompt_len, vocab, wrong
        self.name = "wrong" if wrong else "oracle"

    def begin(self, job) -> Oracle:
        return self  # its own proposer: it keeps no state

    def propose(self, context: list[int], limit: int) -> Proposal:
        done = len(context) - self.prompt_len  # tokens generated so far (incl. the pending one)
        tokens = self.truth[done: done + limit]
        if self.wrong:
            tokens = [(t + 1) % self.vocab for t in tokens]
        return Proposal(tokens, self.name)

    def observe(self, proposal, accepted, propose_s, step_s) -> None:
        pass


def request(prefix: str, suffix: str, drafter: str, document: str, max_tokens: int = 40):
    return CompletionRequest(prefix=prefix, suffix=suffix, drafter=drafter, document=document,
                             max_tokens=max_tokens, stop_at_suffix=False)


@pytest.fixture(scope="module", params=[(300, 3), (400, 4), (1000, 5)], ids=lambda p: f"vocab{p[0]}-seed{p[1]}")
def engine(request, tiny_dir):
    vocab, seed = request.param
    target = make_model(tiny_dir / f"exact-t{vocab}-{seed}", vocab_size=vocab, seed=seed)
    draft = make_draft(target, tiny_dir / f"exact-d{vocab}-{seed}", seed=seed + 100)
    engine = tiny_engine(target, draft, pace_drafts=False)  # the draft always proposes here
    cuda = engine.target.device.type != "cpu"  # the heads draft on a CPU only (decoding/heads.py)
    assert set(engine.drafters) == set(DRAFTERS) - (HEAD_DRAFTERS if cuda else set()), \
        "the engine makes every drafter the registry names"
    return engine


def served(engine) -> list[str]:
    """The registry's drafters this engine serves (all of them, on a CPU)."""
    return [name for name in DRAFTERS if name in engine.drafters]


@pytest.mark.parametrize("prompt", [REPEATING, scrambled(0), scrambled(1)],
                         ids=["repeating", "scrambled0", "scrambled1"])
def test_every_drafter_gives_plain_greedy_tokens(engine, prompt):
    prefix, suffix = prompt
    plain = engine.complete(request(prefix, suffix, "none", "plain"))
    assert plain.outcome == "done" and len(plain.tokens) > 0
    accepted = proposed = 0
    for drafter in served(engine):
        result = engine.complete(request(prefix, suffix, drafter, f"doc-{drafter}"))
        assert result.tokens == plain.tokens, f"{drafter} diverged from plain greedy"
        assert result.text == plain.text
        accepted += sum(result.stats.accepted.values())
        proposed += sum(result.stats.proposed.values())
    assert proposed > accepted > 0, "the drafts were neither all accepted nor all rejected"


@pytest.mark.parametrize("prompt", [REPEATING, scrambled(1)], ids=["repeating", "scrambled1"])
def test_every_drafter_ends_where_plain_greedy_doubts(engine, prompt):
    """engine.min_probability ends a completion at the target's first unsure token: where plain
    greedy ends it, whatever drafted the tokens and however wide the pass that scored them."""
    prefix, suffix = prompt
    whole = engine.complete(request(prefix, suffix, "none", "whole"))
    for least in (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9):  # the first that ends it part-way
        doubting = engine.with_settings(min_probability=least)
        plain = doubting.complete(request(prefix, suffix, "none", "plain"))
        if plain.stop_reason == "unsure" and len(plain.tokens) > 1:
            break
    else:
        pytest.fail("no least probability ended plain greedy part-way")
    assert whole.tokens[:len(plain.tokens)] == plain.tokens, "a prefix of the whole completion"
    for drafter in served(doubting):
        result = doubting.complete(request(prefix, suffix, drafter, f"doubt-{drafter}"))
        assert (result.tokens, result.stop_reason) == (plain.tokens, "unsure"), f"{drafter} ended elsewhere"


@pytest.mark.parametrize("prompt", [REPEATING, scrambled(1)], ids=["repeating", "scrambled1"])
def test_every_drafter_shows_nothing_where_plain_greedy_doubts_its_first_token(engine, prompt):
    """engine.min_first_probability: above the first visible token's probability the completion
    ends empty, whatever drafted; below it every drafter gives the whole completion."""
    prefix, suffix = prompt
    whole = engine.complete(request(prefix, suffix, "none", "first-whole"))
    built, tokenizer = engine.build_prompt(prefix, suffix), engine.target.tokenizer
    healed = "" if built.heal_id is None else tokenizer.decode([built.heal_id])   # spelled again, not shown
    visible = next(i for i in range(len(whole.tokens))
                   if tokenizer.decode(whole.tokens[:i + 1]).removeprefix(healed).strip())
    ids = built.ids + whole.tokens[:visible]  # rows that chose tokens 0..visible
    with torch.no_grad():
        logits = engine.target.model(torch.tensor([ids])).logits[0, -1 - visible:].float()
    healer = Healer(tokenizer) if built.heal_id is not None else None   # the rows still spelling: among those agreeing
    logits = Spelling(healer, built.heal_id).constrain(logits, whole.tokens[:visible + 1])
    chances = [torch.softmax(logits, -1)[i, t].item() for i, t in enumerate(whole.tokens[:visible + 1])]
    first = min(chances)
    above = min(0.999, first * 1.5)   # it ends before the first token below it: what comes before is blank,
    doubted = whole.tokens[:next(i for i, p in enumerate(chances) if p < above)]   # or the healed text spelled
    for least, expected in ((above, doubted), (first * 0.5, whole.tokens)):
        doubting = engine.with_settings(min_first_probability=least)
        for drafter in ["none", *served(doubting)]:
            result = doubting.complete(request(prefix, suffix, drafter, f"first-{drafter}-{least}"))
            assert result.tokens == expected, f"{drafter} at {least:.3f} (first visible token {first:.3f})"
            assert bool(result.text.strip()) == (expected == whole.tokens), "nothing shows where it doubts"


@pytest.mark.parametrize("shape", [STEEP, CHEAP], ids=["steep", "cheap"])
@pytest.mark.parametrize("prompt", [REPEATING, scrambled(0)], ids=["repeating", "scrambled0"])
def test_every_drafter_gives_plain_greedy_tokens_whatever_the_curve(engine, shape, prompt):
    """Dear wide passes (short proposals, passes padded up to the probe's narrowest width) or
    cheap ones (the pass filled): what is verified changes, never the tokens."""
    curved = Engine(engine.target, engine.draft, engine.settings, hand_curve(shape), heads=engine.heads)
    prefix, suffix = prompt
    plain = engine.complete(request(prefix, suffix, "none", "plain"))
    proposed = set()
    for drafter in served(curved):
        result = curved.complete(request(prefix, suffix, drafter, f"curved-{drafter}"))
        assert result.tokens == plain.tokens, f"{drafter} diverged from plain greedy"
        proposed |= {s.proposed for s in result.stats.steps}
    assert len(proposed - {0}) > 1, "proposals of several lengths were verified"


@pytest.mark.parametrize("wrong", [False, True], ids=["always-right", "always-wrong"])
def test_right_and_wrong_drafts_change_nothing(engine, wrong):
    prefix, suffix = REPEATING
    plain = engine.complete(request(prefix, suffix, "none", "plain"))
    prompt_len = len(engine.build_prompt(prefix, suffix).ids)
    oracle = Oracle(plain.tokens + [0] * 8, prompt_len, engine.target.model.config.vocab_size, wrong)
    engine.add_drafter(oracle)
    result = engine.complete(request(prefix, suffix, oracle.name, f"oracle-{wrong}"))
    assert result.tokens == plain.tokens
    steps = result.stats.steps
    if wrong:
        assert all(s.accepted == 0 for s in steps) and len(steps) == len(plain.tokens)
    else:  # every pass takes width - 1 drafts and the target's own next token
        assert sum(s.accepted for s in steps) >= len(plain.tokens) - len(steps)
        assert len(steps) <= -(-len(plain.tokens) // engine.width) + 1


def test_reused_cache_gives_the_same_tokens(engine):
    """A second call on the same document reuses the prompt's KV and decodes the same."""
    prefix, suffix = REPEATING
    first = engine.complete(request(prefix, suffix, "hybrid", "same-doc"))
    again = engine.complete(request(prefix, suffix, "lookup", "same-doc"))
    assert again.stats.reused_tokens == again.stats.prompt_tokens - 1
    assert again.stats.prefilled_tokens == 0
    assert again.tokens == first.tokens


def test_plain_greedy_is_hugging_face_greedy(tiny_dir):
    """In float32, where rounding does not decide argmaxes, plain decoding through the engine is
    what `generate` gives: the engine's baseline is the model's own greedy decoding."""
    target = make_model(tiny_dir / "fp32-target", vocab_size=400, seed=7)
    engine = tiny_engine(target, dtype="fp32")
    prefix, suffix = REPEATING
    plain = engine.complete(request(prefix, suffix, "none", "fp32", max_tokens=30))
    ids = engine.build_prompt(prefix, suffix).ids
    with torch.inference_mode():
        out = engine.target.model.generate(torch.tensor([ids], device=engine.target.device), max_new_tokens=30,
                                           do_sample=False, eos_token_id=sorted(engine.stop_ids),
                                           pad_token_id=engine.pad_id)
    reference = out[0, len(ids):].tolist()
    stop = next((i for i, t in enumerate(reference) if t in engine.stop_ids), len(reference))
    assert plain.tokens == reference[:stop]


def test_reuse_off_starts_cold_and_decodes_the_same(engine):
    prefix, suffix = REPEATING
    warm = engine.complete(request(prefix, suffix, "hybrid", "cold-doc"))
    cold = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, drafter="hybrid", document="cold-doc",
                                             max_tokens=40, stop_at_suffix=False, reuse=False))
    assert cold.stats.reused_tokens == 0 and cold.stats.prefilled_tokens == cold.stats.prompt_tokens - 1
    assert cold.tokens == warm.tokens


def test_every_drafter_samples_from_the_targets_distribution(tiny_target, tiny_draft):
    """Under sampling the tokens differ from run to run, so losslessness is a distribution: each
    drafter samples two tokens `N` times (one seed each), and the first, and the second where the
    first was the likeliest token, must be distributed as the target's own next-token
    distributions, whatever the drafter proposed (accepted, or rejected and resampled from the
    residual). Every frequency lies within 5 standard errors of the target's probability (the
    tokens below 2% counted as one: a normal bound says nothing of a cell that expects under one
    sample). Prompt lookup drafts only the second: the first follows the FIM middle mark."""
    from specd.decoding.request import Sampler
    from specd.decoding.verify import distribution

    engine = tiny_engine(tiny_target, tiny_draft, dtype="fp32", pace_drafts=False)
    prefix, suffix = REPEATING
    sampler = Sampler(temperature=0.7)
    ids = engine.build_prompt(prefix, suffix).ids

    def target_next(context: list[int]) -> torch.Tensor:
        with torch.inference_mode():
            logits = engine.target.model(torch.tensor([context])).logits[0, -1:].float()
        return distribution(logits, sampler)[0].double()                       # [V]

    first_p = target_next(ids)
    likeliest = int(first_p.argmax())
    second_p = target_next(ids + [likeliest])
    n, accepted = 250, 0
    for drafter in served(engine):
        firsts, seconds, proposed = [], [], 0
        for seed in range(n):
            result = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, drafter=drafter, max_tokens=2,
                                                       document=f"sampled-{drafter}", stop_at_suffix=False,
                                                       sampler=Sampler(temperature=0.7, seed=seed)))
            firsts.append(result.tokens[0])
            if result.tokens[0] == likeliest and len(result.tokens) > 1:
                seconds.append(result.tokens[1])
            accepted += sum(result.stats.accepted.values())
            proposed += sum(result.stats.proposed.values())
        assert len(seconds) > n // 10, "too few second tokens to judge"
        for samples, p in ((firsts, first_p), (seconds, second_p)):
            assert within_bounds(samples, p), f"{drafter} samples another distribution"
        assert drafter == "none" or proposed > 0, f"{drafter} never drafted: the check proves nothing of it"
    assert accepted > 0, "no draft was ever accepted: only the rejection's path was checked"


def within_bounds(samples: list[int], p: torch.Tensor) -> bool:
    """Whether each common token's frequency (and the rest's, together) is within 5 standard errors."""
    common = p >= 0.02
    counts = torch.bincount(torch.tensor(samples), minlength=len(p)).double() / len(samples)
    expected = torch.cat([p[common], p[~common].sum()[None]])
    got = torch.cat([counts[common], counts[~common].sum()[None]])
    return bool(((got - expected).abs() <= 5 * torch.sqrt(expected * (1 - expected) / len(samples)) + 1e-9).all())
