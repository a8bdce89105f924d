"""Verification: which draft tokens the target accepts, and the token it adds after them.

Greedy: accept while the draft token is the target's argmax, then take the target's argmax; the
output is token for token what plain greedy decoding gives. Sampling: the rule of Leviathan et
al. (2023) and Chen et al. (2023): accept draft token x with probability min(1, p(x)/q(x)); at the
first rejection sample from norm(max(0, p - q)); after a fully accepted draft sample from p. Each
committed token is then distributed exactly as the target alone would sample it. A deterministic
drafter (prompt lookup) has q one-hot on its token. Ratios are taken in float32.
"""

from __future__ import annotations

import torch

from specd.decoding.request import Sampler


def distribution(logits: torch.Tensor, sampler: Sampler) -> torch.Tensor:
    """The distribution to sample from: softmax(logits / T), cut to the top-p nucleus. The top
    logit is taken off first and T is at least float32's least normal value, so a temperature
    near 0 (a client may send 1e-300) makes the argmax's 0 and the others' -inf, never inf or 0/0."""
    z = logits.float()
    t = max(sampler.temperature, torch.finfo(torch.float32).tiny)
    p = torch.softmax((z - z.amax(dim=-1, keepdim=True)) / t, dim=-1)            # [..., V]
    if sampler.top_p < 1.0:
        sorted_p, order = p.sort(dim=-1, descending=True)
        outside = sorted_p.cumsum(-1) - sorted_p >= sampler.top_p              # mass before it
        outside[..., 0] = False   # a top_p below float32's least value rounds to 0: keep the top
        sorted_p = sorted_p.masked_fill(outside, 0.0)
        p = torch.zeros_like(p).scatter(-1, order, sorted_p)
        p = p / p.sum(-1, keepdim=True)
    return p


def probabilities(logits: torch.Tensor, tokens: list[int]) -> list[float]:
    """The probability row i of `logits` [>= len(tokens), V] gives tokens[i] (softmax, float32).
    Row by row, so a row's value never depends on how many rows its pass had: a stop decided by
    it (decoding/stops.py) falls where plain decoding's does, whatever drafted the tokens."""
    rows = logits[:len(tokens)].float()   # the committed rows only, not a bf16 pass's whole width
    return [float(torch.exp(row[token] - torch.logsumexp(row, 0))) for row, token in zip(rows, tokens)]


def accept_greedy(logits: torch.Tensor, draft: list[int]) -> tuple[int, int]:
    """logits [len(draft) + 1, V] -> (accepted draft tokens, the target's next token)."""
    best = logits.argmax(dim=-1).tolist()
    n = 0
    while n < len(draft) and draft[n] == best[n]:
        n += 1
    return n, best[n]


def accept_sampled(logits: torch.Tensor, draft: list[int], q: torch.Tensor | None,
                   sampler: Sampler, generator: torch.Generator) -> tuple[int, int]:
    """logits [k + 1, V]; q [k, V] the draft's distributions, or None for one-hot drafts."""
    p = distribution(logits.cpu(), sampler)                                     # [k + 1, V]
    q = None if q is None else q.float().cpu()                                 # [k, V]
    for i, x in enumerate(draft):
        q_x = 1.0 if q is None else float(q[i, x])
        p_x = float(p[i, x])
        if _uniform(generator) * q_x < p_x:   # u < p/q, without dividing by a zero q
            continue
        residual = p[i].clone()
        if q is None:
            residual[x] = 0.0
        else:
            residual = (residual - q[i]).clamp_min(0.0)
        if float(residual.sum()) <= 0.0:      # p == q up to rounding: any sample from p is right
            residual = p[i]
        return i, _sample(residual, generator)
    return len(draft), _sample(p[len(draft)], generator)


def _uniform(generator: torch.Generator) -> float:
    return float(torch.rand((), generator=generator))


def _sample(weights: torch.Tensor, generator: torch.Generator) -> int:
    return int(torch.multinomial(weights / weights.sum(), 1, generator=generator))
