"""Each decoder layer in one kernel call (decoding/fused.py, kernels/layer.c): it computes what the
lean forward's torch ops compute (to the rounding of the activations' int8 blocks, which a change
in the norm's last bit can move), a row's bits are its own whatever the pass's width and however
its prompt was chunked, and it writes the cache where the ops write it."""

from __future__ import annotations

import pytest
import torch

from specd.decoding import fused, qkernel
from specd.decoding.blocks import BlockLinear
from specd.decoding.kvcache import KVCache
from specd.decoding.lean import Lean
from tests.decoding.test_qkernel import random_blocks

pytestmark = pytest.mark.skipif(not qkernel.available(), reason="specd's kernels were not built here")

# every kind a GGUF file gives, mixed within the calls that share an input (q, k, v; gate, up)
KINDS = {"self_attn.q_proj": qkernel.Q4_K, "self_attn.k_proj": qkernel.Q6_K, "self_attn.v_proj": qkernel.Q8_0,
         "self_attn.o_proj": qkernel.Q4_K, "mlp.gate_proj": qkernel.Q4_K, "mlp.up_proj": qkernel.Q6_K,
         "mlp.down_proj": qkernel.Q6_K}


def block_model(seed: int = 0) -> torch.nn.Module:
    """A two-layer Qwen2 whose projections hold random blocks of KINDS (biases on q, k, v as Qwen2's),
    the output layer Q8_0."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=96, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).float().eval()
    g = torch.Generator().manual_seed(seed)
    for i, layer in enumerate(model.model.layers):
        for path, kind in KINDS.items():
            dense = layer.get_submodule(path)
            bias = None if dense.bias is None else torch.randn(dense.out_features, generator=g) * 0.1
            blocks = random_blocks(kind, dense.out_features, dense.in_features, seed=seed * 100 + i * 10 + len(path))
            parent, name = path.split(".")
            setattr(layer.get_submodule(parent), name, BlockLinear(kind, blocks, dense.in_features, bias))
    # the output layer on blocks too: a dense one's bits would depend on the pass's width
    model.lm_head = BlockLinear(qkernel.Q8_0, random_blocks(qkernel.Q8_0, 96, 256, seed=seed + 7), 256)
    return model


def run(model, lean: Lean, chunks: list[list[int]], capacity: int = 128) -> tuple[torch.Tensor, KVCache]:
    """Every row's logits, the ids passed in `chunks` one pass each, and the cache they left."""
    cache = KVCache(model, capacity)
    logits = []
    for chunk in chunks:
        logits.append(lean(cache, chunk, len(chunk)))
        cache.tokens += chunk
    return torch.cat(logits), cache


IDS = torch.randint(0, 96, (40,), generator=torch.Generator().manual_seed(1)).tolist()


def test_a_layer_in_one_call_computes_what_the_torch_ops_compute():
    model = block_model()
    fast, ops = Lean(model, fuse=True), Lean(model, fuse=False)
    assert fast.fused is not None and ops.fused is None
    got, got_cache = run(model, fast, [IDS[:32], IDS[32:]])
    want, want_cache = run(model, ops, [IDS[:32], IDS[32:]])
    scale = want.abs().max()
    assert (got - want).abs().max() < 0.02 * scale, "the logits, to the activations' rounding"
    for mine, theirs in zip(got_cache.past.layers, want_cache.past.layers):
        assert int(mine.cumulative_length) == int(theirs.cumulative_length) == len(IDS)
        written = slice(0, len(IDS))
        assert (mine.keys[:, :, written] - theirs.keys[:, :, written]).abs().max() < 0.02 * theirs.keys.abs().max()
        assert not mine.keys[:, :, len(IDS):].any(), "nothing written past the rows"


def test_a_rows_bits_do_not_depend_on_its_pass_or_the_chunking():
    model = block_model(seed=3)
    lean = Lean(model, fuse=True)
    whole, whole_cache = run(model, lean, [IDS])
    for chunks in ([IDS[:7], IDS[7:]], [IDS[:20], IDS[20:21], IDS[21:]], [[i] for i in IDS[:5]] + [IDS[5:]]):
        parts, cache = run(model, lean, chunks)
        assert torch.equal(parts, whole), [len(c) for c in chunks]
        for mine, theirs in zip(cache.past.layers, whole_cache.past.layers):
            assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)


def test_the_torch_ops_run_where_asked(monkeypatch):
    model = block_model()
    monkeypatch.setenv("SPECD_FUSED_LAYERS", "0")
    assert Lean(model).fused is None
    monkeypatch.delenv("SPECD_FUSED_LAYERS")
    assert Lean(model).fused is not None


def test_a_layer_with_a_dense_projection_runs_the_torch_ops():
    model = block_model()
    layer = model.model.layers[1]
    layer.mlp.up_proj = torch.nn.Linear(256, 512, bias=False)
    assert not fused.FusedLayers.fits(model) and Lean(model).fused is None


def test_the_layer_clock_sorts_a_pass_into_phases():
    model = block_model()
    lean = Lean(model, fuse=True)
    fused.timing(True)
    run(model, lean, [IDS])
    ms = fused.timing(False)
    assert set(ms) == set(fused.PHASES) and all(v > 0 for v in ms.values()), ms
    run(model, lean, [IDS])
    assert fused.timing(False) == ms, "nothing counted while the clock is off"


@pytest.mark.parametrize("fuse", [True, False])
def test_both_forwards_keep_halves_and_the_pool_counts_their_bytes(fuse):
    """The cache read by specd's attention holds IEEE halves whichever forward wrote it (kernels/half.h),
    and the per-document pool sizes its slots by the bytes those caches really take."""
    from specd.decoding.cachepool import kv_bytes

    model = block_model()
    model.specd_lean = Lean(model, fuse=fuse)
    _, cache = run(model, model.specd_lean, [IDS])
    assert all(layer.keys.dtype == layer.values.dtype == qkernel.KV_DTYPE for layer in cache.past.layers)
    assert cache.nbytes() == kv_bytes(model, cache.capacity)
