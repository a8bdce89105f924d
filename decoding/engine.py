"""The engine: prompt -> reuse cached KV -> prefill the rest -> loop {propose, verify, commit, stop}.

One `Engine` holds the loaded models, the per-document caches and one drafter per mode, chosen
per request by name; each request drafts through its own proposer (decoding/drafter.py). Between
any two forward passes it checks the request's cancel callback, and a decoding pass of the lean
forward checks it between layers too (given up, it leaves the cache as before it); a cancelled
call returns what it has, marked cancelled, and what it computed stays in the cache for the next
call.

Callers (the daemon, bench/, tests) use the methods below `complete` and the attributes `target`,
`draft`, `settings` and `pad_id`; the caches and the drafters stay the engine's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cached_property

import msgspec
import torch

from specd.decoding import layerskip
from specd.decoding.cachepool import CachePool, Slot
from specd.decoding.curve import CostCurve
from specd.decoding.draft_model import ModelDrafter
from specd.decoding.drafter import Acceptance, Drafter, DraftJob, HybridDrafter, NoDrafter, Pacing, Proposal
from specd.decoding.forward import prefill, step
from specd.decoding.heads import Heads, HeadsDrafter
from specd.decoding.healing import Healer, Spelling
from specd.decoding.kvcache import KVCache
from specd.decoding.layerskip import LayerSkipDrafter
from specd.decoding.lean import PassStopped, shaped
from specd.decoding.loaded import LoadedModel, check_pair
from specd.decoding.lookup import LookupDrafter
from specd.decoding.measure import measure_curve
from specd.decoding.policy import DraftStop, PassCosts, Stop, widest_useful
from specd.decoding.prompt import Prompt, PromptBuilder, detect_template
from specd.decoding.registry import DRAFTERS, HEAD_DRAFTERS, MODEL_DRAFTERS, SHAPED_DRAFTERS
from specd.decoding.request import Completion, CompletionRequest, RequestError
from specd.decoding.settings import EngineSettings
from specd.decoding.stats import Stats, Step
from specd.decoding.stops import Stopper, StopRules
from specd.decoding.verify import accept_greedy, accept_sampled, probabilities
from specd.decoding.widths import Probe, measure_probe

NO_DRAFT = (" (no draft model loaded: models.draft = \"auto\" loads the built-in one where completion.drafter "
            "drafts with it; or name one in models.draft)")
NO_HEADS = " (no heads trained for this target: `specd heads train`; they draft where the target runs on a CPU)"


class Engine:
    def __init__(self, target: LoadedModel, draft: LoadedModel | None, settings: EngineSettings,
                 curve: CostCurve | None = None, probe: Probe | None = None, layers: tuple[int, ...] | None = None,
                 heads: Heads | None = None):
        """`curve`: what a pass costs here by its width (models/curves.py keeps one per machine);
        measured on these models when not given. `probe`: what the width probe found for these
        models, settings and widest pass on this machine, where the caller kept it
        (daemon/runtime.py); measured here when not given or made for another width. `layers`:
        the target's layers the `layerskip` drafter runs (default: decoding/layerskip.py's). `heads`:
        what the `heads` drafter guesses with (models/heads.py trains and keeps them)."""
        if draft is not None:
            check_pair(target, draft)
        assert settings.width >= 1, "a pass has at least the pending token"
        settings = settings.for_device(target.device.type)
        self.target, self.draft, self.settings, self.heads = target, draft, settings, heads
        template = detect_template(target.tokenizer, settings.fim_template)
        self._builder = PromptBuilder(target.tokenizer, template, settings.budget, settings.token_healing)
        self.pad_id = target.tokenizer.pad_token_id or min(self._builder.stop_ids)
        self._pool = CachePool(target.model, draft.model if draft else None, settings.capacity, settings.draft_capacity,
                              settings.cache_memory_mb << 20)
        self.curve = curve or measure_curve(target.model, draft.model if draft else None, settings,
                                            len(target.tokenizer))
        # The widest pass run: settings.width at most, and no wider than a pass that can pay here.
        self.width = widest_useful(PassCosts.of(self.curve, 1, min(settings.width, self.curve.widest)))
        if probe is None or probe.width != self.width:
            probe = measure_probe(target.model, settings, self.width, self.pad_id, len(target.tokenizer))
        self.probe = probe
        self.low_width, self.folds = probe.low_width, probe.folds
        self.costs = PassCosts.of(self.curve, self.low_width, self.width)
        # What is learned across requests, per mode, so that "draft" and "hybrid" (which the bench
        # alternates) never judge by each other: whether drafting with the draft model pays, and
        # how often prompt lookup's tokens are accepted, by position.
        self.pacing = {mode: Pacing(self.costs, judge=settings.pace_drafts)
                       for mode in MODEL_DRAFTERS if draft is not None}
        self.layers = layers or layerskip.default(target.model.config.num_hidden_layers)
        self.pacing["layerskip"] = Pacing(self.costs, judge=settings.pace_drafts)
        self.acceptance = {mode: Acceptance(self.width - 1) for mode in ("lookup", "hybrid")}
        self._drafters = self._make_drafters()

    def with_settings(self, **changes) -> Engine:
        """Another engine on the same loaded models, with its own caches (and the same curve:
        measured at this engine's capacities, near enough for a benchmark's variants)."""
        return Engine(self.target, self.draft, msgspec.structs.replace(self.settings, **changes), self.curve,
                      layers=self.layers, heads=self.heads)

    def with_layers(self, layers: tuple[int, ...]) -> Engine:
        """Another engine on the same models whose `layerskip` runs `layers` (a search's candidate)."""
        return Engine(self.target, self.draft, self.settings, self.curve, self.probe, layers, self.heads)

    def with_heads(self, heads: Heads) -> Engine:
        """Another engine on the same models whose `heads` drafter guesses with `heads` (fewer of them)."""
        return Engine(self.target, self.draft, self.settings, self.curve, self.probe, self.layers, heads)

    def _make_drafters(self) -> dict[str, Drafter]:
        s, acceptance = self.settings, self.acceptance
        drafters: list[Drafter] = [NoDrafter(), LookupDrafter(self.costs, acceptance["lookup"], s.lookup_ngram)]
        if self.draft is not None:
            drafters += [self.model_drafter(self.pacing["draft"]),
                         HybridDrafter(LookupDrafter(self.costs, acceptance["hybrid"], s.lookup_ngram),
                                       self.model_drafter(self.pacing["hybrid"]), s.hybrid_min_match)]
        lean_shaped = shaped(self.target.model)
        if lean_shaped:
            n = self.target.model.config.num_hidden_layers
            stop = DraftStop(layerskip.costs(self.costs, len(self.layers), n), self.settings.draft_confidence)
            drafters.append(LayerSkipDrafter(self.target, self.layers, self.pacing["layerskip"], stop))
        # the heads read the final states a pass leaves (KVCache.rows), which CUDA graphs' replays do not
        reads_rows = self.heads is not None and lean_shaped and self.target.device.type == "cpu"
        if reads_rows:
            drafters.append(HeadsDrafter(self.heads, self.costs))
        made = {d.name: d for d in drafters}
        missing = ((set() if self.draft else MODEL_DRAFTERS) | (set() if lean_shaped else SHAPED_DRAFTERS)
                   | (set() if reads_rows else HEAD_DRAFTERS))
        assert set(made) == set(DRAFTERS) - missing, "registry.py names them all"
        return made

    def model_drafter(self, pacing: Pacing, stop: Stop | None = None) -> ModelDrafter:
        """The draft model as the engine drafts with it (its window, its stop rule unless given)."""
        assert self.draft is not None, "a draft model is loaded"
        return ModelDrafter(self.draft, self.settings.draft_context_tokens, tuple(self._builder.special_ids), pacing,
                            stop or DraftStop(self.costs, self.settings.draft_confidence))

    @property
    def drafters(self) -> tuple[str, ...]:
        """The drafters this engine serves: the registry's (less those needing a draft model it
        has not loaded), and any added."""
        return tuple(self._drafters)

    def add_drafter(self, drafter: Drafter) -> None:
        """Serve requests for `drafter.name` with it as well (a drafter of the caller's own)."""
        self._drafters[drafter.name] = drafter

    def build_prompt(self, prefix: str, suffix: str = "", extras: tuple[tuple[str, str], ...] = (),
                     hints: tuple[str, ...] = (), suffix_tokens: int | None = None) -> Prompt:
        """The prompt `complete` would decode from (the same budget and template)."""
        return self._builder.build(prefix, suffix, extras, hints, suffix_tokens)

    @property
    def stop_ids(self) -> frozenset[int]:
        """The tokens that end a completion (the template's end and FIM tokens)."""
        return self._builder.stop_ids

    def cached_documents(self) -> int:
        return len(self._pool.slots)

    def cache_bytes(self) -> int:
        """Bytes of KV the documents' caches hold."""
        return self._pool.nbytes()

    def forget(self, document: str) -> None:
        """Drop the document's caches and its last completion: its next request starts cold."""
        self._pool.drop(document)
        self._pool.drop(glance_of(document))

    def on_forward(self, hook: Callable[[torch.nn.Module, tuple], None]) -> None:
        """Call `hook` before every forward pass of either model (CUDA graph replays included)."""
        for loaded in (self.target, self.draft):
            if loaded is not None:
                loaded.model.register_forward_pre_hook(hook)

    def complete(self, request: CompletionRequest,
                 cancelled: Callable[[], bool] = lambda: False) -> Completion:
        started = time.perf_counter()
        drafter = self._drafter(request)
        stats = Stats()
        prompt = self.build_prompt(request.prefix, request.suffix, request.extras, request.hints,
                                   request.suffix_tokens)
        slot = self._pool.get(request.document)
        if not request.reuse:
            slot.forget()
        glance = self._glance(request, prompt, slot)
        if glance is not None:
            prompt, slot, stats.glance = glance, self._pool.get(glance_of(request.document)), True
        elif request.glance:   # the whole prompt is read: the glance's cache has done its work
            self._pool.drop(glance_of(request.document))
        stats.tokenize_ms = _ms_since(started)
        stats.prompt_tokens = len(prompt.ids)
        try:
            completion = self._run(request, prompt, slot, drafter, stats, cancelled, started)
        except BaseException:
            # A pass that failed part-way (out of memory at its second layer, say) has written some
            # layers' KV and not others: the document starts cold next time, never from that.
            self.forget(request.document)
            raise
        stats.total_ms = _ms_since(started)
        return completion

    def _glance(self, request: CompletionRequest, prompt: Prompt, slot: Slot) -> Prompt | None:
        """The glance to answer from, or None for the whole prompt. A glance is the request's
        prompt rebuilt with the prefix window of `glance_tokens` nearest the cursor (no other
        files), in a cache of its own. A request reads whichever of the two has fewer tokens not yet
        cached, the whole prompt unless the glance saves more than a prefill chunk: hundreds of
        tokens keep the person waiting (seconds on a CPU), and the daemon reads the whole prompt on
        its idle lane meanwhile. So a place goes back to its whole prompt once that is read, not
        while hundreds of its tokens are still to read. Only a request that may reuse caches
        glances (one that may not is measuring a cold read)."""
        budget, chunk = self.settings.glance_tokens, self.settings.prefill_chunk
        if not (request.glance and request.reuse and budget > 0):
            return None
        unread = len(prompt.ids) - slot.target.common_prefix(prompt.ids)
        if unread <= chunk:
            return None
        glance = self._builder.build(request.prefix, request.suffix, (), request.hints, request.suffix_tokens,
                                     prefix_budget=budget)
        held = self._pool.peek(glance_of(request.document))
        glance_unread = len(glance.ids) - (held.target.common_prefix(glance.ids) if held is not None else 0)
        return glance if unread - glance_unread > chunk else None

    def _drafter(self, request: CompletionRequest) -> Drafter:
        if request.drafter not in self._drafters:
            why = ""
            if request.drafter in MODEL_DRAFTERS and not self.draft:
                why = NO_DRAFT
            elif request.drafter in HEAD_DRAFTERS:
                why = NO_HEADS
            raise RequestError(f"drafter {request.drafter!r} is not available; choose one of "
                               f"{', '.join(self._drafters)}{why}")
        if request.suffix_tokens is not None and not 0 <= request.suffix_tokens <= self.settings.suffix_tokens:
            raise RequestError(f"suffix_tokens must be 0..{self.settings.suffix_tokens}, not {request.suffix_tokens}")
        if not 1 <= request.max_tokens <= self.settings.max_tokens_limit:
            raise RequestError(f"max_tokens must be 1..{self.settings.max_tokens_limit}, not {request.max_tokens}")
        return self._drafters[request.drafter]

    def _run(self, request: CompletionRequest, prompt: Prompt, slot: Slot, drafter: Drafter,
             stats: Stats, cancelled: Callable[[], bool], started: float) -> Completion:
        t = time.perf_counter()
        # The last prompt token goes through the fixed-width pass, like every token whose
        # logits decide an output token; only the KV of the rest comes from prefill, or from
        # that same pass where only a few tokens changed (a keystroke's edit: `fold`).
        fold = self._fold(slot.target, prompt.ids)
        reused, computed, finished = prefill(self.target.model, slot.target, prompt.ids[:-1 - fold],
                                             self.settings.prefill_chunk, cancelled)
        stats.reused_tokens, stats.prefilled_tokens = reused, computed + fold
        stats.prefill_ms = _ms_since(t)
        now = time.monotonic()
        stopper = Stopper(self.target.tokenizer, StopRules(
            self.stop_ids, request.max_tokens, request.single_line,
            request.suffix if request.stop_at_suffix else "",
            None if request.deadline_s is None else now + request.deadline_s,
            None if request.cut_s is None else now + request.cut_s, self.settings.min_probability,
            self.settings.min_first_probability, self._healed_text(prompt)))
        generator = torch.Generator().manual_seed(request.sampler.seed)
        job = DraftJob(prompt, list(slot.previous), request.sampler, generator, cancelled, slot.draft, slot.target)
        outcome = "cancelled"
        if finished:
            outcome = self.decode(slot.target, prompt, drafter, stopper, job, stats, fold)
        stats.new_tokens = len(stopper.tokens)
        if outcome == "done" or stopper.tokens:  # a cancelled decode's tokens draft the next request
            slot.previous = list(stopper.tokens)
        return Completion(stopper.text, list(stopper.tokens), outcome, stopper.reason, stats)

    @cached_property
    def _healer(self) -> Healer:
        """The token strings healing searches (~0.5 s for a 150k vocabulary): made by the first
        healed request, not at start-up."""
        return Healer(self.target.tokenizer)

    def _healed_text(self, prompt: Prompt) -> str:
        if prompt.heal_id is None:
            return ""
        return self.target.tokenizer.decode([prompt.heal_id], skip_special_tokens=False)

    def _fold(self, cache: KVCache, ids: list[int]) -> int:
        """How many uncached prompt tokens before the last to compute in the first verify pass."""
        uncached = len(ids) - 1 - cache.common_prefix(ids[:-1])
        return uncached if self.folds and uncached <= self.settings.prefill_chunk else 0

    def decode(self, cache: KVCache, prompt: Prompt, drafter: Drafter, stopper: Stopper,
               job: DraftJob, stats: Stats, fold: int = 0) -> str:
        """The decode loop. `context` ends with the pending token: sampled, not yet in the cache;
        the `fold` prompt tokens before it are not cached either, and join the first pass."""
        context = list(prompt.ids)
        proposer = drafter.begin(job)
        spelling = Spelling(self._healer if prompt.heal_id is not None else None, prompt.heal_id)
        while not stopper.done:
            if job.cancelled():
                return "cancelled"
            t0 = time.perf_counter()
            proposal = proposer.propose(context, self.width - 1)
            t1 = time.perf_counter()
            if job.cancelled():
                return "cancelled"
            rows = context[len(context) - 1 - fold:] + proposal.tokens
            try:
                logits = step(self.target.model, cache, rows, max(len(rows), self.low_width),
                              self.pad_id, fold, stop=job.cancelled)  # [k + 1, V]
            except PassStopped:  # cancelled mid-pass: the stale request gives way at once
                return "cancelled"
            fold = 0
            logits = spelling.constrain(logits, proposal.tokens)
            accepted, token = self.accept(logits, proposal, job)
            cache.truncate(len(context) + accepted)      # the pending token and the accepted
            t2 = time.perf_counter()
            proposer.observe(proposal, accepted, t1 - t0, t2 - t1)
            stats.record(Step(proposal.drafter, len(proposal.tokens), accepted,
                              (t1 - t0) * 1e3, (t2 - t1) * 1e3, proposal.forwards, proposal.match,
                              proposal.prefill_s * 1e3))
            committed = proposal.tokens[:accepted] + [token]
            spelling.consume(committed)
            probs = probabilities(logits, committed) if stopper.rules.doubts else [1.0] * len(committed)
            for new, probability in zip(committed, probs):
                context.append(new)
                if stopper.push(new, probability):
                    break
        return "done"

    def accept(self, logits: torch.Tensor, proposal: Proposal, job: DraftJob) -> tuple[int, int]:
        if job.sampler.greedy:
            return accept_greedy(logits, proposal.tokens)
        return accept_sampled(logits, proposal.tokens, proposal.probs, job.sampler, job.generator)


def glance_of(document: str) -> str:
    """The key of a document's glance cache in the pool (no document name holds a NUL)."""
    return document + "\0glance"


def _ms_since(t: float) -> float:
    return (time.perf_counter() - t) * 1e3
