"""Quantized targets: the plan per layer, the cache on disk, and the Q4_K blocks a GGUF file keeps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specd.decoding.qlinear import Int4Linear, Int8Linear, dequantized
from specd.models.groups import BLOCK_BYTES, hf_name, unpack
from specd.models.load import load
from specd.models.specs import parse_spec


def _kinds(model) -> dict[str, str]:
    return {name: type(m).__name__ for name, m in model.named_modules() if isinstance(m, (Int4Linear, Int8Linear,
                                                                                          torch.nn.Linear))}


def _logits(loaded, ids):
    with torch.inference_mode():
        return loaded.model(torch.tensor([ids])).logits[0].float()


@pytest.mark.parametrize("kind", ["int4", "int8"])
def test_a_quantized_target_is_planned_cached_and_close(tiny_target, tmp_path, kind):
    said: list[str] = []
    first = load(parse_spec(str(tiny_target)), tmp_path, "cpu", quantize=kind, say=said.append)
    kinds = _kinds(first.model)
    assert not any(k == "Linear" for k in kinds.values()), "every linear layer is quantized"
    if kind == "int4":  # no GGUF behind a plain folder: rounded int4, but the output layer int8
        assert kinds["lm_head"] == "Int8Linear" and kinds["model.layers.0.mlp.down_proj"] == "Int4Linear"
    assert first.dtype == torch.bfloat16 and first.weights == kind
    assert any("quantizing" in line for line in said)
    assert len(list((tmp_path / "quantized").glob(f"*-{kind}.safetensors"))) == 1

    said.clear()
    again = load(parse_spec(str(tiny_target)), tmp_path, "cpu", quantize=kind, say=said.append)
    assert not any("quantizing" in line for line in said), "the second load reads the cache"
    ids = list(range(3, 40))
    assert torch.equal(_logits(first, ids), _logits(again, ids))
    # one row, the probe's and a decoding step's width: the AVX-512 int4 kernel's aligned loads
    # crashed on a packed tensor read in place from the file
    assert torch.equal(_logits(first, ids[:1]), _logits(again, ids[:1]))
    assert all(b.data_ptr() % 64 == 0 for b in again.model.buffers()), "the kernels' buffers are aligned"
    full = load(parse_spec(str(tiny_target)), tmp_path, "cpu", "bf16")
    similarity = torch.nn.functional.cosine_similarity(_logits(first, ids).flatten(), _logits(full, ids).flatten(), 0)
    assert similarity > 0.98, "close to the bf16 model (wrong scales or a wrong layout would be far)"


def test_a_damaged_quantized_cache_is_rebuilt(tiny_target, tmp_path):
    load(parse_spec(str(tiny_target)), tmp_path, "cpu", quantize="int8")
    (cached,) = (tmp_path / "quantized").glob("*.safetensors")
    cached.write_bytes(cached.read_bytes()[:100])
    said: list[str] = []
    load(parse_spec(str(tiny_target)), tmp_path, "cpu", quantize="int8", say=said.append)
    assert any("quantizing" in line for line in said)


def test_q4k_blocks_unpack_as_gguf_dequantizes_them():
    from gguf.quants import Q4_K

    rng = np.random.default_rng(0)
    rows, per_row = 3, 4  # 3 rows of 4 super-blocks (1024 weights)
    blocks = rng.integers(0, 256, size=(rows * per_row, BLOCK_BYTES), dtype=np.uint8)
    blocks[:, 0:2] = np.array([0.01], np.float16).view(np.uint8)   # d: a sane fp16, not random bits
    blocks[:, 2:4] = np.array([0.003], np.float16).view(np.uint8)  # dmin
    expected = Q4_K.dequantize_blocks(blocks).reshape(rows, -1)
    q, scale, offset = unpack(torch.from_numpy(blocks.reshape(rows, -1)))
    assert q.shape == (rows, per_row * 256) and int(q.max()) <= 15
    assert torch.equal(dequantized(q, scale, offset), torch.from_numpy(expected))


def test_gguf_names_map_to_the_modules():
    assert hf_name("blk.11.attn_q.weight") == "model.layers.11.self_attn.q_proj"
    assert hf_name("blk.0.ffn_down.weight") == "model.layers.0.mlp.down_proj"
    assert hf_name("output.weight") == "lm_head"
    assert hf_name("token_embd.weight") == "model.embed_tokens"
    assert hf_name("blk.0.attn_norm.weight") is None


@pytest.mark.skipif(not __import__("specd.decoding.qkernel", fromlist=["x"]).available(),
                    reason="specd's kernels were not built here")
def test_gguf_weights_hold_only_blocks_and_compute_the_model(tiny_target, tmp_path):
    from specd.decoding import qkernel
    from specd.decoding.blocks import BlockEmbedding, BlockLinear

    said: list[str] = []
    first = load(parse_spec(str(tiny_target)), tmp_path, "cpu", quantize="gguf", say=said.append)
    model = first.model
    assert first.weights == "gguf" and first.dtype == torch.float32
    assert first.device_reason.endswith(f"specd's kernels: {qkernel.level()}"), "specd status names the body"
    assert isinstance(model.model.embed_tokens, BlockEmbedding) and isinstance(model.lm_head, BlockLinear)
    assert not any(type(m) in (torch.nn.Linear, torch.nn.Embedding) for m in model.modules()), "nothing dense kept"
    assert not any(t.is_meta for t in [*model.parameters(), *model.buffers()]), "every tensor is materialized"
    assert any("Q8_0" in line for line in said), "a folder with no GGUF behind it is quantized to Q8_0"
    said.clear()
    again = load(parse_spec(str(tiny_target)), tmp_path, "cpu", quantize="gguf", say=said.append)
    assert not any("quantizing" in line for line in said), "the second load reads the cache"
    ids = list(range(3, 40))
    assert torch.equal(_logits(first, ids), _logits(again, ids))
    full = load(parse_spec(str(tiny_target)), tmp_path, "cpu", "fp32")
    similarity = torch.nn.functional.cosine_similarity(_logits(first, ids).flatten(), _logits(full, ids).flatten(), 0)
    assert similarity > 0.99, "close to the float32 model"
