"""The draft model: a small model of the target's vocabulary proposing tokens one at a time.

It has its own KV cache with the same prefix reuse as the target. Its prompt is a shorter window
of the target's (the prefix's last `context_tokens`, cut at a multiple of `ALIGN` tokens so that
consecutive keystrokes share it), because on a CPU the draft's prefill costs nearly half the
target's. It prefills lazily, on its first proposal, so requests lookup serves never pay for it.

A proposal runs up to the pass's width and ends early where the draft is unsure: once the product
of the probabilities it gave its tokens so far falls below `confidence`. The built-in draft is
well calibrated (right 97% of the time at p >= 0.9, half the time at 0.4-0.5), so that product
is the odds that the whole proposal is accepted; below it, the next token's expected saving is
worth less than the draft pass it costs (on this CPU a fifth of a target pass), and the target
checks what there is. That stop is the only length rule. `bench/tune_hybrid.py` replays policies
on recorded tokens; on the 40 held-out quality cases it ranked this rule at 0.5 first (with 0.4),
ahead of a per-token threshold and of also capping a proposal at one past what the last one got
accepted (README "Tuning"). Whether drafting pays at all is `Pacing`'s call, judged on drafting
time alone, not on the one-off prefill.
"""

from __future__ import annotations

import time

import torch

from specd.decoding.drafter import DraftJob, Pacing, Proposal
from specd.decoding.forward import draft_step, prefill
from specd.decoding.kvcache import KVCache
from specd.decoding.loaded import LoadedModel
from specd.decoding.prompt import Prompt
from specd.decoding.request import Sampler
from specd.decoding.verify import distribution

ALIGN = 64
CHUNK = 512  # prefill tokens per draft pass: the draft reads ~4x faster than the target, so a
             # chunk of 512 takes less time than a target chunk of 128 (cancel checks stay as often)


def window_capacity(context_tokens: int) -> int:
    """The most tokens `ModelDrafter.window` holds: the prefix's tail, the suffix's head, 3 marks."""
    return context_tokens + context_tokens // 4 + 3


class ModelDrafter:
    name = "draft"

    def __init__(self, draft: LoadedModel, context_tokens: int,
                 fim_ids: tuple[int, int, int], pace: bool = True, confidence: float = 0.5):
        self.model, self.context_tokens, self.fim_ids = draft.model, context_tokens, fim_ids
        self.confidence = confidence
        self.prefill_s = 0.0  # of the current proposal: kept out of the payoff, reported as prefill
        self.pacing = Pacing(judge=pace)
        self.prompt: list[int] = []
        self.offset = 0
        self.job = DraftJob(Prompt([], [], []))
        self.cache: KVCache | None = None
        self.forwards = 0  # passes in the current proposal

    def begin(self, job: DraftJob) -> None:
        assert job.draft_cache is not None, "the draft model needs the document's draft cache"
        self.job, self.cache = job, job.draft_cache
        self.prompt = self.window(job.prompt)
        self.offset = len(job.prompt.ids)  # generated tokens start here in the target's context

    def window(self, prompt: Prompt) -> list[int]:
        pre, suf, mid = self.fim_ids
        cut = max(0, len(prompt.prefix_ids) - self.context_tokens)
        cut = -(-cut // ALIGN) * ALIGN  # round up to an aligned start
        return [pre] + prompt.prefix_ids[cut:] + [suf] + prompt.suffix_ids[: self.context_tokens // 4] + [mid]

    def propose(self, context: list[int], limit: int) -> Proposal:
        if limit <= 0 or not self.pacing.pays():
            return Proposal([], self.name)
        self.forwards, self.prefill_s = 0, 0.0
        logits = self._catch_up(self.prompt + context[self.offset:])
        if logits is None:
            return Proposal([], self.name, forwards=self.forwards, prefill_s=self.prefill_s)  # cancelled
        tokens, probs, sure = [], [], 1.0
        for j in range(limit):
            token, q = self._pick(logits, self.job.sampler)
            tokens.append(token)
            probs.append(q)
            sure *= self._probability(logits, token, q)  # the odds that all so far are right
            if j + 1 == limit or sure < self.confidence or self.job.cancelled():
                break
            logits = draft_step(self.model, self.cache, [token])
            self.forwards += 1
        stacked = None if self.job.sampler.greedy else torch.stack(probs[: len(tokens)])
        return Proposal(tokens, self.name, probs=stacked, forwards=self.forwards, prefill_s=self.prefill_s)

    def _catch_up(self, wanted: list[int]) -> torch.Tensor | None:
        """Bring the cache to `wanted` and return the logits after its last token."""
        head = wanted[:-1]
        reuse = self.cache.common_prefix(head)
        if len(head) - reuse > 1:  # a prompt to read: in chunks, with a cancel check between
            started = time.perf_counter()
            _, computed, finished = prefill(self.model, self.cache, head, CHUNK, self.job.cancelled)
            self.prefill_s = time.perf_counter() - started
            self.forwards += -(-computed // CHUNK)
            if not finished:
                return None
            reuse = len(head)
        self.cache.truncate(reuse)
        self.forwards += 1
        return draft_step(self.model, self.cache, wanted[reuse:])

    def _pick(self, logits: torch.Tensor, sampler: Sampler) -> tuple[int, torch.Tensor | None]:
        if sampler.greedy:
            return int(logits.argmax()), None
        q = distribution(logits.cpu(), sampler)
        return int(torch.multinomial(q, 1, generator=self.job.generator)), q

    def _probability(self, logits: torch.Tensor, token: int, q: torch.Tensor | None) -> float:
        """The probability the draft gave `token` (float32 softmax)."""
        return float(q[token] if q is not None else torch.softmax(logits.float(), -1)[token])

    def observe(self, proposal: Proposal, accepted: int, propose_s: float, step_s: float) -> None:
        self.pacing.update(len(proposal.tokens), accepted, propose_s - proposal.prefill_s, step_s)
