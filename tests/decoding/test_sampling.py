"""The speculative sampler samples from the target's distribution, whatever the draft proposes.

Rows of target logits are fixed per position (as if the context did not matter), so a sequence
sampled by the target alone has independent tokens x_i ~ p_i. The speculative sampler must give
the same: its first token ~ p_0, and its second, whenever the first was an accepted draft, ~ p_1.
Each frequency must lie within 5 standard errors (sqrt(p(1 - p) / n)) of its probability: a
correct sampler breaks that bound by chance with probability under 1e-5 across all cells, while a
sampler with the classic bug (resampling from p instead of the residual after a rejection) breaks
it by far, which the same check must catch.
"""

from __future__ import annotations

import math

import pytest
import torch

from specd.decoding.request import Sampler
from specd.decoding.verify import accept_sampled, distribution

V, K, N = 6, 3, 12_000


def target_and_draft(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(K + 1, V, generator=g) * 1.5                  # [K + 1, V]
    q = torch.softmax(torch.randn(K, V, generator=g) * 1.5, dim=-1)     # [K, V]
    return logits, q


def broken_accept(logits, draft, q, sampler, generator):
    """The bug: after a rejection, sample from p itself instead of norm(max(0, p - q))."""
    p = distribution(logits, sampler)
    for i, x in enumerate(draft):
        q_x = 1.0 if q is None else float(q[i, x])
        if float(torch.rand((), generator=generator)) * q_x < float(p[i, x]):
            continue
        return i, int(torch.multinomial(p[i], 1, generator=generator))
    return len(draft), int(torch.multinomial(p[len(draft)], 1, generator=generator))


def sample_sequences(accept, logits, q, one_hot: bool, seed: int) -> tuple[list[int], list[int]]:
    """First and (when produced) second committed tokens over N speculative steps."""
    sampler, g = Sampler(temperature=1.0, seed=seed), torch.Generator().manual_seed(seed)
    firsts, seconds = [], []
    for _ in range(N):
        if one_hot:  # a lookup-like drafter: fixed tokens, q one-hot
            draft, probs = [1, 2, 3], None
        else:
            draft = [int(torch.multinomial(q[i], 1, generator=g)) for i in range(K)]
            probs = q
        accepted, token = accept(logits, draft, probs, sampler, g)
        committed = draft[:accepted] + [token]
        firsts.append(committed[0])
        if len(committed) > 1:
            seconds.append(committed[1])
    return firsts, seconds


def outside_bounds(samples: list[int], p: torch.Tensor) -> list[str]:
    n, problems = len(samples), []
    counts = torch.bincount(torch.tensor(samples), minlength=V).double() / n
    for token in range(V):
        pt = float(p[token])
        bound = 5 * math.sqrt(max(pt * (1 - pt), 1e-12) / n) + 1e-9
        if abs(float(counts[token]) - pt) > bound:
            problems.append(f"token {token}: {float(counts[token]):.4f} vs {pt:.4f} (bound {bound:.4f})")
    return problems


def check(accept, one_hot: bool, seed: int) -> list[str]:
    logits, q = target_and_draft(seed)
    p = torch.softmax(logits, dim=-1)
    firsts, seconds = sample_sequences(accept, logits, q, one_hot, seed)
    assert len(seconds) > N // 10, "too few second tokens to judge"
    return outside_bounds(firsts, p[0]) + outside_bounds(seconds, p[1])


@pytest.mark.parametrize("one_hot", [False, True], ids=["model-draft", "lookup-draft"])
def test_speculative_sampling_matches_the_target(one_hot):
    assert check(accept_sampled, one_hot, seed=11) == []


@pytest.mark.parametrize("one_hot", [False, True], ids=["model-draft", "lookup-draft"])
def test_the_same_check_catches_a_broken_sampler(one_hot):
    assert check(broken_accept, one_hot, seed=11) != []


def test_top_p_keeps_the_nucleus_only():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    p = distribution(logits, Sampler(temperature=1.0, top_p=0.8))[0]
    assert p[2] == 0 and p[3] == 0
    assert torch.allclose(p[:2], torch.tensor([0.625, 0.375]))


def test_a_top_p_below_float32s_least_value_keeps_the_top_token():
    # 7.65e-217 rounds to 0.0 in float32, where every token's mass-before is >= 0 (found by the fuzz test)
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    p = distribution(logits, Sampler(temperature=1.0, top_p=7.652222390931483e-217))[0]
    assert torch.equal(p, torch.tensor([1.0, 0.0, 0.0, 0.0]))


@pytest.mark.parametrize("temperature", [2e-217, 1e-30, 1e-6])
def test_a_temperature_near_zero_samples_the_argmax(temperature):
    """A client may send any temperature above 0 (the fuzz test sent 2e-217): logits / T then
    overflowed float32 to inf, and softmax gave NaN, an internal error for that request."""
    logits = torch.tensor([[1.5, 7.25, -3.0, 7.0], [0.0, 0.0, 2.0, -1.0]])
    p = distribution(logits, Sampler(temperature=temperature))
    assert torch.isfinite(p).all()
    assert p.argmax(-1).tolist() == [1, 2] and p.max(-1).values.tolist() == [1.0, 1.0]
