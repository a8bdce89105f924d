"""The draft model: a small model of the target's vocabulary proposing tokens one at a time.

It has its own KV cache with the same prefix reuse as the target. Its prompt is a shorter window
of the target's (the prefix's last `context_tokens`, cut at a multiple of `ALIGN` tokens so that
consecutive keystrokes share it), because on a CPU the draft's prefill costs a good part of the
target's. It prefills lazily, on its first proposal, so requests lookup serves never pay for it.

A proposal runs until `DraftStop` (decoding/policy.py) finds that another token, as likely as the
last, would not raise the expected tokens per ms (from the draft's own probabilities and the
machine's pass costs), and the pass verifies the best length of what it drafted. Whether drafting
pays at all is the mode's `Pacing` (decoding/drafter.py), judged on drafting time alone, not on
the one-off prefill.
"""

from __future__ import annotations

import time

import torch

from specd.decoding.drafter import DraftJob, Pacing, Proposal
from specd.decoding.forward import draft_step, prefill
from specd.decoding.loaded import LoadedModel
from specd.decoding.policy import Stop
from specd.decoding.prompt import Prompt
from specd.decoding.settings import DRAFT_CHUNK, window_capacity
from specd.decoding.verify import distribution

ALIGN = 64


class ModelDrafter:
    """The draft model for one mode: what it learns across requests is `pacing`, its own."""
    name = "draft"

    def __init__(self, draft: LoadedModel, context_tokens: int, fim_ids: tuple[int, int, int],
                 pacing: Pacing, stop: Stop):
        self.model, self.context_tokens, self.fim_ids = draft.model, context_tokens, fim_ids
        self.pacing, self.stop = pacing, stop

    def begin(self, job: DraftJob) -> ModelProposer:
        return ModelProposer(self, job)

    def window(self, prompt: Prompt) -> list[int]:
        pre, suf, mid = self.fim_ids
        cut = max(0, len(prompt.prefix_ids) - self.context_tokens)
        cut = -(-cut // ALIGN) * ALIGN  # round up to an aligned start
        window = [pre] + prompt.prefix_ids[cut:] + [suf] + prompt.suffix_ids[: self.context_tokens // 4] + [mid]
        assert len(window) <= window_capacity(self.context_tokens), "the draft cache is sized to the window"
        return window


class ModelProposer:
    """One request's drafting with the draft model, on the document's draft cache."""

    def __init__(self, drafter: ModelDrafter, job: DraftJob):
        assert job.draft_cache is not None, "the draft model needs the document's draft cache"
        self.drafter, self.model, self.job, self.cache = drafter, drafter.model, job, job.draft_cache
        self.prompt = drafter.window(job.prompt)
        self.offset = len(job.prompt.ids)  # generated tokens start here in the target's context
        self.forwards = 0                  # passes in the current proposal
        self.prefill_s = 0.0               # of the current proposal: kept out of the payoff, reported as prefill

    def propose(self, context: list[int], limit: int) -> Proposal:
        name, stop = self.drafter.name, self.drafter.stop
        if limit <= 0 or not self.drafter.pacing.pays():
            return Proposal([], name)
        self.forwards, self.prefill_s = 0, 0.0
        logits = self._catch_up(context)
        if logits is None:
            return Proposal([], name, forwards=self.forwards, prefill_s=self.prefill_s)  # cancelled
        tokens, probs, seen = [], [], []
        for j in range(limit):
            token, q = self._pick(logits)
            tokens.append(token)
            probs.append(q)
            seen.append(self._probability(logits, token, q))
            if j + 1 == limit or not stop.more(seen) or self.job.cancelled():
                break
            logits = self._step(token)
            self.forwards += 1
        kept = stop.keep(seen)
        stacked = None if self.job.sampler.greedy or kept == 0 else torch.stack(probs[:kept])
        return Proposal(tokens[:kept], name, probs=stacked, forwards=self.forwards, prefill_s=self.prefill_s,
                        token_probs=seen[:kept])

    def _catch_up(self, context: list[int]) -> torch.Tensor | None:
        """Bring the cache to the window and what followed it in `context`; return the logits
        after its last token (None: cancelled while reading the prompt)."""
        wanted = self.prompt + context[self.offset:]
        head = wanted[:-1]
        reuse = self.cache.common_prefix(head)
        if len(head) - reuse > 1:  # a prompt to read: in chunks, with a cancel check between
            started = time.perf_counter()
            _, computed, finished = prefill(self.model, self.cache, head, DRAFT_CHUNK, self.job.cancelled)
            self.prefill_s = time.perf_counter() - started
            self.forwards += -(-computed // DRAFT_CHUNK)
            if not finished:
                return None
            reuse = len(head)
        self.cache.truncate(reuse)
        self.forwards += 1
        return draft_step(self.model, self.cache, wanted[reuse:])

    def _step(self, token: int) -> torch.Tensor:
        """One drafted token through the draft; its logits [V]."""
        return draft_step(self.model, self.cache, [token])

    def _pick(self, logits: torch.Tensor) -> tuple[int, torch.Tensor | None]:
        sampler = self.job.sampler
        if sampler.greedy:
            return int(logits.argmax()), None
        q = distribution(logits.cpu(), sampler)
        return int(torch.multinomial(q, 1, generator=self.job.generator)), q

    def _probability(self, logits: torch.Tensor, token: int, q: torch.Tensor | None) -> float:
        """The probability the draft gave `token` (float32 softmax)."""
        return float(q[token] if q is not None else torch.softmax(logits.float(), -1)[token])

    def observe(self, proposal: Proposal, accepted: int, propose_s: float, step_s: float) -> None:
        if proposal.forwards:  # it drafted (not resting, not cancelled before its first step)
            self.drafter.pacing.update(len(proposal.tokens), accepted, propose_s - proposal.prefill_s, step_s)
