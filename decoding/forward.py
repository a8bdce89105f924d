"""Forward passes over a KVCache: chunked prefill, the padded decoding step, the draft's free step.

Exactness in bf16. A token's logits depend on the shapes of the pass that computed them: on this
CPU a 1-token step and an 8-token verify pass pick different argmaxes at ~1% of positions. So the
key length is fixed (the static cache's capacity) and every decoding pass of the target is padded
to a width from a set that computes identical bits (decoding/widths.py measures it at start-up:
2 to 8 rows on this CPU). Plain decoding is the same pass with no draft tokens, so a verified token
is computed exactly as plain decoding computes it. The padding costs plain decoding a little;
`specd bench --modes none,none@1` measures how much, and how often one-row passes would differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from specd.decoding import graphs
from specd.decoding.kvcache import KVCache, Rows
from specd.decoding.lean import PassStopped


def _forward(model: torch.nn.Module, cache: KVCache, ids: list[int], keep: int,
             stop: Callable[[], bool] | None = None) -> torch.Tensor:
    """Run `ids` after the cached tokens; return the logits of the last `keep` rows. `stop`: the
    lean forward gives up between layers where it says so (lean.PassStopped); others ignore it."""
    start = cache.positions()
    assert start == len(cache.tokens), f"cache holds {len(cache.tokens)} ids but {start} positions"
    if (captured := graphs.run_captured(model, cache, ids, keep)) is not None:  # CUDA graphs: decoding/graphs.py
        return captured
    if (lean := getattr(model, "specd_lean", None)) is not None:          # CPU block weights: decoding/lean.py
        return lean(cache, ids, keep, stop)
    device = model.device
    with _final_states(model) as final:
        out = model(
            input_ids=torch.tensor([ids], device=device),                        # [1, S]
            **cache.argument(model),
            cache_position=torch.arange(start, start + len(ids), device=device),  # [S]
            use_cache=True,
            logits_to_keep=keep,
        )
    if final:  # what the `heads` drafter reads, as the lean forward leaves it
        cache.rows = Rows(start + len(ids) - keep, ids[-keep:], final[0][0, -keep:])
    return out.logits[0]                                                      # [keep, V]


@contextmanager
def _final_states(model: torch.nn.Module) -> Iterator[list[torch.Tensor]]:
    """The output of a Llama-shaped model's final norm in the pass run inside: the hidden states
    [1, S, E] its output layer reads (empty for a model of another shape)."""
    kept: list[torch.Tensor] = []
    norm = getattr(getattr(model, "model", None), "norm", None)
    if not isinstance(norm, torch.nn.Module):
        yield kept
        return
    handle = norm.register_forward_hook(lambda module, args, output: kept.append(output))
    try:
        yield kept
    finally:
        handle.remove()


@torch.inference_mode()
def prefill(model: torch.nn.Module, cache: KVCache, ids: list[int], chunk: int,
            cancelled: Callable[[], bool]) -> tuple[int, int, bool]:
    """Make the cache hold `ids`, reusing its longest common prefix and computing the rest in
    chunks. Returns (reused, computed, finished); unfinished means cancelled, and the chunks done
    stay cached for the next call. The lean forward also gives a chunk up between its layers (the
    cache as before it): a chunk of 128 takes ~1.5 s on 2 cores, and the keystroke that cancels a
    read on the idle lane should not wait for it."""
    reused = cache.common_prefix(ids)
    cache.truncate(reused)
    cache.check_room(len(ids) - reused)
    done = reused
    while done < len(ids):
        if cancelled():
            return reused, done - reused, False
        piece = ids[done:done + chunk]
        try:
            _forward(model, cache, piece, keep=1, stop=cancelled)  # only the KV is wanted here
        except PassStopped:
            return reused, done - reused, False
        cache.tokens.extend(piece)
        done += len(piece)
    return reused, done - reused, True


@torch.inference_mode()
def step(model: torch.nn.Module, cache: KVCache, ids: list[int], width: int,
         pad_id: int, prompt: int = 0, stop: Callable[[], bool] | None = None) -> torch.Tensor:
    """One target pass of exactly `width` rows: `ids` (the last `prompt` tokens of the prompt not
    yet cached, where an edit is folded into this pass, then the pending token and any draft),
    then padding (the engine picks `width` from the widths that compute the same bits). The pads
    come after every real token, so causal attention hides them from the real rows; their cache
    positions are dropped at once. Returns the logits of the rows after the prompt's
    [len(ids) - prompt, V]; raises lean.PassStopped, the cache as it was, where `stop` ends it
    early."""
    assert prompt < len(ids) <= width, f"{len(ids)} tokens ({prompt} of the prompt) in a pass of width {width}"
    cache.check_room(width)
    logits = _forward(model, cache, ids + [pad_id] * (width - len(ids)), keep=width - prompt, stop=stop)
    cache.tokens.extend(ids)
    cache.truncate(len(cache.tokens))  # forget the pads' positions
    return logits[: len(ids) - prompt]


@torch.inference_mode()
def draft_step(model: torch.nn.Module, cache: KVCache, ids: list[int]) -> torch.Tensor:
    """A draft model's pass over exactly `ids`: its shapes need not be fixed, since every token it
    proposes is verified. Returns the last row's logits [V]."""
    cache.check_room(len(ids))
    logits = _forward(model, cache, ids, keep=1)
    cache.tokens.extend(ids)
    return logits[-1]
