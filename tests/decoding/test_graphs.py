"""The static passes CUDA graphs are captured on (decoding/graphs.py), run here without capture:
the arena lent from cache to cache, the static buffers and the explicit mask give the eager
pass's bits, and an engine with them decodes what it decodes without them."""

from __future__ import annotations

import torch

from specd.decoding import graph_setup, graphs
from specd.decoding.forward import prefill, step
from specd.decoding.kvcache import KVCache
from tests.conftest import device_under_test, tiny_engine, tiny_loaded
from tests.decoding.test_exactness import REPEATING, request

CAPTURE = device_under_test().startswith("cuda")  # real graphs where the suite runs on a GPU


def _session(model, pad_id: int) -> list[torch.Tensor]:
    """Two documents taking turns: prefill chunks, passes of several widths, rollbacks."""
    g = torch.Generator().manual_seed(5)
    docs = [KVCache(model, 160), KVCache(model, 160)]
    prompts = [torch.randint(0, 300, (n,), generator=g).tolist() for n in (70, 45)]
    out = []
    for turn in range(6):
        cache, prompt = docs[turn % 2], prompts[turn % 2]
        prefill(model, cache, prompt + [turn] * 16, 16, lambda: False)
        for width in (4, 8, 8, 4):
            rows = torch.randint(0, 300, (width,), generator=g).tolist()
            out.append(step(model, cache, rows[: width - 1], width, pad_id))
            cache.truncate(len(cache.tokens) - 1)  # roll one token back, as a rejection does
    return out


def test_static_passes_give_the_eager_bits_while_documents_take_turns(tiny_target):
    loaded = tiny_loaded(tiny_target)
    model, pad_id = loaded.model, loaded.tokenizer.pad_token_id
    graphs.detach(model)
    eager = _session(model, pad_id)
    attached = graph_setup.attach(model, capture=CAPTURE)
    static = _session(model, pad_id)
    graphs.detach(model)
    assert len(static) == len(eager)
    for i, (a, b) in enumerate(zip(static, eager)):
        assert torch.equal(a, b), f"pass {i} differs"
    arena = attached.arenas[160]
    assert {(4, 4), (8, 8), (16, 1)} <= set(arena.passes), "every repeated shape got a static pass"
    assert attached.stats.captured == len(arena.passes) and not attached.stats.refused


def test_a_static_pass_counts_as_a_pass_for_the_models_pre_hooks(tiny_target):
    """The scheduler counts passes with a pre-hook on each model; a replay runs no Python, so it
    calls those hooks itself (on a CPU the static pass runs the model, which calls them)."""
    loaded = tiny_loaded(tiny_target)
    model, pad_id = loaded.model, loaded.tokenizer.pad_token_id
    count = [0]
    hook = model.register_forward_pre_hook(lambda module, args: count.__setitem__(0, count[0] + 1))
    try:
        graphs.detach(model)
        _session(model, pad_id)
        eager, count[0] = count[0], 0
        attached = graph_setup.attach(model, capture=CAPTURE)
        for _ in range(2):  # every shape seen twice: captured
            _session(model, pad_id)
        captured, count[0] = attached.stats.captured, 0
        _session(model, pad_id)
        assert attached.stats.captured == captured, "nothing new captured in the counted session"
        assert count[0] == eager, f"{count[0]} passes counted with static passes, {eager} without"
    finally:
        hook.remove()
        graphs.detach(model)


def test_one_off_shapes_and_empty_caches_stay_eager(tiny_target):
    loaded = tiny_loaded(tiny_target)
    model = loaded.model
    attached = graph_setup.attach(model, capture=CAPTURE)
    cache = KVCache(model, 96)
    assert graphs.run_captured(model, cache, [1, 2, 3], 1) is None, "an empty cache runs eagerly"
    # chunks of 7: the first on the empty cache, then seen once, captured, replayed; a one-off 2
    prefill(model, cache, list(range(30)), 7, lambda: False)
    arena = attached.arenas[96]
    assert (7, 1) in arena.passes and (2, 1) not in arena.passes
    assert arena.seen[(7, 1)] == 2 and arena.seen[(2, 1)] == 1
    graphs.detach(model)
    assert graphs.attached(model) is None and cache.past.layers[0].keys is not arena.keys[0]
    assert cache.positions() == 30, "the cache took its contents back"


def test_an_engine_with_static_passes_decodes_the_same_tokens(tiny_target, tiny_draft):
    engine = tiny_engine(tiny_target, tiny_draft, pace_drafts=False)
    prefix, suffix = REPEATING
    want = {d: engine.complete(request(prefix, suffix, d, f"eager-{d}")).tokens for d in ("none", "hybrid")}
    for model in (engine.target.model, engine.draft.model):
        graphs.detach(model)
        graph_setup.attach(model, capture=CAPTURE)
    for drafter in ("none", "hybrid"):
        for document in ("a", "b", "a"):  # new documents, and one coming back
            got = engine.complete(request(prefix, suffix, drafter, f"{drafter}-{document}"))
            assert got.tokens == want[drafter], f"{drafter} on {document}"
    assert graphs.attached(engine.target.model).stats.captured > 0
    assert graphs.attached(engine.draft.model).stats.captured > 0


def test_start_up_warms_the_passes_an_engine_repeats(tiny_target, tiny_draft):
    engine = tiny_engine(tiny_target, tiny_draft)
    assert graph_setup.warm_engine(engine) is None, "no graphs attached, nothing to warm"
    for model in (engine.target.model, engine.draft.model):
        graph_setup.attach(model, capture=CAPTURE)
    note = graph_setup.warm_engine(engine)
    s = engine.settings
    target = graphs.attached(engine.target.model).arenas[s.capacity]
    draft = graphs.attached(engine.draft.model).arenas[s.draft_capacity]
    assert {(w, w) for w in range(engine.low_width, engine.width + 1)} | {(s.prefill_chunk, 1)} <= set(target.passes)
    assert {(1, 1), (512, 1)} <= set(draft.passes)
    assert note.startswith("CUDA graphs warmed in") and "target " in note and "draft " in note
