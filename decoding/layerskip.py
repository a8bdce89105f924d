"""`layerskip`: the target drafts for itself, through a subset of its own layers.

The draft is the target's embedding, the layers of a chosen set, its final norm and its output
layer: no weights of its own. It keeps no cache either. For the tokens already verified it reads
the target's own keys and values at each layer it runs (self-speculative decoding as in Draft &
Verify, arXiv 2309.08168, and SWIFT, arXiv 2410.06916: the full model's entries are the better
ones), and the keys and values of the tokens it drafts go into the positions that the verify pass
then overwrites; after each proposal it puts its layers' lengths back. So it never reads the
prompt a second time, and verification is the usual full target pass: the output stays the
target's, token for token.

Qwen2.5-Coder was not trained for early exit, so which layers to keep is measured: `specd bench
--layerskip` tries the sets of `candidates` on the cases given and keeps the fastest
(models/measured.py, beside the probe's record); until then the engine uses `default`.
A set is written as the layers kept, in ranges: "0-9,14-27".
"""

from __future__ import annotations

import torch

from specd.decoding.draft_model import ModelProposer
from specd.decoding.drafter import DraftJob, Pacing
from specd.decoding.lean import Lean
from specd.decoding.loaded import LoadedModel
from specd.decoding.policy import DraftStop, PassCosts


class LayerSkipDrafter:
    name = "layerskip"

    def __init__(self, target: LoadedModel, layers: tuple[int, ...], pacing: Pacing, stop: DraftStop):
        self.layers, self.pacing, self.stop = layers, pacing, stop
        self.lean = Lean(target.model, layers)

    def begin(self, job: DraftJob) -> LayerSkipProposer:
        return LayerSkipProposer(self, job)


class LayerSkipProposer(ModelProposer):
    """The draft model's proposing (its stop rule, its pacing), on the target's own cache."""

    # not ModelProposer.__init__: no window and no cache of its own
    def __init__(self, drafter: LayerSkipDrafter, job: DraftJob):
        assert job.target_cache is not None, "layerskip drafts on the target's cache"
        self.drafter, self.job, self.cache, self.lean = drafter, job, job.target_cache, drafter.lean
        self.forwards, self.prefill_s = 0, 0.0

    def propose(self, context: list[int], limit: int):
        verified = len(self.cache.tokens)
        try:
            return super().propose(context, limit)
        finally:
            self.cache.rewind(self.drafter.layers, verified)

    def _catch_up(self, context: list[int]) -> torch.Tensor:
        """The tokens the target has not cached yet (the pending one, and an edit folded into the
        first pass) through the kept layers; the logits after the last."""
        verified = len(self.cache.tokens)
        assert self.cache.positions(self.drafter.layers[0]) == verified < len(context), "the target's cache is whole"
        self.forwards += 1
        return self.lean(self.cache, context[verified:], keep=1)[-1]

    def _step(self, token: int) -> torch.Tensor:
        return self.lean(self.cache, [token], keep=1)[-1]


def costs(target_costs: PassCosts, kept: int, layers: int) -> PassCosts:
    """The target's pass costs, with a drafted token costing the kept layers' share of a one-row
    pass (an estimate: the output layer is in every pass and is counted in that share)."""
    return PassCosts(target_costs.verify_ms, target_costs.verify_ms[0] * kept / layers)


def candidates(layers: int) -> dict[str, tuple[int, ...]]:
    """The sets a search tries on a target of `layers` layers, by name: keeping the first layers
    (early exit), or skipping layers in the middle (the first and last few carry the most)."""
    q = layers // 4
    sets = {
        "skip every 2nd in the middle 1/2": default(layers),
        "first 3/4": range(layers - q),
        "first 1/2": range(layers // 2),
        "skip the middle 1/4": [i for i in range(layers) if not layers * 3 // 8 <= i < layers * 5 // 8],
        "skip the middle 1/2": [i for i in range(layers) if not q <= i < layers - q],
        "skip every 2nd but the first and last 4": [i for i in range(layers) if i < 4 or i >= layers - 4 or i % 2 == 0],
    }
    out: dict[str, tuple[int, ...]] = {}
    for name, kept in sets.items():   # proper subsets, each once (a small model makes some alike)
        if 0 < len(kept) < layers and tuple(kept) not in out.values():
            out[name] = tuple(kept)
    return out


def default(layers: int) -> tuple[int, ...]:
    """Before a search: skipping every second layer in the middle half (SWIFT's finding for
    models never trained for it: the middle layers matter least); the first layer alone where
    that leaves every layer (a model of 2 or 3)."""
    q = layers // 4
    kept = tuple(i for i in range(layers) if not (q <= i < layers - q and i % 2))
    return kept if len(kept) < layers else (0,)


def spell(layers: tuple[int, ...]) -> str:
    """(0, 1, 2, 5, 6) -> "0-2,5-6"."""
    runs: list[list[int]] = []
    for i in layers:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in runs)


def parse(text: str, layers: int) -> tuple[int, ...]:
    """"0-9,14-27" -> the layers kept; ValueError says what is wrong."""
    kept: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        try:
            a, b = int(first), int(last or first)
        except ValueError:
            raise ValueError(f"layer set {text!r}: {part!r} is not a layer or a range like 4-9") from None
        if not 0 <= a <= b < layers:
            raise ValueError(f"layer set {text!r}: {part!r} is outside layers 0-{layers - 1}")
        kept.extend(range(a, b + 1))
    if sorted(set(kept)) != kept or not kept:
        raise ValueError(f"layer set {text!r}: layers must be given once each, in order")
    return tuple(kept)
