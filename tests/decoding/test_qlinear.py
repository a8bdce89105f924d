"""The quantized linear layers: what they compute, and that a row's bits do not depend on the
rows beside it (what lets an edit share a pass with a draft, decoding/forward.py)."""

from __future__ import annotations

import pytest
import torch

from specd.decoding.qlinear import Int4Linear, Int8Linear, dequantized, int4_weights, int8_weights


def _layers(out_features: int = 96, in_features: int = 128):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(out_features, in_features, generator=g) * 0.05
    bias = torch.randn(out_features, generator=g)
    q4, scale, offset = int4_weights(w)
    q8, scale8 = int8_weights(w)
    return w, bias, (q4, scale, offset), (q8, scale8)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_int4_computes_its_dequantized_weights(dtype):
    w, bias, (q, scale, offset), _ = _layers()
    layer = Int4Linear.from_layout(q, scale, offset, bias, dtype)
    x = torch.randn(5, w.shape[1], generator=torch.Generator().manual_seed(1)).to(dtype)
    expected = x.float() @ dequantized(q, scale, offset).T + bias
    assert layer(x).dtype == dtype
    assert torch.allclose(layer(x).float(), expected, atol=0.05, rtol=0.02)
    # and the rounding is the nearest: no weight more than half a step from its value
    assert ((dequantized(q, scale, offset) - w).abs() <= scale.repeat_interleave(32, dim=1) / 2 + 1e-6).all()


def test_int8_computes_its_dequantized_weights():
    w, bias, _, (q, scale) = _layers()
    layer = Int8Linear(q, scale, bias, torch.bfloat16)
    x = torch.randn(3, w.shape[1], generator=torch.Generator().manual_seed(2)).bfloat16()
    expected = x.float() @ (q.float() * scale[:, None]).T + bias
    assert torch.allclose(layer(x).float(), expected, atol=0.05, rtol=0.02)


@pytest.mark.parametrize("kind", ["int4", "int8"])
def test_a_rows_bits_do_not_depend_on_the_rows_beside_it(kind):
    w, bias, four, eight = _layers()
    layer = (Int4Linear.from_layout(*four, bias, torch.bfloat16) if kind == "int4"
             else Int8Linear(*eight, bias, torch.bfloat16))
    x = torch.randn(33, w.shape[1], generator=torch.Generator().manual_seed(3)).bfloat16()
    together = layer(x)
    for i in (0, 7, 32):
        assert torch.equal(layer(x[i:i + 1]), together[i:i + 1])
        assert torch.equal(layer(x[i:i + 3])[0], together[i])  # a 3-row pass, too
