"""The engine: prompt -> reuse cached KV -> prefill the rest -> loop {propose, verify, commit, stop}.

One `Engine` holds the loaded models, the per-document caches and one drafter of each kind,
chosen per request by name. Between any two forward passes it checks the request's cancel
callback; a cancelled call returns what it has, marked cancelled, and what it computed stays in
the cache for the next call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

import torch

from specd.decoding.cachepool import CachePool, Slot
from specd.decoding.draft_model import ModelDrafter, window_capacity
from specd.decoding.drafter import DraftJob, Drafter, HybridDrafter, NoDrafter, Proposal
from specd.decoding.forward import prefill, step
from specd.decoding.kvcache import KVCache
from specd.decoding.lookup import LookupDrafter
from specd.decoding.loaded import LoadedModel, check_pair
from specd.decoding.prompt import Budget, Prompt, PromptBuilder, detect_template
from specd.decoding.request import Completion, CompletionRequest, RequestError
from specd.decoding.stats import Stats, Step
from specd.decoding.stops import Stopper, StopRules
from specd.decoding.verify import accept_greedy, accept_sampled
from specd.decoding.widths import smallest_equivalent_width

@dataclass(frozen=True)
class EngineSettings:
    width: int = 8                  # rows of every target decoding pass (drafts up to width - 1)
    prefill_chunk: int = 128        # tokens per prefill pass: the cancel check's granularity
    budget: Budget = Budget()
    max_tokens_limit: int = 256     # the most a request may ask for; sizes the caches
    draft_context_tokens: int = 384
    fim_template: str = "auto"
    lookup_ngram: int = 8
    hybrid_min_match: int = 2
    draft_confidence: float = 0.5   # the draft stops once the product of its tokens' probabilities is less
    cache_budget_bytes: int = 1 << 30
    pace_drafts: bool = True        # rest the draft model while it costs more than it saves
    narrow_passes: bool = True      # pad a pass only to the smallest width that computes the same
                                    # bits as `width` (measured at start-up: decoding/widths.py)

    @property
    def capacity(self) -> int:
        b = self.budget
        return b.prefix + b.suffix + b.extra + 16 + self.max_tokens_limit + self.width

    @property
    def draft_capacity(self) -> int:
        """The draft reads a shorter window (decoding/draft_model.py), and its static cache is
        sized to it: every draft step attends over the whole cache (1400 keys cost 15% more than
        768 for the built-in 0.5B here)."""
        return window_capacity(self.draft_context_tokens) + self.max_tokens_limit + self.width


class Engine:
    def __init__(self, target: LoadedModel, draft: LoadedModel | None, settings: EngineSettings):
        if draft is not None:
            check_pair(target, draft)
        assert settings.width >= 1, "a pass has at least the pending token"
        self.target, self.draft, self.settings = target, draft, settings
        template = detect_template(target.tokenizer, settings.fim_template)
        self.builder = PromptBuilder(target.tokenizer, template, settings.budget)
        self.pad_id = target.tokenizer.pad_token_id or min(self.builder.stop_ids)
        self.pool = CachePool(target.model, draft.model if draft else None, settings.capacity, settings.draft_capacity,
                              settings.cache_budget_bytes)
        self.low_width = settings.width
        if settings.narrow_passes and settings.width > 1:
            self.low_width = smallest_equivalent_width(target.model, settings.capacity, settings.width,
                                                       self.pad_id, len(target.tokenizer))
        self.drafters = self._make_drafters()

    def with_settings(self, **changes) -> Engine:
        """Another engine on the same loaded models, with its own caches."""
        return Engine(self.target, self.draft, replace(self.settings, **changes))

    def _make_drafters(self) -> dict[str, Drafter]:
        s = self.settings
        drafters: dict[str, Drafter] = {"none": NoDrafter(), "lookup": LookupDrafter(s.lookup_ngram)}
        if self.draft is not None:
            model = ModelDrafter(self.draft, s.draft_context_tokens, tuple(self.builder.special_ids), s.pace_drafts,
                                 confidence=s.draft_confidence)
            drafters["draft"] = model
            drafters["hybrid"] = HybridDrafter(LookupDrafter(s.lookup_ngram), model, s.hybrid_min_match)
        return drafters

    def complete(self, request: CompletionRequest,
                 cancelled: Callable[[], bool] = lambda: False) -> Completion:
        started = time.perf_counter()
        drafter = self._drafter(request)
        stats = Stats()
        prompt = self.builder.build(request.prefix, request.suffix, request.extras, request.hints,
                                    request.suffix_tokens)
        stats.tokenize_ms = _ms_since(started)
        stats.prompt_tokens = len(prompt.ids)
        slot = self.pool.get(request.document)
        if not request.reuse:
            slot.forget()
        completion = self._run(request, prompt, slot, drafter, stats, cancelled, started)
        stats.total_ms = _ms_since(started)
        return completion

    def _drafter(self, request: CompletionRequest) -> Drafter:
        if request.drafter not in self.drafters:
            raise RequestError(f"drafter {request.drafter!r} is not available; choose one of "
                               f"{', '.join(self.drafters)}" + ("" if self.draft else " (no draft model loaded)"))
        if request.suffix_tokens is not None and not 0 <= request.suffix_tokens <= self.settings.budget.suffix:
            raise RequestError(f"suffix_tokens must be 0..{self.settings.budget.suffix}, not {request.suffix_tokens}")
        if not 1 <= request.max_tokens <= self.settings.max_tokens_limit:
            raise RequestError(f"max_tokens must be 1..{self.settings.max_tokens_limit}, not {request.max_tokens}")
        return self.drafters[request.drafter]

    def _run(self, request: CompletionRequest, prompt: Prompt, slot: Slot, drafter: Drafter,
             stats: Stats, cancelled: Callable[[], bool], started: float) -> Completion:
        t = time.perf_counter()
        # The last prompt token goes through the fixed-width pass, like every token whose
        # logits decide an output token; only the KV of the rest comes from prefill.
        reused, computed, finished = prefill(self.target.model, slot.target, prompt.ids[:-1],
                                             self.settings.prefill_chunk, cancelled)
        stats.reused_tokens, stats.prefilled_tokens = reused, computed
        stats.prefill_ms = _ms_since(t)
        deadline = None if request.deadline_s is None else time.monotonic() + request.deadline_s
        stopper = Stopper(self.target.tokenizer, StopRules(
            self.builder.stop_ids, request.max_tokens, request.single_line,
            request.suffix if request.stop_at_suffix else "", deadline))
        generator = torch.Generator().manual_seed(request.sampler.seed)
        job = DraftJob(prompt, list(slot.previous), request.sampler, generator, cancelled, slot.draft)
        outcome = "cancelled"
        if finished:
            outcome = self.decode(slot.target, prompt, drafter, stopper, job, stats)
        stats.new_tokens = len(stopper.tokens)
        if outcome == "done":
            slot.previous = list(stopper.tokens)
        return Completion(stopper.text, list(stopper.tokens), outcome, stopper.reason, stats)

    def decode(self, cache: KVCache, prompt: Prompt, drafter: Drafter, stopper: Stopper,
               job: DraftJob, stats: Stats) -> str:
        """The decode loop. `context` ends with the pending token: sampled, not yet in the cache."""
        context = list(prompt.ids)
        drafter.begin(job)
        while not stopper.done:
            if job.cancelled():
                return "cancelled"
            t0 = time.perf_counter()
            proposal = drafter.propose(context, self.settings.width - 1)
            t1 = time.perf_counter()
            if job.cancelled():
                return "cancelled"
            rows = [context[-1]] + proposal.tokens
            logits = step(self.target.model, cache, rows, max(len(rows), self.low_width), self.pad_id)  # [k + 1, V]
            accepted, token = self.accept(logits, proposal, job)
            cache.truncate(len(context) + accepted)      # the pending token and the accepted
            t2 = time.perf_counter()
            drafter.observe(proposal, accepted, t1 - t0, t2 - t1)
            stats.record(Step(proposal.drafter, len(proposal.tokens), accepted,
                              (t1 - t0) * 1e3, (t2 - t1) * 1e3, proposal.forwards, proposal.match,
                              proposal.prefill_s * 1e3))
            for token in proposal.tokens[:accepted] + [token]:
                context.append(token)
                if stopper.push(token):
                    break
        return "done"

    def accept(self, logits: torch.Tensor, proposal: Proposal, job: DraftJob) -> tuple[int, int]:
        if job.sampler.greedy:
            return accept_greedy(logits, proposal.tokens)
        return accept_sampled(logits, proposal.tokens, proposal.probs, job.sampler, job.generator)


def _ms_since(t: float) -> float:
    return (time.perf_counter() - t) * 1e3
