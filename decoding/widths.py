"""Which pass widths compute the same bits: measured on the loaded model, at start-up.

A token's logits depend on the kernels its pass runs, and those are chosen by the pass's shape.
The engine holds the key length fixed (the static cache) and pads every decoding pass of the
target to a width it picks from a set of widths that compute identical bits. On this project's
CPU (bf16, AMX), passes of 2 to 16 rows agree to the bit while a 1-row pass differs once the
cache holds more than a few hundred tokens (attention over several key blocks is summed in
another order), and agrees below that; a GPU's kernels may agree on no two widths. So the set is
not assumed: probe passes on the loaded model, at cache lengths from short to nearly full, find
the smallest width `low` such that every width from `low` to the largest gives the same logits
as the largest, for every row, and a pass of k real tokens is padded to max(k, low). Where no
smaller width agrees, `low` is the largest width: one fixed shape.

No padding helps a width that disagrees with itself (a GPU kernel that sums in a timing-dependent
order, say), so the probe also runs the largest width, and every width that disagrees with it,
a second time, and refuses to start where a pass's bits change between two runs: such a device
would give users completions that differ from plain decoding, and this way start-up says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specd.decoding.forward import prefill, step
from specd.decoding.kvcache import KVCache
from specd.decoding.loaded import ModelError
from specd.decoding.settings import EngineSettings

PROBE_PROMPT = 48   # real tokens prefilled first: the short cache length probed


@dataclass(frozen=True)
class Probe:
    """What the probe found for passes up to `width` rows: they are padded to `low_width`; an edit
    may join the first verify pass (`folds`)."""
    width: int
    low_width: int
    folds: bool


def measure_probe(model: torch.nn.Module, settings: EngineSettings, width: int, pad_id: int, vocab: int) -> Probe:
    """The probe the engine runs at start-up for its widest pass, as its settings ask (narrow
    passes, folded edits)."""
    low = width
    if settings.narrow_passes and width > 1:
        low = smallest_equivalent_width(model, settings.capacity, width, pad_id, vocab)
    folds = settings.fold_prompt and folds_exactly(model, settings.capacity, width, settings.prefill_chunk,
                                                   pad_id, vocab)
    return Probe(width, low, folds)


class Nondeterministic(ModelError):
    """A pass gave other bits when run again on the same cache and rows."""


def smallest_equivalent_width(model: torch.nn.Module, capacity: int, largest: int, pad_id: int,
                              vocab: int) -> int:
    """The smallest `low` for which passes of widths low..largest give the largest's bits, at
    every probed cache length."""
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, vocab, (PROBE_PROMPT,), generator=g).tolist()
    block = torch.randint(0, vocab, (largest,), generator=g).tolist()
    cache = KVCache(model, capacity)
    prefill(model, cache, prompt, PROBE_PROMPT, lambda: False)
    low = 1
    for length in probe_lengths(capacity, largest):
        fill_random(cache, length, g)
        reference = _logits(model, cache, block, largest, pad_id)
        check_repeatable(model, cache, block, largest, pad_id, reference)
        # Every width from low up must agree; one that does not raises low past it.
        for width in range(low, largest):
            logits = _logits(model, cache, block[:width], width, pad_id)
            if not torch.equal(logits, reference[:width]):
                check_repeatable(model, cache, block[:width], width, pad_id, logits)
                low = width + 1
    return low


FOLDS = (1, 4, 23)  # prompt tokens folded into a pass, probed: a keystroke's edit is a few to ~25


def folds_exactly(model: torch.nn.Module, capacity: int, width: int, chunk: int, pad_id: int, vocab: int) -> bool:
    """Whether the prompt's last tokens can be computed in the pass that verifies the first draft
    (decoding/engine.py) with the bits a separate prefill gives them: the rows after them, and
    the keys and values they leave, must be identical both ways, for each probed fold size."""
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, vocab, (PROBE_PROMPT + max(FOLDS),), generator=g).tolist()
    block = torch.randint(0, vocab, (width,), generator=g).tolist()
    whole, folded = KVCache(model, capacity), KVCache(model, capacity)
    prefill(model, whole, prompt, chunk, lambda: False)  # the reference: the whole prompt prefilled, once
    expected = step(model, whole, block, width, pad_id)
    for fold in FOLDS:
        head = len(prompt) - fold
        folded.truncate(0)
        prefill(model, folded, prompt[:head], chunk, lambda: False)
        got = step(model, folded, prompt[head:] + block, fold + width, pad_id, prompt=fold)
        if not (torch.equal(got, expected) and _same_kv(whole, folded, len(prompt) + width)):
            return False
    return True


def _same_kv(a: KVCache, b: KVCache, length: int) -> bool:
    return all(torch.equal(x.keys[:, :, :length], y.keys[:, :, :length]) and
               torch.equal(x.values[:, :, :length], y.values[:, :, :length])
               for x, y in zip(a.past.layers, b.past.layers))


def check_repeatable(model: torch.nn.Module, cache: KVCache, rows: list[int], width: int, pad_id: int,
                     first: torch.Tensor) -> None:
    """Run the pass that gave `first` again; raise `Nondeterministic` if its bits changed."""
    again = _logits(model, cache, rows, width, pad_id)
    if not torch.equal(again, first):
        changed = int((again != first).any(-1).sum())
        raise Nondeterministic(
            f"a {width}-row pass over {len(cache.tokens)} cached tokens on {again.device} gave other bits when run "
            f"again ({changed} of {len(rows)} rows): this device is not deterministic with the settings of "
            f"decoding/determinism.py, so decoding cannot be exact on it; use models.device = \"cpu\"")


def probe_lengths(capacity: int, largest: int) -> list[int]:
    """Cache lengths to probe at: the short prompt, the middle and the end of the cache."""
    last = capacity - largest
    return sorted({min(PROBE_PROMPT, last), max(PROBE_PROMPT, min(last, capacity // 2)), max(PROBE_PROMPT, last)})


@torch.inference_mode()
def fill_random(cache: KVCache, length: int, g: torch.Generator) -> None:
    """Make the cache hold `length` positions. Past the real prompt the keys and values are
    random: which kernels run, and in what order they sum, depends on shapes, not on values, and
    random ones cost no prefill of a long prompt at start-up."""
    real = min(len(cache.tokens), PROBE_PROMPT)
    cache.truncate(real)
    for layer in cache.past.layers:
        for t in (layer.keys, layer.values):
            t[:, :, real:length] = torch.randn(t[:, :, real:length].shape, generator=g).to(t.dtype)
        layer.cumulative_length.fill_(length)
    cache.tokens.extend([0] * (length - real))


def _logits(model, cache: KVCache, rows: list[int], width: int, pad_id: int) -> torch.Tensor:
    """The logits of `rows` after what the cache holds, in one pass of `width` rows."""
    length = len(cache.tokens)
    logits = step(model, cache, rows, width, pad_id)
    cache.truncate(length)
    return logits
